"""Scale-out on a Ray cluster (`--ray`): the remote stage, in place of decode, batch and infer; pages are
converted by Ray actors on the cluster's machines.

    discover ─refs─▶ remote: batch refs, dispatch ══ tasks ══▶ PageConverter actors (decode, engine)
                         │ each input file's bytes go into Ray's object store once      ══ results ══▶ write

Refs are grouped into tasks by the local path's Batcher (up to --max-batch pages, closed when full or when
the first page has waited --max-wait-ms); actors decode and prepare pages with the local path's
`decode.read` and run them through the same InferWorker.

The driver (this process) still discovers, writes and keeps the manifest, so outputs, resume, the
summary and exit codes are those of a local run. Each actor holds one engine: one actor per GPU for
a GPU engine, one per `--threads` CPUs (default 2) otherwise. An actor decodes the pages it is sent
(text layer first, as locally) and runs them through the same InferWorker, so a bad page fails alone.
Nodes need ocrbatch and the engine's packages installed; no shared file system is needed.

Ray is imported only here, and only when `--ray` is given (`pip install "ocrbatch[ray]"`).
"""

from __future__ import annotations

import dataclasses
import logging
import tempfile
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..config import EngineOptions, RunConfig
from ..errors import EngineLoadError, OcrbatchError, error_line
from ..records import PageRef, PageResult, Source, Status
from .batcher import Batcher
from .queue import ClosableQueue, Closed

log = logging.getLogger("ocrbatch")

IN_FLIGHT = 2  # tasks queued per actor: one running, the next ready to start
CPU_THREADS = 2  # CPUs an actor of a CPU engine asks for, unless --threads says otherwise
STARTUP_S = 120.0  # how long workers may take to start (a node being added, packages imported)


@dataclass(frozen=True)
class Blob:
    """An input file in Ray's object store, under the identity the driver discovered."""

    source: Source
    data: Any  # ray.ObjectRef to the file's bytes


def connect(address: str) -> None:
    """Join the cluster at `address`: auto (RAY_ADDRESS, or the cluster this machine is part of),
    local (a private Ray instance on this machine, for this run) or a head's address."""
    try:
        import ray
    except ImportError as exc:
        raise EngineLoadError('--ray needs Ray: pip install "ocrbatch[ray]"') from exc
    if ray.is_initialized():
        return
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.ERROR}
    try:
        if address == "local":
            ray.init(**kwargs)
        else:
            ray.init(address=address, **kwargs)
    except ConnectionError as exc:
        raise EngineLoadError(f"cannot reach the Ray cluster at {address}: {error_line(exc)}") from exc


def shutdown() -> None:
    import ray

    ray.shutdown()


class PageConverter:
    """The body of one Ray actor: an engine, loaded on first use, and the decode steps before it."""

    def __init__(self, engine_class: type, options: EngineOptions, dpi: int, text_layer: str,
                 max_batch: int, max_pixels: int = 200_000_000) -> None:
        from ..gpu.throughput import ThroughputController
        from .decode import PdfCache

        self.front = engine_class(options)  # decodes and prepares the pages it is sent
        self.engine = self.front.runner()  # and runs them on this actor's device
        self.loaded = False
        self.controller = ThroughputController(max_batch)  # lowered after an out-of-memory error, for good
        self.dpi, self.text_layer, self.max_pixels = dpi, text_layer, max_pixels
        self.keep_furniture = options.keep_furniture  # text-layer pages too, as on the driver
        self.pdfs = PdfCache(2)
        self.dir = Path(tempfile.mkdtemp(prefix="ocrbatch-ray-"))
        self.files: OrderedDict[tuple, Path] = OrderedDict()  # the last few input files, on local disk
        self.written = 0

    def node(self) -> str:
        import ray

        return ray.util.get_node_ip_address()

    def convert(self, refs: list[PageRef], blobs: list[Blob]) -> list[PageResult]:
        """Every page of `refs` as one result each, in any order."""
        from .decode import read
        from .infer import InferWorker

        local = {b.source.path: self._local(b) for b in blobs}
        results: list[PageResult] = []
        images = []
        for ref in refs:
            here = dataclasses.replace(ref, source=dataclasses.replace(ref.source, path=local[ref.source.path]))
            page = read(here, self.dpi, self.pdfs, self.text_layer, self.front, self.max_pixels,
                        self.keep_furniture)
            if isinstance(page, PageResult):  # text layer, or failed; named after the driver's file
                results.append(dataclasses.replace(page, ref=ref))
            else:
                page.ref = ref
                images.append(page)
        if images:
            if not self.loaded:
                import ray

                device = "cuda:0" if ray.get_gpu_ids() else "cpu"
                try:
                    self.engine.load(device)
                except OcrbatchError:
                    raise
                except Exception as exc:  # noqa: BLE001 - whatever the engine raised, it cannot run: exit 5
                    raise EngineLoadError(f"the engine failed to load on a Ray worker's {device}: "
                                          f"{error_line(exc)}") from exc
                self.loaded = True
            worker = InferWorker(self.engine, results.append, self.controller)
            try:
                worker.run_batch(images)
            finally:
                worker.release(images)  # a failure to free is logged, never the pages' failure
        return results

    def _local(self, blob: Blob) -> Path:
        """The file on this node's disk (written once per file and kept for its next pages)."""
        import ray

        src = blob.source
        key = (str(src.path), src.size, src.mtime_ns)
        if key in self.files:
            self.files.move_to_end(key)
            return self.files[key]
        self.written += 1
        path = self.dir / f"{self.written}-{src.path.name}"  # never reused: the PDF cache keys on it
        path.write_bytes(ray.get(blob.data))
        self.files[key] = path
        while len(self.files) > 8:
            _, old = self.files.popitem(last=False)
            old.unlink(missing_ok=True)
        return path


