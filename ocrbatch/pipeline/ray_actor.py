"""The actor half of `--ray` (the driver half is ray_driver.py): one Ray actor's body, `DeviceHost`, the engine
side of a local run on the actor's device, behind the same executor every way in uses (executor.py).

    task's refs + file bytes ─▶ LocalExecutor: Intake (decode.read) ─▶ Service's lanes ─▶ Devices ─▶ results

An actor's engine side is service.py's `Service`, built as a local run builds it for one device: the same
intake, lanes and batcher, the same `Devices` and `InferWorker` (continuous decoding included, its ledger, its
stall watchdog), either backend. Each page of a task is a `Job` whose Reply is the task (`_Task`), which takes
its results as they land, so the task streams them back to the driver page by page. Pages travel as file bytes
(`Blob`): each input file goes into Ray's object store once, and an actor keeps the last few on its disk; no
pixels cross the driver. `--debug-layout` pictures go back with their task's results.

Ray is imported only here, in ray_driver.py and in cluster.py, and only when `--ray` is given.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ..config import ServiceConfig
from ..errors import EngineLoadError, error_line
from ..records import PageRef, PageResult, Source, Status
from .decode import DecodeSettings
from .executor import Job

log = logging.getLogger("ocrbatch")

FILES_KEPT = 8  # input files an actor keeps on its disk for their next pages


@dataclass(frozen=True)
class Blob:
    """An input file in Ray's object store, under the identity the driver discovered."""

    source: Source
    data: Any  # ray.ObjectRef to the file's bytes


@dataclass
class TaskAnswer:
    """What an actor sends back for one task."""

    results: list[PageResult]
    layout_files: list[tuple[str, bytes]] = field(default_factory=list)  # --debug-layout: (file name, content)
    stalled: bool = False  # the actor's device watchdog gave pages up (the engine is stuck there)
    figures: tuple = ()  # the actor's WorkerFigures (stats.py), for the progress view and the summary


class _Task:
    """One task's pages on an actor: the Reply (lanes.py) they carry. Their results are taken as they land
    (`landed`), named after the driver's files (`names`: the actor's copy → the driver's ref)."""

    lane = "bulk"

    def __init__(self, names: dict[PageRef, PageRef]) -> None:
        self.names = names
        self.error: BaseException | None = None  # a page that could not be run at all (the engine cannot load)
        self._new: list[PageResult] = []
        self._left = len(names)
        self._changed = threading.Condition()

    def wanted(self) -> bool:
        return True

    def start(self) -> bool:
        return True

    def deliver(self, result: PageResult) -> None:
        result = dataclasses.replace(result, ref=self.names.get(result.ref, result.ref))
        with self._changed:
            self._new.append(result)
            self._left -= 1
            self._changed.notify_all()

    def fail(self, exc: BaseException) -> None:
        with self._changed:
            self.error = self.error or exc
            self._left -= 1
            self._changed.notify_all()

    def landed(self) -> tuple[list[PageResult], bool]:
        """Waits for news: the results landed since the last call, and whether every page has landed."""
        with self._changed:
            self._changed.wait_for(lambda: self._new or self._left <= 0)
            new, self._new = self._new, []
            return new, self._left <= 0


