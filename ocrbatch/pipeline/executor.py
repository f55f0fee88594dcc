"""Where pages run: the one seam every way in uses (a run, the Python API, a server, each Ray actor).

    caller ── Job(page ref or given image, Reply) ──▶ Executor.submit ──▶ one result, to the page's Reply
      LocalExecutor: Intake (decode ×N) ─▶ the Service's lanes ─▶ Devices (infer ×devices)      (this machine)
      RayExecutor (ray_driver.py): refs in tasks ══▶ actors (ray_actor.py), each a LocalExecutor on its device

A caller hands each page over as a `Job` and hears back through its `Reply` (lanes.py) exactly once: `deliver`
(its result), `fail` (it could not be run at all: the engine cannot load, the executor closed) or `start()` that
returns False (dropped: nobody wants it any more, the owner counts it). `close(wait)` finishes (or, without
`wait`, drops) what it holds. Which executor a Service has is chosen once, by `--ray` (service.py); nothing
else tells them apart.

The `Intake` is the one decode intake: `decode.read` on a pool of threads per lane, the same for a run's pages,
the Converter's (`submit`, `stream`, a server's requests) and a Ray actor's. `window` (batcher.py) is the one
batching-window policy: how many pages a caller keeps submitted and unfinished (a server's request,
`Converter.stream`: `Service.window`) and how many tasks the Ray driver keeps on each actor.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Protocol

from ..records import PageImage, PageRef, PageResult, Status
from . import decode
from .batcher import window  # noqa: F401 - the one batching-window policy (batcher.py), for every way in
from .watchdog import Task, Watchdog

@dataclass
class Job:
    """One page for an executor: a ref to read, or an image given as it is (the Python API), and its Reply."""

    ref: PageRef
    reply: Any  # lanes.Reply: where its one result goes
    image: PageImage | None = None  # given as an image: prepared, not read
    pdfs: decode.PdfCache | None = None  # the owner's open PDFs, which its page is read from
    busy: Callable[[float], None] | None = None  # the owner's decode time (held back by the buffers: not busy)
    watched: bool = False  # stuck while read, it fails as stalled (the Python API; a run watches its ledger)


class Executor(Protocol):
    """Where pages run; each page submitted gets exactly one answer on its Reply."""

    watchers: list  # the Stats of the runs that want its figures (batches, busy time)
    decoders: int  # decode threads here (0: pages are read elsewhere)
    limit: int  # pages that may wait for a device before a blocking submit waits

    takes_images: bool  # a page given as an image can be submitted (else: send its file)

    @property
    def width(self) -> int:
        """Devices pages run on at once (local devices, Ray actors)."""

    def start(self) -> None:
        """Be ready to take pages (Ray: the actors start and load the engine; raises EngineLoadError)."""

    def submit(self, job: Job, block: bool = False) -> None:
        """Take a page; with `block`, wait first while the bulk backlog is full (a run's back-pressure)."""

    def expire(self) -> None:
        """No more pages for now: those waiting for company go without waiting out their window."""

    def wake(self) -> None:
        """Something changed outside (a page cancelled, a run stopped): look again."""

    @property
    def stalled(self) -> dict[str, float]:
        """Devices whose stall watchdog gave their pages up (the engine is stuck there)."""

    def figures(self) -> tuple: ...

    def depth(self) -> dict[str, int]:
        """Pages waiting for a device, per lane."""

    def load(self) -> None: ...

    def loaded(self) -> bool: ...

    def describe(self, quick: bool = False) -> dict[str, Any]: ...

    def close(self, wait: bool = True) -> None: ...


class Intake:
    """The one decode intake: threads that read and prepare each Job's page (`decode.read`, or `decode.prepare`
    for a given image) and hand it on: finished already (text layer, failed) to its Reply, an image to `put`
    (the lanes). A pool per lane, so interactive pages never queue behind bulk ones. A watched page stuck on
    its thread for the stall timeout fails as stalled and a fresh thread takes the stuck one's place."""

    def __init__(self, threads: int, settings: decode.DecodeSettings, front: Any, put: Callable[[PageImage], None],
                 watchdog: Watchdog | None) -> None:
        self.settings, self.front, self.put, self.watchdog = settings, front, put, watchdog
        self.threads = max(1, threads)
        self.gave_up = False  # a thread is stuck (its page answered by the watchdog): closing does not wait
        self.backlog = 4 * self.threads  # bulk jobs queued before a blocking submit waits
        self._pools = {"interactive": decode.DecodePool(max(1, self.threads // 2), "decode-interactive"),
                       "bulk": decode.DecodePool(self.threads, "decode-bulk")}
        self._room = threading.Condition()
        self._queued, self._closed = 0, False
        self._taken = itertools.count()
        self._reading: set[int] = set()  # jobs taken and not yet handed on
        self._after: list[tuple[set[int], Callable[[], None]]] = []  # (jobs still to hand on, then call this)

    def submit(self, job: Job, block: bool = False) -> None:
        lane = "interactive" if job.reply.lane == "interactive" else "bulk"
        with self._room:
            while block and lane == "bulk" and self._queued >= self.backlog and not self._closed \
                    and job.reply.wanted():
                self._room.wait()
            if lane == "bulk":
                self._queued += 1
            n = next(self._taken)
            self._reading.add(n)
        self._pools[lane].submit(lambda: self._read_one(job, lane, n))

    def after_taken(self, then: Callable[[], None]) -> None:
        """Call `then` once every job taken so far has been handed on (at once when none is being read)."""
        with self._room:
            if self._reading:
                self._after.append((set(self._reading), then))
                return
        then()

    def _read_one(self, job: Job, lane: str, n: int) -> None:
        try:
            self._read(job, lane, n)
        finally:
            self._handed_on(n)

    def _handed_on(self, n: int) -> None:
        """Job n has left the intake (to the lanes, answered, or given up as stuck): call what waited on it."""
        due = []
        with self._room:
            self._reading.discard(n)
            for left, then in self._after:
                left.discard(n)
                if not left:
                    due.append(then)
            self._after = [(left, then) for left, then in self._after if left]
        for then in due:
            then()

    def _read(self, job: Job, lane: str, n: int) -> None:
        if lane == "bulk":
            with self._room:
                self._queued -= 1
                self._room.notify_all()
        reply = job.reply
        if not reply.wanted():  # dropped before it was read: its owner counts it
            reply.start()
            return

        def stuck(why: str) -> None:  # the watchdog's: the page never left its decode thread
            self.gave_up = True
            self._pools[lane].replace_stuck()  # the pages queued behind it go on
            reply.deliver(PageResult(ref=job.ref, status=Status.FAILED, error=why))
            self._handed_on(n)  # answered: nothing waits for it any more

        task = Task("reading or preparing the page", stuck) if job.watched and self.watchdog else None
        if task is not None:
            task = self.watchdog.watch(task)
        t0 = time.perf_counter()
        try:
            page = decode.prepare(self.front, job.image) if job.image is not None else \
                decode.read(job.ref, self.settings, job.pdfs, self.front)
            if job.busy is not None:
                job.busy(time.perf_counter() - t0 - (page.held_s if isinstance(page, PageImage) else 0.0))
            if isinstance(page, PageResult):
                reply.deliver(page)
                return
            page.reply = reply
            self.put(page)
        except Exception as exc:  # noqa: BLE001 - EngineLoadError, the lanes closed, a bug: its owner hears
            reply.fail(exc)
        finally:
            if task is not None:
                task.finish()
                self.watchdog.unwatch(task)

    def wake(self) -> None:
        with self._room:
            self._room.notify_all()

    def close(self, wait: bool = True) -> None:
        """No more jobs; with `wait`, those queued are read first (never for a thread left stuck); without, those
        not started are dropped (their owners answer them) and no thread is waited for."""
        with self._room:
            self._closed = True
            self._room.notify_all()
        for pool in self._pools.values():
            pool.close(wait=wait and not self.gave_up, drop=not wait)


class LocalExecutor:
    """Pages run on this machine: the Intake's decode threads, then the Service's lanes and Devices."""

    def __init__(self, front: Any, lanes: Any, devices: Any, settings: decode.DecodeSettings, workers: int,
                 watchdog: Watchdog | None) -> None:
        self.front, self.lanes, self.devices = front, lanes, devices
        self.intake = Intake(workers, settings, front, lanes.put, watchdog)
        self.watchers = devices.watchers
        self.decoders = workers
        self.limit = lanes.limit  # bulk pages that wait in the lanes before a decode thread waits for room
        self.takes_images = True

    @property
    def width(self) -> int:
        return len(self.devices.devices)

    def start(self) -> None:
        """Nothing to start: the engine loads on its first batch (or `load`)."""

    def submit(self, job: Job, block: bool = False) -> None:
        self.intake.submit(job, block)

    def expire(self) -> None:
        # once the pages taken so far are in the lanes (at once when none is being decoded), they go without
        # waiting out their window; not before, or the first of them would go alone, ahead of the rest
        self.intake.after_taken(self.lanes.expire)

    def wake(self) -> None:
        self.lanes.wake()
        self.intake.wake()

    @property
    def stalled(self) -> dict[str, float]:
        return self.devices.stalled

    def figures(self) -> tuple:
        return self.devices.figures()

    def depth(self) -> dict[str, int]:
        return self.lanes.depth()

    def load(self) -> None:
        self.devices.load()

    def loaded(self) -> bool:
        return all(self.devices.loaded)

    def describe(self, quick: bool = False) -> dict[str, Any]:
        """Every loaded device's facts, merged."""
        return merge_facts(r.device_facts() for r, up in zip(self.devices.runners, self.devices.loaded) if up)

    def close(self, wait: bool = True) -> None:
        """With `wait`: what waits is read and converted, then the engine unloads. Without (a run cut short): the
        pages not started are dropped, threads held back by the engine's buffers woken, nothing waited for."""
        self.intake.close(wait)
        if wait:
            self.devices.close()
        else:
            self.front.abort()
            self.lanes.close()


def merge_facts(per_device: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The devices' facts as one: a value they share once; numbers that differ added (counts), texts that differ
    joined ("cuda:0, cuda:1")."""
    seen: dict[str, list[Any]] = {}
    for facts in per_device:
        for key, value in facts.items():
            seen.setdefault(key, []).append(value)
    merged: dict[str, Any] = {}
    for key, values in seen.items():
        distinct = list(dict.fromkeys(values))
        if len(distinct) == 1:
            merged[key] = distinct[0]
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            merged[key] = sum(values)
        else:
            merged[key] = ", ".join(map(str, distinct))
    return merged
