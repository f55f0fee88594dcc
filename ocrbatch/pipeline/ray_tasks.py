"""The driver's side of `--ray` tasks (ray_driver.py feeds it): `RayDevices` starts the actors (ray_actor.py's
DeviceHost), sends each task of page refs to the least busy live actor with its files (`Blob`), takes back the
results each task streams, and keeps every page answered once (`_Sent`): a page answered twice or not at all by
its task, a dead actor's pages (each rerun alone), an actor that never started or loaded (`_started`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..config import ServiceConfig
from ..errors import EngineLoadError, OcrbatchError, error_line
from ..records import PageRef, PageResult, Source, Status
from .decode import DecodeSettings
from .batcher import window
from .executor import merge_facts
from .queue import Closed
from .ray_actor import Blob, DeviceHost, TaskAnswer

log = logging.getLogger("ocrbatch")

CPU_THREADS = 2  # CPUs an actor of a CPU engine asks for, unless --threads says otherwise
STARTUP_S = 120.0  # how long workers may take to start (a node being added, packages imported)
RESTARTS = 4  # times Ray restarts a dead actor (a page that kills its process) before it is gone for good
WAIT_S = 0.5  # the longest the driver waits for a task without looking at its jobs again


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
    result back (`emit`). RayExecutor (ray_driver.py) feeds it from its driver thread."""

    def __init__(self, config: ServiceConfig, uses_gpu: bool, emit: Callable[[PageResult], None],
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
        self.in_flight = window(1, 1, streams)  # tasks per actor: each a batch (the one window policy)
        service = dataclasses.replace(config, engine_options=dataclasses.replace(options, pin_memory=gpu))
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
