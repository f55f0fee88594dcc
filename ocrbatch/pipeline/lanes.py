"""Prepared pages waiting for a device, in priority lanes: the thread-safe side of batcher.py.

The decode intake (executor.py) `put`s pages (a bulk page blocks while `limit` bulk pages already wait:
back-pressure; an interactive one never blocks); each device's worker `take`s the batch the policy picks when
it is free.
Every page carries its `Reply`: where its result goes (a run's write queue, or a caller's Future), and
whether anyone still wants it: a page whose reply has gone (`wanted()` False) is dropped, never inferred.
`FutureReply` serves the Python API's pages, `RunReply` those of a run.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from typing import Any, Callable, Protocol

from ..errors import ConverterClosedError
from ..records import Batch, PageImage, PageResult
from .batcher import Batcher
from .queue import ClosableQueue, Closed


class Reply(Protocol):
    """Where a page's result goes."""

    lane: str  # "interactive" or "bulk"

    def wanted(self) -> bool:
        """False once nobody waits for the page (a cancelled Future, a stopped run): it is dropped."""

    def start(self) -> bool:
        """The page's batch is starting; False: drop the page (it was cancelled; also called for pages
        the lanes dropped, so that their owner can count them)."""

    def deliver(self, result: PageResult) -> None:
        """The page's result."""

    def fail(self, exc: BaseException) -> None:
        """The page could not be run at all (the engine cannot load, or a bug): an error for its owner."""


class FutureReply:
    """A page submitted through the Python API: its result completes a Future.

    Which answer wins is settled under a lock (a device thread, the decode watchdog and close() may answer at
    once); the Future is completed after it is released, so its done-callbacks, the caller's code, run outside
    every lock of the converter: a callback may call close() or submit() (`answering()` tells close() it runs
    in one)."""

    def __init__(self, future: Future, lane: str, done: Callable[[], None] = lambda: None) -> None:
        self.future, self.lane, self._done = future, lane, done
        self._lock = threading.Lock()
        self._answered = False  # an answer has won (it may be completing the Future outside the lock)
        self._landed = False

    def wanted(self) -> bool:
        return not self.future.cancelled()

    def start(self) -> bool:
        with self._lock:
            go = not self._answered and not self.future.done() and self.future.set_running_or_notify_cancel()
        if go:
            return True
        self._land()  # cancelled (or answered already): dropped
        return False

    def _claim(self) -> bool:
        """Under the lock: this answer wins. Answered already (a stall given up, then the stuck batch ended;
        close() failed it) or cancelled: it loses. A winner's Future is running, so no cancel() comes between."""
        with self._lock:
            if self._answered or self.future.done():
                return False
            if not self.future.running() and not self.future.set_running_or_notify_cancel():
                return False  # cancelled
            self._answered = True
            return True

    def deliver(self, result: PageResult) -> None:
        if self._claim():
            _answer(self.future.set_result, result)
        self._land()  # lost or won, it has landed all the same (exactly once)

    def fail(self, exc: BaseException) -> None:
        if self._claim():
            _answer(self.future.set_exception, exc)
        self._land()

    def _land(self) -> None:
        """The page is off the converter's hands: `done` once, whichever way it ended."""
        with self._lock:
            if self._landed:
                return
            self._landed = True
        self._done()


_answering = threading.local()


def answering() -> bool:
    """True inside a Future's done-callbacks run by a FutureReply (the caller's code, on one of the converter's
    threads, whose end that code must not wait for)."""
    return getattr(_answering, "depth", 0) > 0


def _answer(complete: Callable[[object], None], value: object) -> None:
    _answering.depth = getattr(_answering, "depth", 0) + 1
    try:
        complete(value)  # runs the Future's done-callbacks here, no lock held
    finally:
        _answering.depth -= 1


class Lanes:
    def __init__(self, batcher: Batcher[PageImage], limit: int, cap: Callable[[], int] | None = None) -> None:
        self.batcher = batcher
        self.limit = max(1, limit)
        self._cap = cap  # the batch-size cap now (lowered after an out-of-memory error)
        self._cond = threading.Condition()
        self._closed = False

    def put(self, page: PageImage) -> None:
        """Queue a prepared page (its `reply` set); a bulk page waits while the bulk lane is full."""
        lane = page.priority
        with self._cond:
            while lane == "bulk" and not self._closed and self.batcher.depth()["bulk"] >= self.limit:
                self._cond.wait()
            if self._closed:
                raise ConverterClosedError("the converter was closed before this page was converted")
            self.batcher.add(page, time.monotonic(), lane)
            self._cond.notify_all()

    def take(self, block: bool) -> tuple[Batch | None, list[PageImage]]:
        """The next batch and the pages dropped because nobody wants them any more (to be released).
        Without `block`, None at once when no batch is ready; with it, None only once closed and empty."""
        with self._cond:
            while True:
                dropped = self.batcher.remove(lambda p: p.reply is not None and not p.reply.wanted())
                now = time.monotonic()
                if self._cap is not None:
                    self.batcher.max_batch = self._cap()
                ready = self.batcher.next(now)
                if ready is not None or dropped:
                    self._cond.notify_all()  # room in the bulk lane
                if ready is not None:
                    return Batch(tuple(ready[1]), ready[0]), dropped
                if dropped or not block or (self._closed and not len(self.batcher)):
                    return None, dropped
                deadline = self.batcher.next_deadline()
                self._cond.wait(None if deadline is None else max(0.0, deadline - now) + 0.001)

    def expire(self) -> None:
        """No more pages are coming for now: those waiting go without waiting out their window."""
        with self._cond:
            self.batcher.expire(time.monotonic())
            self._cond.notify_all()

    def wake(self) -> None:
        """Something changed outside (a Future cancelled, a run stopped): look again."""
        with self._cond:
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self.batcher.expire(time.monotonic())
            self._cond.notify_all()

    def depth(self) -> dict[str, int]:
        with self._cond:
            return self.batcher.depth()

    def __len__(self) -> int:
        with self._cond:
            return len(self.batcher)


class RunReply:
    """Where the pages of one run (a `convert`) come back: its write queue, on which this reply is one
    producer; it closes it once the run's feed is done (`sender_done`) and every page taken is back."""

    lane = "bulk"

    def __init__(self, results: ClosableQueue[PageResult], executor: Any,
                 fail: Callable[[BaseException], None]) -> None:
        self.results, self.executor, self.fail = results, executor, fail
        self.stopped = False
        self._pending, self._sealed = 0, False
        self._sending = True
        self._lock = threading.Lock()

    def taken(self) -> None:
        """One more page of the run is on its way to the executor."""
        with self._lock:
            self._pending += 1

    def stop(self) -> None:
        """The run stops: its pages not started yet are dropped (the executor looks again)."""
        self.stopped = True
        self.executor.wake()

    def sender_done(self) -> None:
        with self._lock:
            self._sending = False
        self.executor.expire()  # this run sends no more: its pages need not wait for company
        self._landed(0)

    def wanted(self) -> bool:
        return not self.stopped

    def start(self) -> bool:
        if self.stopped:  # dropped: it will not come back
            self._landed(1)
            return False
        return True

    def deliver(self, result: PageResult) -> None:
        try:
            self.results.put(result)
        except Closed:
            pass  # the run stopped meanwhile
        self._landed(1)

    def _landed(self, n: int) -> None:
        with self._lock:
            self._pending -= n
            done = not self._sending and self._pending == 0 and not self._sealed
            self._sealed |= done
        if done:
            self.results.close()
