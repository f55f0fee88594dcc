"""The stall watchdog: one thread per engine side (service.py's Service, shared by a Converter's calls, its runs
and a server), looking every `poll` seconds at each thing that can get stuck. What has held pages with none
finished for `--stall-timeout` is given up: its pages get their one result, failed as stalled, so that no
caller and no run waits forever. Each way in watches what it has; the reasons the user reads stay apart:

    thing watched (who watches it)                     stuck when                       then
    a page being read and prepared (the intake, for    on its decode thread too long    it fails: "stalled: reading
      the Converter's pages: executor.py)                                               or preparing the page ..."
    a device's worker (Devices, every way in; a        pages in hand, none finished     they fail: "stalled: no page
      Ray actor's too)                                                                  finished on DEVICE ..."
    a run (pipeline/run.py, `RunStall` below)          pages in flight, none answered,  it stops (exit 8): "no page
                                                       or a device stuck                finished in N s ..."
    every device at once (serve/run.py)                each device stuck                the server stops (exit 8)

A thing is `Stallable`: how long it has been stuck, the reason its pages fail with, and how it gives them up.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from typing import Any, Callable, Iterable, Protocol, TypeVar

from ..errors import StalledError
from .ledger import PageLedger

log = logging.getLogger("ocrbatch")

T = TypeVar("T", bound="Stallable")


class Stallable(Protocol):
    def stalled_for(self, now: float) -> float:
        """Seconds it has held pages with none finished (0 when it holds none, or was given up)."""
        ...

    def reason(self, timeout: float) -> str:
        """What the user reads once it is given up (its pages' error, the stop's message)."""
        ...

    def give_up(self, why: str) -> None:
        """On the watchdog's thread, while the thread that holds its pages may be stuck: each page gets its one
        result (failed with `why`), or the run or server that holds them stops."""
        ...


class Watchdog:
    """One thread, started with the first thing watched, ended by `close`."""

    def __init__(self, timeout: float, name: str = "stall-watchdog") -> None:
        self.timeout = float(timeout)
        self.poll = min(1.0, self.timeout / 4)
        self._name = name
        self._things: list[Stallable] = []
        self._lock = threading.Lock()
        self._looking = threading.Lock()  # one look at a time: the thread's, or a run's last one at its end
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, thing: T) -> T:
        with self._lock:
            self._things.append(thing)
            if self._thread is None and not self._closing.is_set():
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
        return thing

    def unwatch(self, thing: Stallable) -> None:
        with self._lock:
            if thing in self._things:
                self._things.remove(thing)

    def check(self, now: float | None = None) -> int:
        """One look: every thing stuck longer than the timeout is given up. Returns how many were."""
        with self._looking:
            now = time.monotonic() if now is None else now
            with self._lock:
                things = list(self._things)
            stuck = [t for t in things if t.stalled_for(now) > self.timeout]
            for thing in stuck:
                try:
                    thing.give_up(thing.reason(self.timeout))
                except Exception:  # noqa: BLE001 - the watchdog keeps watching the others
                    log.exception("the stall watchdog could not give up %r", thing)
            return len(stuck)

    def _run(self) -> None:
        while not self._closing.wait(self.poll):
            self.check()

    def close(self) -> None:
        self._closing.set()


class Task:
    """One page on a thread that may never come back (a Converter's decode thread): given up once, or finished
    once (`finish`: False when the watchdog gave it up first)."""

    def __init__(self, reason: str, give_up: Callable[[str], None]) -> None:
        self.since = time.monotonic()
        self._reason, self._give_up = reason, give_up
        self._lock = threading.Lock()
        self._over = False

    def _end(self) -> bool:
        with self._lock:
            first, self._over = not self._over, True
            return first

    def stalled_for(self, now: float) -> float:
        return 0.0 if self._over else now - self.since

    def reason(self, timeout: float) -> str:
        return f"stalled: {self._reason} took over {timeout:.0f} s (stall_timeout)"

    def give_up(self, why: str) -> None:
        if self._end():
            self._give_up(why)

    def finish(self) -> bool:
        return self._end()


class RunStall:
    """A run's pages (its ledger: taken and not answered): in flight with none answered for the timeout, or an
    engine stuck on a device (one of `devices`, local Devices or RayDevices, gave pages up) → the run `stop`s,
    its pages in flight failing as stalled (its close_out)."""

    def __init__(self, ledger: PageLedger, devices: Callable[[], Iterable[Any]],
                 stop: Callable[[StalledError], None]) -> None:
        self.ledger, self.devices, self.stop = ledger, devices, stop
        self.stopped = False  # the run stops (for this or another reason): nothing more to watch
        self.timeout = 0.0

    def stalled_for(self, now: float) -> float:
        if self.stopped:
            return 0.0
        stuck = any(d is not None and d.stalled for d in self.devices())
        return math.inf if stuck else self.ledger.stalled_for(now)

    def reason(self, timeout: float) -> str:
        self.timeout = timeout
        return (f"no page finished in {timeout:.0f} s (--stall-timeout); {self.ledger.in_flight()} page(s) in "
                "flight failed, the rest were not started: rerun to retry")

    def give_up(self, why: str) -> None:
        self.stopped = True
        log.error("no page finished in %.0f s with %d in flight: the engine (or a decoder) is stuck; those pages "
                  "fail and the run stops (--stall-timeout)", self.timeout, self.ledger.in_flight())
        self.stop(StalledError(why))
