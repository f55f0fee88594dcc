"""The driver half of `--ray` (the actor half is ray_actor.py; the dispatch of tasks to the actors ray_tasks.py):
Ray as a kind of device, behind the executor seam (executor.py). `RayExecutor` takes the same Jobs as the local
one and answers each page once on its Reply; the driver (this process) keeps discovery, writing and the
manifest, or the Converter's callers.

    Job (a page ref) ─▶ RayExecutor: refs in tasks (a Batcher) ══▶ actor: DeviceHost ══ results ══▶ Reply

Refs are grouped into tasks by a Batcher (up to --max-batch pages, closed when full or when the first page has
waited --max-wait-ms), on one driver thread; the driver keeps `window(1, 1, streams)` tasks on each actor (the
one window policy, executor.py), so its device's lanes always hold the next pages (continuous decoding: rows
joining as others end). A task is a Ray generator: the actor streams each page's result back as it ends, so the
run's --stall-timeout sees every page finish, as on one machine (`_Sent` keeps a task's pages: a page an actor
answered twice or not at all is still answered once). An actor loads its engine as it starts, and the driver sends
pages only to actors that have (`_started`): a model's load is never counted against --stall-timeout, and an
engine that cannot load stops the run before a page is taken. An actor that dies (a page that kills its process)
is restarted by Ray; the pages it held and had not answered are then run one at a time, each alone on an actor,
so the page at fault fails alone and its neighbours are converted. Files go to the object store once each
(`Blob`); `--debug-layout` pictures come back with their task's results and are written here.

Ray is imported only here, in ray_actor.py and in cluster.py (the connection), and only when `--ray` is given
(`pip install "ocrbatch[ray]"`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any

from ..config import ServiceConfig
from ..errors import ConverterClosedError, UsageError
from ..records import PageRef, PageResult
from .batcher import Batcher
from .executor import Job
from .queue import Closed
from .ray_tasks import WAIT_S, RayDevices

log = logging.getLogger("ocrbatch")

POLL_S = 0.05  # how often the driver thread looks for new jobs while it has pages out


class RayExecutor:
    """Pages run on the cluster's actors (executor.py's seam): each Job's ref joins a task on the driver thread,
    its one result goes to its Reply. The actors start with the first page (or `load`); an engine that cannot
    start raises EngineLoadError there. A failure of the driver itself (every worker dead, an engine that cannot
    load) fails every page it holds with it; `close(wait)` drains the tasks out (or, without `wait`, ends the
    actors at once: the pages out are their owners' to answer)."""

    decoders = 0  # pages are read on the actors
    takes_images = False  # a page goes to an actor as its file's bytes

    def __init__(self, config: ServiceConfig, uses_gpu: bool) -> None:
        self.config, self.uses_gpu = config, uses_gpu
        self.watchers: list = []  # the Stats of the runs that want the figures
        self.devices: RayDevices | None = None
        self.limit = max(64, 4 * config.workers)  # jobs waiting for the driver before a blocking submit waits
        self._start_lock = threading.Lock()
        self._cond = threading.Condition()
        self._jobs: deque[Job] = deque()  # submitted, not yet taken by the driver thread
        self._replies: dict[PageRef, Any] = {}  # a page out (in a task, or forming one) -> its Reply
        self._closing, self._wait, self._expire = False, True, False
        self._error: BaseException | None = None  # the driver failed: every later page fails with it
        self._thread: threading.Thread | None = None

    def start(self) -> RayDevices:
        """The actors, started once (each loads the engine now); raises EngineLoadError when none can."""
        with self._start_lock:
            if self.devices is None:
                if self._closing:
                    raise ConverterClosedError("the converter was closed before this page was taken")
                self.devices = RayDevices(self.config, self.uses_gpu, emit=self._emit, busy=self._busy,
                                          cancelled=lambda: self._closing and not self._wait)
                self._thread = threading.Thread(target=self._drive, args=(self.devices,), name="ray-driver",
                                                daemon=True)
                self._thread.start()
            return self.devices

    def submit(self, job: Job, block: bool = False) -> None:
        if job.image is not None:  # (the Converter sends a given image as a file)
            raise UsageError("a page given as an image cannot be sent to a Ray worker: give its file")
        self.start()
        with self._cond:
            while block and len(self._jobs) >= self.limit and not self._closing and job.reply.wanted():
                self._cond.wait(WAIT_S)
            if self._error is not None or self._closing:
                why = self._error or ConverterClosedError("the converter was closed before this page was taken")
            else:
                why = None
                self._jobs.append(job)
                self._cond.notify_all()
        if why is not None:
            job.reply.fail(why)

    def expire(self) -> None:
        with self._cond:
            self._expire = True
            self._cond.notify_all()

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _drive(self, devices: RayDevices) -> None:
        """The driver thread: jobs in, tasks out, results back to their pages' replies."""
        batcher: Batcher[PageRef] = Batcher(self.config.max_batch, self.config.max_wait_s, key=lambda ref: None)
        later: list[Job] = []  # a page already out (submitted twice at once): it joins once the first is back
        try:
            while True:
                with self._cond:
                    if not self._jobs and not self._closing and not self._expire:
                        self._cond.wait(POLL_S if devices.pending or len(batcher) or later else WAIT_S)
                    jobs, self._jobs = later + list(self._jobs), deque()
                    closing, expire, self._expire = self._closing, self._expire, False
                    self._cond.notify_all()
                now, later = time.monotonic(), []
                for job in jobs:
                    if job.ref in self._replies:
                        later.append(job)
                    else:
                        self._replies[job.ref] = job.reply
                        batcher.add(job.ref, now)
                if expire or closing:
                    batcher.expire(now)
                while (task := batcher.next(now)) is not None:
                    refs = [ref for ref in task[1] if self._started(ref)]
                    if refs:
                        for stats in list(self.watchers):
                            stats.add_batch(len(refs))
                            stats.begin("infer")
                        devices.submit(refs)
                devices.collect(block=False)
                if closing and not len(batcher) and not later:
                    if self._wait:
                        devices.drain()
                    return
        except Closed:  # closing without waiting: the pages out are their owners' to answer
            return
        except BaseException as exc:  # noqa: BLE001 - every page out hears it (EngineLoadError: a run stops)
            log.debug("the Ray driver failed", exc_info=True)
            with self._cond:
                self._error = exc
                jobs, self._jobs = later + list(self._jobs), deque()
            replies, self._replies = list(self._replies.values()) + [j.reply for j in jobs], {}
            for reply in replies:
                reply.fail(exc)
        finally:
            devices.close()

    def _started(self, ref: PageRef) -> bool:
        """The page's task is starting; False: nobody wants it any more (dropped, its owner counts it)."""
        if self._replies[ref].start():
            return True
        del self._replies[ref]
        return False

    def _emit(self, result: PageResult) -> None:
        reply = self._replies.pop(result.ref, None)
        if reply is None:  # (the driver hands on one result per page sent: _Sent)
            log.debug("a result for a page no one waits for: %s", result.ref)
            return
        reply.deliver(result)

    def _busy(self, seconds: float, pages: int) -> None:
        for stats in list(self.watchers):
            stats.add_busy("infer", seconds / max(1, self.devices.workers if self.devices else 1))

    @property
    def width(self) -> int:
        return self.devices.workers if self.devices is not None else 1

    @property
    def stalled(self) -> dict[str, float]:
        return self.devices.stalled if self.devices is not None else {}

    def figures(self) -> tuple:
        return self.devices.figures() if self.devices is not None else ()

    def depth(self) -> dict[str, int]:
        return {"interactive": 0, "bulk": len(self._jobs)}

    def load(self) -> None:
        self.start()

    def loaded(self) -> bool:
        return self.devices is not None

    def describe(self, quick: bool = False) -> dict[str, Any]:
        """The engine's facts as the actors report them, and how many there are (`quick`: not asked)."""
        if self.devices is None:
            return {}
        facts = {} if quick else self.devices.describe()
        return {**facts, "ray_workers": self.devices.workers}

    def close(self, wait: bool = True) -> None:
        with self._cond:
            self._closing, self._wait = True, wait
            self._cond.notify_all()
        with self._start_lock:
            thread, devices = self._thread, self.devices
        if thread is not None:
            thread.join(None if wait else WAIT_S * 20)
        if devices is not None:
            devices.close()  # (again: one stuck in its engine is ended all the same)
