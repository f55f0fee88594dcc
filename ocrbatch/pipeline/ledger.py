"""The run's page ledger: every page a stage takes gets exactly one record, whatever raises where.

    discover ─refs─▶ [taken] feed ─▶ executor ─▶ … ─▶ [answered] write
                        └──────── ledger: taken, not yet answered ────────┘

A page is *taken* the moment the run's feed gets its ref off the refs queue (for the executor, local or Ray)
(`LedgerQueue.get` enters it before returning). It is *answered* when the write stage takes its result
(`answer`): the first result is written, a second one for the same page is dropped. What is still taken
and unanswered when the run ends is answered by `left_over` (`close_out`) with one record saying why (a stall,
a stop cut short, or a page the pipeline lost: a bug, but never a silent one). So the manifest always holds
exactly one record per page taken.

The stall watchdog reads it too (watchdog.py: `RunStall`): pages are in flight and none has been answered
for `--stall-timeout` seconds (`stalled_for`).
"""

from __future__ import annotations

import logging
import threading
import time

from ..errors import Interrupted, OcrbatchError, StalledError
from ..records import PageRef, PageResult, Status
from .queue import ClosableQueue

log = logging.getLogger("ocrbatch")


class PageLedger:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._taken: dict[PageRef, float] = {}  # ref -> when it was taken
        self._answered: set[PageRef] = set()
        self.progress = time.monotonic()  # when a page was last answered (or the first one taken after none)
        self.duplicates = 0  # second results dropped

    def take(self, ref: PageRef) -> None:
        with self._lock:
            now = time.monotonic()
            if not self._taken:
                self.progress = now  # the watchdog's clock starts with the first page in flight
            self._taken.setdefault(ref, now)

    def answer(self, result: PageResult) -> bool:
        """The write stage has `result`: True to write it; False when its page already has its record."""
        ref = result.ref
        if ref is None:  # a whole file that failed before its pages were known
            return True
        with self._lock:
            if ref in self._answered:
                self.duplicates += 1
                return False
            self._answered.add(ref)
            self._taken.pop(ref, None)
            self.progress = time.monotonic()
            return True

    def in_flight(self) -> int:
        with self._lock:
            return len(self._taken)

    def stalled_for(self, now: float) -> float:
        """Seconds since a page was last answered while pages are in flight (0 when none is): the watchdog's."""
        with self._lock:
            return now - self.progress if self._taken else 0.0

    def stalled(self, timeout_s: float, now: float | None = None) -> bool:
        """Pages are in flight and none has been answered for `timeout_s` seconds."""
        return self.stalled_for(now if now is not None else time.monotonic()) > timeout_s

    def close_out(self, why: str) -> list[PageResult]:
        """One failed result, saying `why`, for each page still taken and unanswered (now answered)."""
        with self._lock:
            left = sorted(self._taken, key=self._taken.__getitem__)
            self._taken.clear()
            self._answered.update(left)
        return [PageResult(ref=ref, status=Status.FAILED, error=why) for ref in left]


    def left_over(self, stopping: OcrbatchError | None, crash: BaseException | None) -> list[PageResult]:
        """At the run's end: the pages taken and never answered, each with its one record saying why (a stall, a
        stop that cut them short, or lost: a bug, said so)."""
        status, why = Status.FAILED, "lost: no result came back for this page (an ocrbatch bug; rerun to retry it)"
        if isinstance(stopping, StalledError):
            why = f"stalled: {stopping}"
        elif isinstance(stopping, Interrupted):
            status, why = Status.CANCELLED, f"cancelled: {stopping.signal_name} stopped the run first"
        elif stopping is not None or crash is not None:
            status, why = Status.CANCELLED, f"cancelled: the run stopped first ({stopping or crash})"
        left = self.close_out(why)
        if left and status is Status.FAILED and stopping is None:
            log.error("%d page(s) got no result: recorded as failed (this is a bug, please report it)", len(left))
        for result in left:
            result.status = status
        return left


class LedgerQueue(ClosableQueue[PageRef]):
    """The refs queue: a ref got off it is in the ledger before `get` returns."""

    def __init__(self, ledger: PageLedger, maxsize: int, producers: int = 1, name: str = "") -> None:
        super().__init__(maxsize, producers, name)
        self.ledger = ledger

    def get(self, timeout: float | None = None) -> PageRef | None:
        ref = super().get(timeout)
        if ref is not None:
            self.ledger.take(ref)
        return ref
