"""Scale-out on a Ray cluster (`--ray`): Ray as a kind of device. The driver (this process) keeps discovery,
writing and the manifest; each Ray actor holds the engine side of a local run on its device.

    driver: discover ─refs─▶ remote (RayDevices: refs in tasks) ══▶ actor: DeviceHost ══ results ══▶ write
    actor:  task's refs ─▶ decode (decode.read, the local path's) ─▶ Service: lanes ─▶ Devices ─▶ InferWorker

An actor's engine side is service.py's `Service`, built as a local run builds it for one device: the same
lanes and batcher, the same `Devices` and `InferWorker` (continuous decoding included, its ledger, its stall
watchdog), either backend. It decodes the pages it is sent with the local path's `decode.read` (text layer
first, `--debug-layout` pictures), in `--workers` threads. Pages travel as file bytes: each input file goes
into Ray's object store once, and an actor keeps the last few on its disk; no pixels cross the driver.
`--debug-layout` pictures come back with their task's results and are written on the driver.

Refs are grouped into tasks by a Batcher (up to --max-batch pages, closed when full or when the first page
has waited --max-wait-ms); an actor runs a few tasks at once (IN_FLIGHT), so its device's lanes always hold
the next pages (continuous decoding: rows joining as others end). A task is a Ray generator: the actor streams
each page's result back as it ends, so the driver's --stall-timeout sees every page finish, as on one machine
(`_Sent` keeps a task's pages: a page an actor answered twice or not at all is still recorded once). An actor
loads its engine as it starts, and the driver sends pages only to actors that have (`_started`): a model's load
is never counted against --stall-timeout, and an engine that cannot load stops the run before a page is taken.
An actor that dies (a page that kills its process) is restarted by Ray; the pages it held and had not answered
are then run one at a time, each alone on an actor, so the page at fault fails alone and its neighbours are
converted.

Ray is imported only here and in cluster.py (the connection), and only when `--ray` is given
(`pip install "ocrbatch[ray]"`).
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import tempfile
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from ..config import RunConfig, ServiceConfig
from ..errors import EngineLoadError, OcrbatchError, error_line
from ..records import PageRef, PageResult, Source, Status
from .batcher import Batcher
from .decode import DecodeSettings
from .queue import ClosableQueue, Closed

log = logging.getLogger("ocrbatch")

IN_FLIGHT = 2  # tasks queued per actor with static batches: one running, the next ready to start
IN_FLIGHT_STREAMS = 4  # with continuous decoding: enough pages waiting that rows join as others end
CPU_THREADS = 2  # CPUs an actor of a CPU engine asks for, unless --threads says otherwise
STARTUP_S = 120.0  # how long workers may take to start (a node being added, packages imported)
RESTARTS = 4  # times Ray restarts a dead actor (a page that kills its process) before it is gone for good
WAIT_S = 0.5  # the longest the remote stage waits for a task without looking at the run again
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
    (`landed`), so the task streams them back to the driver page by page."""

    lane = "bulk"

    def __init__(self, pages: int) -> None:
        self.error: BaseException | None = None  # a page that could not be run at all (the engine cannot load)
        self._new: list[PageResult] = []
        self._left = pages
        self._changed = threading.Condition()

    def wanted(self) -> bool:
        return True

    def start(self) -> bool:
        return True

    def deliver(self, result: PageResult) -> None:
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
    Service: lanes, Devices, InferWorker) and decode threads in front of it, as a local run has."""

    def __init__(self, config: ServiceConfig, engine_class: type, settings: DecodeSettings) -> None:
        import ray

        from ..engines import registry
        from .decode import DecodePool, PdfCache
        from .service import Service

        if config.engine not in registry.names():  # an engine registered on the driver only (tests' fault engines)
            registry.register(config.engine, engine_class)
        options = config.engine_options
        # --debug-layout: pictures go to this actor's disk first, and back to the driver with their task
        self.layout_dir = Path(tempfile.mkdtemp(prefix="ocrbatch-ray-layout-")) if options.debug_layout else None
        if self.layout_dir is not None:
            options = dataclasses.replace(options, debug_layout=self.layout_dir)
            settings = dataclasses.replace(settings, debug_layout=self.layout_dir)
        device = "cuda:0" if ray.get_gpu_ids() else "cpu"  # Ray shows an actor the GPU it was given as cuda:0
        self.service = Service(dataclasses.replace(config, engine_options=options, devices=device, ray=None))
        self.front, self.lanes = self.service.front, self.service.lanes
        # The first prepare's one-time work (a fresh process: imports, the processor) done now, while the driver
        # waits for its actors to start: once it sends pages, their time counts against --stall-timeout.
        try:
            self.front.warm()
        except Exception as exc:  # noqa: BLE001 - the first page's prepare meets it again and says so
            log.debug("warming the engine's front: %s", error_line(exc))
        self.settings = settings
        self.pdfs = PdfCache(config.workers + 1)
        self.decoders = DecodePool(config.workers, name="ray-decode")
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
            self.service.devices.load()
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
        task = _Task(len(refs))
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
            for ref in refs:
                self.decoders.submit(lambda ref=ref: self._read(ref, local[ref.source.path], task))
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
        devices = self.service.devices
        return TaskAnswer(results, self._layout_files(refs), bool(devices.stalled), devices.figures())

    def _read(self, ref: PageRef, path: Path, task: _Task) -> None:
        """One page, as a local decode thread does it: decoded, prepared, into the lanes (or finished)."""
        from .decode import read

        here = dataclasses.replace(ref, source=dataclasses.replace(ref.source, path=path))
        try:
            page = read(here, self.settings, self.pdfs, self.front)
            if isinstance(page, PageResult):  # text layer, or failed; named after the driver's file
                task.deliver(dataclasses.replace(page, ref=ref))
                return
            page.ref, page.reply = ref, task
            self.lanes.put(page)
        except Exception as exc:  # noqa: BLE001 - the engine cannot prepare at all, or the lanes closed
            task.fail(exc)

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


@dataclass
class _Sent:
    actor: int
    refs: list[PageRef]
    at: float  # perf_counter when sent
    deaths: int  # the actor's deaths when it was sent (a death is counted once, by its first task)
    alone: bool  # a page of a dead actor's, run with nothing else on its actor
    answered: set[PageRef] = field(default_factory=set)  # the pages whose one result came back

    def fresh(self, results: list[PageResult]) -> list[PageResult]:
        """The first result of each page of this task among `results`; a second one, or one for a page it was not
        sent, is dropped (a worker's bug must not give a page two records)."""
        first = []
        for result in results:
            if result.ref in self.answered or result.ref not in self.refs:
                log.debug("a Ray worker returned an extra result for %s; dropped", result.ref)
                continue
            self.answered.add(result.ref)
            first.append(result)
        return first

    def unanswered(self) -> list[PageRef]:
        return [r for r in self.refs if r not in self.answered]


class RayDevices:
    """The driver's side of Ray as a device: page refs in, tasks out to the actors (DeviceHost), each page's one
    result back. The remote stage (run below) feeds it in place of the local decode → lanes → Devices."""

    def __init__(self, config: RunConfig, uses_gpu: bool, emit: Callable[[PageResult], None],
                 busy: Callable[[float, int], None], cancelled: Callable[[], bool] = lambda: False) -> None:
        import ray

        from ..engines import registry

        self.config, self.emit, self.busy, self.cancelled = config, emit, busy, cancelled
        options = config.engine_options
        gpu = uses_gpu and config.devices != "cpu"
        resources = ray.cluster_resources()
        if gpu:
            per: dict[str, float] = {"num_gpus": 1, "num_cpus": 1}
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
        engine_class = registry.engine_class(config.engine, config.engine_options)
        streams = options.schedule == "continuous" and engine_class.capabilities.streams
        self.in_flight = IN_FLIGHT_STREAMS if streams else IN_FLIGHT
        service = dataclasses.replace(config.service, engine_options=dataclasses.replace(options, pin_memory=gpu))
        actor = ray.remote(max_restarts=RESTARTS, max_task_retries=0, max_concurrency=self.in_flight + 2,
                           **per)(DeviceHost)
        settings = DecodeSettings.of(config)
        # An actor's load is part of its start: it may take --stall-timeout (a stuck engine), and never less than
        # STARTUP_S (a short --stall-timeout on a busy node must not fail a load that is merely slow)
        self.actors = _started([actor.remote(service, engine_class, settings) for _ in range(count)], STARTUP_S,
                               max(STARTUP_S, config.stall_timeout))
        self.load = {i: 0 for i in range(len(self.actors))}  # tasks in flight per live actor
        self.deaths = {i: 0 for i in range(len(self.actors))}
        self.pending: dict[Any, _Sent] = {}  # task -> what was sent
        self.suspects: list[PageRef] = []  # pages a dead actor held: each runs alone on an idle actor
        self.blobs: OrderedDict[Path, Blob] = OrderedDict()  # recent files already in the object store
        self.stalled: dict[str, float] = {}  # "ray" -> when an actor's device watchdog gave pages up
        self._figures: dict[int, tuple] = {}  # actor -> its device's latest figures
        self.facts: dict[str, Any] = {}  # the engine's facts, as the actors report them at the end

    @property
    def workers(self) -> int:
        return len(self.load)

    def figures(self) -> tuple:
        return tuple(f for i in sorted(self._figures) for f in self._figures[i])

    def submit(self, refs: list[PageRef]) -> None:
        """Send one task to the least busy live actor, waiting first for a free slot (and for the pages of a
        dead actor, which go first, each alone)."""
        ready, blobs = self._blobs(refs)
        if not ready:
            return
        while self.suspects or not self._free():
            if self.cancelled():
                raise Closed("remote")
            self.collect(block=True)
        self._send(ready, blobs, min(self._free(), key=self.load.__getitem__), alone=False)

    def _free(self) -> list[int]:
        return [i for i, n in self.load.items() if n < self.in_flight]

    def _blobs(self, refs: list[PageRef]) -> tuple[list[PageRef], list[Blob]]:
        """The refs whose files are in the object store, and those files; the pages of a file that cannot be
        read any more fail here."""
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
        return ready, [b for b in blobs.values() if b is not None]

    def _send(self, refs: list[PageRef], blobs: list[Blob], i: int, alone: bool) -> None:
        # A Ray generator: the actor streams each page's result back as it ends (docs/scaling.md)
        task = self.actors[i].convert.options(num_returns="streaming").remote(refs, blobs)
        self.pending[task] = _Sent(i, refs, time.perf_counter(), self.deaths[i], alone)
        self.load[i] += 1

    def collect(self, block: bool) -> None:
        """Hand on the results the actors have streamed back (waits up to WAIT_S for one when `block`)."""
        import ray

        self._send_suspects()
        if not self.pending:
            return
        tasks = list(self.pending)
        ready, _ = ray.wait(tasks, num_returns=1, timeout=WAIT_S if block else 0)
        if ready:  # and every other task with news by now
            ready, _ = ray.wait(tasks, num_returns=len(tasks), timeout=0)
        for task in ready:
            sent = self.pending[task]
            try:
                answer = ray.get(next(task))
            except StopIteration:  # the task is over: a page it gave no result for still gets one
                self._ended(task, _failed(sent.unanswered(), "the Ray worker returned no result for this page"))
                continue
            except ray.exceptions.RayTaskError as exc:
                if isinstance(exc.cause, EngineLoadError):
                    raise exc.cause from None
                self._ended(task, _failed(sent.unanswered(), f"worker failed: {error_line(exc.cause or exc)}"))
                continue
            except ray.exceptions.RayActorError as exc:  # it died (Ray restarts it, up to RESTARTS times)
                self._ended(task, [])
                self._died(sent, exc)
                continue
            except ray.exceptions.RayError as exc:  # e.g. Ray's memory monitor killed the task
                self._ended(task, _failed(sent.unanswered(), f"worker failed: {error_line(exc)}"))
                continue
            self._landed(sent, answer)
        self._send_suspects()

    def _landed(self, sent: _Sent, answer: TaskAnswer) -> None:
        """Some of a task's results, as its actor streamed them back."""
        if answer.stalled:
            self.stalled.setdefault("ray", time.monotonic())
        if answer.figures:
            self._figures[sent.actor] = answer.figures
        folder = self.config.engine_options.debug_layout
        for name, content in answer.layout_files:
            if folder is not None:
                _write_picture(Path(folder) / Path(name).name, content)
        for result in sent.fresh(answer.results):
            self.emit(result)

    def _ended(self, task: Any, left: list[PageResult]) -> None:
        """A task is over (its stream ended, or broke off): `left` are the results of the pages it did not answer."""
        sent = self.pending.pop(task)
        if sent.actor in self.load:
            self.load[sent.actor] -= 1
        self.busy(time.perf_counter() - sent.at, len(sent.refs))
        for result in sent.fresh(left):
            self.emit(result)

    def _died(self, sent: _Sent, exc: BaseException) -> None:
        """Actor `sent.actor` died running this task (and every other it held). A page that ran alone there
        killed it: it fails. Otherwise the task's pages become suspects, each run alone next."""
        i = sent.actor
        if sent.alone:
            for result in sent.fresh(_failed(sent.refs, f"the Ray worker converting this page died "
                                                        f"({error_line(exc)})")):
                self.emit(result)
        else:
            self.suspects.extend(sent.unanswered())
        if i in self.load and sent.deaths == self.deaths[i]:  # the first task to report this death
            self.deaths[i] += 1
            if self.deaths[i] > RESTARTS:
                del self.load[i]
                log.warning("a Ray worker died for good (%s); %d left", error_line(exc), len(self.load))
        if not self.load:
            for result in _failed(self.suspects, "every Ray worker died"):
                self.emit(result)
            self.suspects.clear()
            raise EngineLoadError(f"every Ray worker died; the last: {error_line(exc)}")

    def _send_suspects(self) -> None:
        while self.suspects:
            idle = [i for i, n in self.load.items() if n == 0]
            if not idle:
                return
            ref = self.suspects.pop(0)
            ready, blobs = self._blobs([ref])
            if ready:
                self._send(ready, blobs, idle[0], alone=True)

    def drain(self) -> None:
        while self.pending or self.suspects:
            if self.cancelled():
                return
            self.collect(block=True)

    def describe(self) -> dict[str, Any]:
        """The engine's facts as the actors report them (merged as a local run merges its devices')."""
        import ray

        from .service import merge_facts

        try:
            return merge_facts(ray.get([self.actors[i].describe.remote() for i in self.load], timeout=WAIT_S * 20))
        except Exception as exc:  # noqa: BLE001 - the summary goes without them
            log.debug("the Ray workers' facts: %s", error_line(exc))
            return {}

    def close(self) -> None:
        """End the actors (one stuck in its engine included: the run is over)."""
        for a in self.actors:
            _end(a)

    def _blob(self, src: Source) -> Blob:
        import ray

        blob = self.blobs.get(src.path)
        if blob is None or blob.source != src:
            blob = Blob(src, ray.put(src.path.read_bytes()))
            self.blobs[src.path] = blob
            while len(self.blobs) > 4 * len(self.actors) + 8:  # tasks in flight keep their own references
                self.blobs.popitem(last=False)
        self.blobs.move_to_end(src.path)
        return blob


def _write_picture(path: Path, content: bytes) -> None:
    """A --debug-layout file an actor drew, into the folder here; as layout/debug.py does it: a file that cannot be
    written (a FIFO there, a full disk) is a warning, never a change to the page's result."""
    from ..errors import UsageError
    from ..safefiles import check_file

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        check_file(path, "--debug-layout file")
        path.write_bytes(content)
    except (OSError, UsageError) as exc:
        log.warning("--debug-layout: cannot write %s: %s", path, getattr(exc, "strerror", None) or exc)


def _failed(refs: list[PageRef], why: str) -> list[PageResult]:
    return [PageResult(ref=r, status=Status.FAILED, error=why) for r in refs]


def run(config: RunConfig, uses_gpu: bool, refs: ClosableQueue[PageRef], results: ClosableQueue[PageResult],
        stats, connected: Callable[["RayDevices"], None]) -> None:
    """The remote stage: refs grouped into tasks, sent to the cluster's actors; their results to `results`."""
    devices = RayDevices(config, uses_gpu, emit=results.put,
                         busy=lambda seconds, pages: stats.add_busy("infer", seconds / max(1, devices.workers)),
                         cancelled=lambda: results.closed)
    connected(devices)
    batcher: Batcher[PageRef] = Batcher(config.max_batch, config.max_wait_s, key=lambda ref: None)

    def send(now: float) -> None:
        while (task := batcher.next(now)) is not None:
            stats.add_batch(len(task[1]))
            stats.begin("infer")
            devices.submit(task[1])

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
            devices.collect(block=False)
        devices.drain()
        if not results.closed:  # not stopped: the actors answer at once
            devices.facts = devices.describe()
    finally:
        devices.close()
        results.close()


def one_each(refs: list[PageRef], results: list[PageResult]) -> list[PageResult]:
    """Exactly one result for each page a task was sent, as the driver keeps it (`_Sent`): a second result for
    a page is dropped, a page the worker returned nothing for fails (a worker's bug must not lose it)."""
    sent = _Sent(-1, refs, 0.0, 0, False)
    first = sent.fresh(results)
    return first + _failed(sent.unanswered(), "the Ray worker returned no result for this page")


def _started(actors: list, timeout: float, load_s: float) -> list:
    """The actors that came up within `timeout` and then loaded the engine within `load_s`; the others (no room
    for them on the cluster, an engine stuck loading or failing to load there) are dropped with a warning rather
    than left holding tasks forever. Raises the load's error (EngineLoadError) when no actor is left."""
    up = _answering(actors, "node", timeout, "started", "the cluster lacks the CPUs or GPUs they ask for")
    return _answering(up, "ready", load_s, "loaded the engine", "the longer of --stall-timeout and 2 minutes")


def _answering(actors: list, method: str, timeout: float, what: str, why: str) -> list:
    """The actors whose call to `method` answered within `timeout`; the others are ended."""
    import ray

    probes = {getattr(a, method).remote(): a for a in actors}
    ready, late = ray.wait(list(probes), num_returns=len(probes), timeout=timeout)
    up, errors = [], []
    for r in ready:
        try:
            ray.get(r)
            up.append(probes[r])
        except ray.exceptions.RayError as exc:  # its __init__ or its load failed: the engine cannot be made
            cause = getattr(exc, "cause", None)
            errors.append(cause if isinstance(cause, OcrbatchError) else exc)
            _end(probes[r])
    for r in late:
        _end(probes[r])
    if not up:
        if errors:
            first = errors[0]
            raise first if isinstance(first, OcrbatchError) else \
                EngineLoadError(f"no Ray worker could start: {error_line(first)}")
        raise EngineLoadError(f"no Ray worker {what} within {timeout:.0f} s ({why})")
    if late or errors:
        log.warning("%d of %d Ray workers %s (%s); going on with %d", len(late) + len(errors), len(actors),
                    f"failed: {error_line(errors[0])}" if errors else f"had not {what} within {timeout:.0f} s",
                    why, len(up))
    return up


def _end(actor: Any) -> None:
    import ray

    try:
        ray.kill(actor)
    except Exception as exc:  # noqa: BLE001 - already gone
        log.debug("ending a Ray worker: %s", error_line(exc))