class DeviceHost:
    """The body of one Ray actor: the engine side of a local run on this actor's device (service.py's
    Service and its LocalExecutor: intake, lanes, Devices, InferWorker)."""

    def __init__(self, config: ServiceConfig, engine_class: type, settings: DecodeSettings) -> None:
        import ray

        from ..engines import registry
        from .decode import PdfCache
        from .service import Service

        if config.engine not in registry.names():  # an engine registered on the driver only (tests' fault engines)
            registry.register(config.engine, engine_class)
        options = config.engine_options
        # --debug-layout: pictures go to this actor's disk first, and back to the driver with their task
        self.layout_dir = Path(tempfile.mkdtemp(prefix="ocrbatch-ray-layout-")) if options.debug_layout else None
        if self.layout_dir is not None:
            options = dataclasses.replace(options, debug_layout=self.layout_dir)
        device = "cuda:0" if ray.get_gpu_ids() else "cpu"  # Ray shows an actor the GPU it was given as cuda:0
        # The driver's DecodeSettings, as they are (but the pictures' folder): the actor reads pages as a local run
        self.service = Service(dataclasses.replace(config, engine_options=options, devices=device, ray=None,
                                                   dpi=settings.dpi, text_layer=settings.text_layer,
                                                   max_pixels=settings.max_pixels))
        self.front, self.executor = self.service.front, self.service.executor
        # The first prepare's one-time work (a fresh process: imports, the processor) done now, while the driver
        # waits for its actors to start: once it sends pages, their time counts against --stall-timeout.
        try:
            self.front.warm()
        except Exception as exc:  # noqa: BLE001 - the first page's prepare meets it again and says so
            log.debug("warming the engine's front: %s", error_line(exc))
        self.pdfs = PdfCache(config.workers + 1)
        self.dir = Path(tempfile.mkdtemp(prefix="ocrbatch-ray-"))
        # Input files on this node's disk: the last few kept for their next pages, those of tasks in progress
        # never removed (key -> [path, tasks using it]).
        self.files: OrderedDict[tuple, list] = OrderedDict()
        self._files_lock = threading.Lock()
        self.written = 0
        # The engine loads on its device now (the model: seconds to minutes), while the driver waits in
        # `_started`, before any page is sent: a load never counts against --stall-timeout, and a load that fails
        # stops the run before a page is taken. An actor Ray restarts loads again as it starts.
        self.load_error: BaseException | None = None
        self._loading = threading.Thread(target=self._load, name="ray-load", daemon=True)
        self._loading.start()

    def _load(self) -> None:
        try:
            self.executor.load()
        except Exception as exc:  # noqa: BLE001 - `ready` raises it to the driver
            self.load_error = exc

    def node(self) -> str:
        import ray

        return ray.util.get_node_ip_address()

    def ready(self) -> str:
        """Once the engine is loaded: this actor's node; raises what the load raised (EngineLoadError)."""
        self._loading.join()
        if self.load_error is not None:
            raise self.load_error
        return self.node()

    def describe(self) -> dict[str, Any]:
        return self.service.describe()

    def convert(self, refs: list[PageRef], blobs: list[Blob]) -> Iterator[TaskAnswer]:
        """Every page of `refs` as one result each, in any order, streamed back as the pages finish (a Ray
        generator, run in one of the actor's task threads): each answer holds the results landed since the last.
        The driver sees each page end, so its --stall-timeout tells a slow actor from a stuck one."""
        local: dict[Path, Path] = {}
        answered: set[PageRef] = set()
        try:
            try:
                for b in blobs:
                    local[b.source.path] = self._local(b)
            except OSError as exc:  # this node's disk cannot take the file: its pages fail here
                why = f"cannot store the file on the Ray worker: {error_line(exc)}"
                yield TaskAnswer([PageResult(ref=r, status=Status.FAILED, error=why) for r in refs])
                return
            here = {dataclasses.replace(r, source=dataclasses.replace(r.source, path=local[r.source.path])): r
                    for r in refs}
            task = _Task(here)
            for ref in here:  # read here as a local run reads it (the run's own ledger watches for a stuck read)
                self.executor.submit(Job(ref, task, pdfs=self.pdfs))
            done = False
            while not done:
                results, done = task.landed()
                if results:
                    answered.update(r.ref for r in results)
                    yield self._answer(results, [r.ref for r in results])
        finally:
            self._done_with(blobs[:len(local)])
        if isinstance(task.error, EngineLoadError):
            raise task.error
        if task.error is not None:  # pages that could not be run: their one result each
            failed = [PageResult(ref=r, status=Status.FAILED, error=error_line(task.error))
                      for r in refs if r not in answered]
            yield self._answer(failed, [r.ref for r in failed])

    def _answer(self, results: list[PageResult], refs: list[PageRef]) -> TaskAnswer:
        return TaskAnswer(results, self._layout_files(refs), bool(self.executor.stalled), self.executor.figures())

    def _layout_files(self, refs: list[PageRef]) -> list[tuple[str, bytes]]:
        """The --debug-layout pictures of `refs` (taken off this actor's disk)."""
        if self.layout_dir is None:
            return []
        from ..layout.debug import debug_name

        files = []
        for ref in refs:
            for suffix in (".txt", ".png"):
                path = self.layout_dir / (debug_name(ref) + suffix)
                try:
                    files.append((path.name, path.read_bytes()))
                    path.unlink()
                except FileNotFoundError:
                    pass
        return files

    def _local(self, blob: Blob) -> Path:
        """The file on this node's disk (written once per file and kept for its next pages), under its own
        name (--debug-layout names pictures after it)."""
        import ray

        key = _key(blob)
        with self._files_lock:
            if key in self.files:
                self.files.move_to_end(key)
                self.files[key][1] += 1
                return self.files[key][0]
            self.written += 1
            path = self.dir / str(self.written) / blob.source.path.name  # never reused: the PDF cache keys on it
            path.parent.mkdir()
            path.write_bytes(ray.get(blob.data))
            self.files[key] = [path, 1]
            return path

    def _done_with(self, blobs: list[Blob]) -> None:
        """A task no longer needs these files; beyond the last FILES_KEPT, those no task uses are removed."""
        with self._files_lock:
            for blob in blobs:
                self.files[_key(blob)][1] -= 1
            idle = [k for k, (_, users) in self.files.items() if users == 0]
            for key in idle[:max(0, len(self.files) - FILES_KEPT)]:
                path, _ = self.files.pop(key)
                shutil.rmtree(path.parent, ignore_errors=True)


def _key(blob: Blob) -> tuple:
    src = blob.source
    return (str(src.path), src.size, src.mtime_ns)