class Dispatcher:
    """Driver side: page refs in, tasks out to the actors, results back (run by the pipeline's
    remote stage in place of decode, batch and infer)."""

    def __init__(self, config: RunConfig, uses_gpu: bool, emit: Callable[[PageResult], None],
                 busy: Callable[[float, int], None]) -> None:
        import ray

        from ..engines import registry

        self.config, self.emit, self.busy = config, emit, busy
        options = config.engine_options
        gpu = uses_gpu and config.devices != "cpu"
        resources = ray.cluster_resources()
        if gpu:
            per = {"num_gpus": 1, "num_cpus": 1}
            count = config.ray_workers or int(resources.get("GPU", 0))
            if count < 1:
                raise EngineLoadError(f"the {config.engine} engine needs GPUs and the Ray cluster has none "
                                      "(or use --devices cpu)")
        else:
            total = resources.get("CPU", 1.0)
            cpus = options.threads or CPU_THREADS
            count = config.ray_workers or max(1, int(total // cpus))
            # Asked for more workers than fit: they share the CPUs (Ray accepts fractions).
            per = {"num_cpus": min(float(cpus), total / count), "num_gpus": 0}
            # Ray does not pin CPUs: an engine sizing itself by the node's CPUs would oversubscribe them.
            options = dataclasses.replace(options, threads=max(1, int(per["num_cpus"])))
        options = dataclasses.replace(options, pin_memory=gpu,
                                      buffer_pages=options.buffer_pages or 2 * config.max_batch)
        actor = ray.remote(max_restarts=1, max_task_retries=1, **per)(PageConverter)
        engine_class = registry.engine_class(config.engine, config.engine_options)
        actors = [actor.remote(engine_class, options, config.dpi, config.text_layer, config.max_batch,
                               config.max_pixels)
                  for _ in range(count)]
        self.actors = _started(actors, STARTUP_S)
        self.load = {i: 0 for i in range(len(self.actors))}  # tasks in flight per live actor
        self.pending: dict[Any, tuple[int, list[PageRef], float]] = {}  # task -> (actor, refs, sent at)
        self.blobs: OrderedDict[Path, Blob] = OrderedDict()  # recent files already in the object store

    @property
    def workers(self) -> int:
        return len(self.load)

    def submit(self, refs: list[PageRef]) -> None:
        """Send one task to the least busy live actor, waiting first for a free slot."""
        blobs: dict[Path, Blob | None] = {}
        ready = []
        for ref in refs:
            src = ref.source
            if src.path not in blobs:
                try:
                    blobs[src.path] = self._blob(src)
                except OSError as exc:  # gone or unreadable since it was discovered: its pages fail
                    blobs[src.path] = None
                    log.debug("cannot read %s", src.path, exc_info=True)
                    why = f"cannot read: {exc.strerror or exc}"
            if blobs[src.path] is None:
                self.emit(PageResult(ref=ref, status=Status.FAILED, error=why))
            else:
                ready.append(ref)
        if not ready:
            return
        while min(self.load.values()) >= IN_FLIGHT:
            self.collect(block=True)
        i = min(self.load, key=self.load.__getitem__)
        task = self.actors[i].convert.remote(ready, [b for b in blobs.values() if b is not None])
        self.pending[task] = (i, ready, time.perf_counter())
        self.load[i] += 1

    def collect(self, block: bool) -> None:
        """Hand on the results of finished tasks (waits for one when `block`)."""
        import ray

        if not self.pending:
            return
        done, _ = ray.wait(list(self.pending), num_returns=1, timeout=None if block else 0)
        for task in done:
            if task not in self.pending:
                continue  # its actor died and it was sent elsewhere
            i, refs, sent = self.pending[task]
            try:
                results = ray.get(task)
            except ray.exceptions.RayTaskError as exc:
                if isinstance(exc.cause, EngineLoadError):
                    raise exc.cause from None
                results = self._failed(refs, f"worker failed: {error_line(exc.cause or exc)}")
            except ray.exceptions.RayActorError as exc:  # it died, was restarted, and died again
                self._lost(i, exc)
                continue
            except ray.exceptions.RayError as exc:  # e.g. Ray's memory monitor killed the task
                results = self._failed(refs, f"worker failed: {error_line(exc)}")
            del self.pending[task]
            self.load[i] -= 1
            self.busy(time.perf_counter() - sent, len(refs))
            for result in one_each(refs, results):
                self.emit(result)

    def _lost(self, i: int, exc: BaseException) -> None:
        """Actor `i` is gone for good. The task it was running (its oldest) killed it: those pages fail.
        Tasks still queued on it go to the other actors."""
        mine = sorted((sent, task) for task, (j, _, sent) in self.pending.items() if j == i)
        del self.load[i]
        log.warning("a Ray worker died for good (%s); %d left", error_line(exc), len(self.load))
        for n, (_, task) in enumerate(mine):
            _, refs, _ = self.pending.pop(task)
            if n == 0:
                for result in self._failed(refs, "the worker converting this page died, twice"):
                    self.emit(result)
            elif not self.load:
                for result in self._failed(refs, "every Ray worker died"):
                    self.emit(result)
            else:
                self.submit(refs)
        if not self.load:
            raise EngineLoadError(f"every Ray worker died; the last: {error_line(exc)}")

    def drain(self) -> None:
        while self.pending:
            self.collect(block=True)

    def _failed(self, refs: list[PageRef], why: str) -> list[PageResult]:
        return [PageResult(ref=r, status=Status.FAILED, error=why) for r in refs]

    def _blob(self, src: Source) -> Blob:
        import ray

        blob = self.blobs.get(src.path)
        if blob is None or blob.source != src:
            blob = Blob(src, ray.put(src.path.read_bytes()))
            self.blobs[src.path] = blob
            while len(self.blobs) > 4 * len(self.load) + 8:  # tasks in flight keep their own references
                self.blobs.popitem(last=False)
        self.blobs.move_to_end(src.path)
        return blob


def run(config: RunConfig, uses_gpu: bool, refs: ClosableQueue[PageRef], results: ClosableQueue[PageResult],
        stats, connected: Callable[["Dispatcher"], None]) -> None:
    """The remote stage: refs grouped into tasks, sent to the cluster's actors; their results to `results`."""
    dispatcher = Dispatcher(config, uses_gpu, emit=results.put,
                            busy=lambda seconds, pages: stats.add_busy("infer", seconds / max(1, dispatcher.workers)))
    connected(dispatcher)
    batcher: Batcher[PageRef] = Batcher(config.max_batch, config.max_wait_s, key=lambda ref: None)

    def send(now: float) -> None:
        while (task := batcher.next(now)) is not None:
            stats.add_batch(len(task[1]))
            stats.begin("infer")
            dispatcher.submit(task[1])

    try:
        while True:
            try:
                ref = refs.get(0.05)
            except Closed:
                batcher.expire(time.monotonic())
                send(time.monotonic())
                break
            if ref is not None:
                batcher.add(ref, time.monotonic())
            send(time.monotonic())
            dispatcher.collect(block=False)
        dispatcher.drain()
    finally:
        results.close()


def one_each(refs: list[PageRef], results: list[PageResult]) -> list[PageResult]:
    """Exactly one result for each page a task was sent: a second result for a page is dropped, a page the
    worker returned nothing for fails (a worker's bug must not lose it)."""
    by_ref: dict[PageRef, PageResult] = {}
    for result in results:
        if result.ref in by_ref or result.ref not in refs:
            log.debug("a Ray worker returned an extra result for %s; dropped", result.ref)
            continue
        by_ref[result.ref] = result
    missing = [PageResult(ref=r, status=Status.FAILED, error="the Ray worker returned no result for this page")
               for r in refs if r not in by_ref]
    return list(by_ref.values()) + missing


def _started(actors: list, timeout: float) -> list:
    """The actors that came up within `timeout`; the others (no room for them on the cluster) are
    dropped with a warning rather than left holding tasks forever."""
    import ray

    probes = {a.node.remote(): a for a in actors}
    ready, late = ray.wait(list(probes), num_returns=len(probes), timeout=timeout)
    up, errors = [], []
    for r in ready:
        try:
            ray.get(r)
            up.append(probes[r])
        except ray.exceptions.RayError as exc:  # the worker's __init__ failed: the engine cannot be made
            cause = getattr(exc, "cause", None)
            errors.append(cause if isinstance(cause, OcrbatchError) else exc)
    for r in late:
        ray.kill(probes[r])
    if not up:
        if errors:
            first = errors[0]
            raise first if isinstance(first, OcrbatchError) else \
                EngineLoadError(f"no Ray worker could start: {error_line(first)}")
        raise EngineLoadError(f"no Ray worker started within {timeout:.0f} s: the cluster lacks the CPUs or "
                              "GPUs they ask for")
    if late:
        log.warning("%d of %d Ray workers did not start within %.0f s (not enough room on the cluster); "
                    "going on with %d", len(late), len(actors), timeout, len(up))
    return up
