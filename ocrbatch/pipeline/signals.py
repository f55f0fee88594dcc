"""SIGINT, SIGTERM and SIGHUP during a run: the first asks the run to stop, a second to stop now.

    install()                          # first thing in `ocrbatch convert`: a signal from now on is kept
    with catch_stop_signals():
        summary = run(config)          # the orchestrator polls requested() and stops taking pages

A first signal only records the request (a handler must not do more); the orchestrator sees it within half a
second, stops taking pages, lets the batches in progress finish for up to GRACE_S seconds and writes their
results, then ends with a summary and exit code 130 (SIGINT), 143 (SIGTERM) or 129 (SIGHUP: a terminal closed,
an ssh session killed). A second signal asks for the same at once (`forced()`): the pages in progress are not
waited for; every page taken still gets its record (cancelled), the manifest is whole and the summary (--json
too) is printed. Should the run not get there within FORCE_S seconds (a thread stuck where nothing polls), or
a third signal come, the temporary file being written is removed and the process exits with the same code: no
file is left half written.

The command line installs the handler (`install`) before anything else, so a signal that comes while it
starts (imports, loading) is kept and the run, when it starts, stops at once with its summary. Signals a parent
left blocked are unblocked then: one that came meanwhile is kept the same way.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from typing import Callable, Iterator

from .. import atomic
from ..errors import ExitCode, Interrupted, OcrbatchError

log = logging.getLogger("ocrbatch")

GRACE_S = 10.0  # how long the batches in progress may take to finish after a stop was asked for
FORCE_S = 10.0  # after a second signal, how long the run may take to record its pages before the process exits

_NAMES = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}
_CODES = {signal.SIGINT: ExitCode.INTERRUPTED, signal.SIGTERM: ExitCode.TERMINATED,
          signal.SIGHUP: ExitCode.HANGUP}
_requested: Interrupted | None = None
_forced = False  # a second signal came: stop now
_running = False  # a run polls requested() and forced(): a second signal can be left to it


def requested() -> Interrupted | None:
    """The stop a signal asked for during this run, if any."""
    return _requested


def forced() -> bool:
    """A second signal came: the pages in progress are not waited for."""
    return _forced


def poll(stopping: OcrbatchError | None, deadline: float, aborted: bool, stop: Callable[..., None]) -> None:
    """The run's look at the signals, on its writing thread every half second at least: a first one stops it
    taking pages (`stop(why=..., grace_s=GRACE_S)`: those in progress may finish); when that grace is over, or
    a second signal came, it stops at once (`stop()`)."""
    if stopping is None:
        if (why := requested()) is not None:
            log.warning("%s: taking no more pages; finishing the pages in progress (up to %.0f s; send it again "
                        "to stop at once)", why.signal_name, GRACE_S)
            stop(why=why, grace_s=GRACE_S)
    elif not aborted and (time.monotonic() > deadline or forced()):
        if isinstance(stopping, Interrupted) and not forced():
            log.warning("the pages in progress did not finish within %.0f s; they are recorded as cancelled "
                        "(a rerun redoes them)", GRACE_S)
        stop()


def _handle(signum: int, _frame: object) -> None:
    global _requested, _forced
    if _requested is None:
        _requested = Interrupted(_NAMES.get(signum, f"signal {signum}"),
                                 _CODES.get(signum, ExitCode.INTERRUPTED))
        return
    name = _NAMES.get(signum, "signal")
    if _running and not _forced:
        _forced = True
        _say(f"ocrbatch: error: second {name}: stopped at once, recording the pages in progress as cancelled\n")
        timer = threading.Timer(FORCE_S, _exit_now, args=(name,))
        timer.daemon = True
        timer.start()
        return
    _exit_now(name)


def _exit_now(name: str) -> None:
    """No file half written, then out (the run could not end by itself in time, or a third signal came)."""
    atomic.remove_in_flight()
    _say(f"ocrbatch: error: second {name}: stopped at once\n")
    os._exit(int(_requested.exit_code) if _requested is not None else int(ExitCode.TERMINATED))


def _say(text: str) -> None:
    try:
        os.write(2, text.encode())
    except OSError:
        pass


@contextlib.contextmanager
def running() -> Iterator[None]:
    """A run is polling (pipeline/run.py): a second signal asks it to stop now rather than exiting."""
    global _running
    _running = True
    try:
        yield
    finally:
        _running = False


def install() -> bool:
    """Handle SIGINT, SIGTERM and SIGHUP as stop requests from now on, for the rest of the process, and unblock them
    (main thread only: False elsewhere). A request made before a run is kept for it (catch_stop_signals)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    for s in _NAMES:
        signal.signal(s, _handle)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, set(_NAMES))
    return True


def _installed() -> bool:
    return all(signal.getsignal(s) is _handle for s in _NAMES)


@contextlib.contextmanager
def catch_stop_signals() -> Iterator[None]:
    """Handle SIGINT, SIGTERM and SIGHUP as stop requests for the duration (main thread only; elsewhere a no-op). When
    `install` came first, a request already made is kept, and the handler stays afterwards."""
    global _requested
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if _installed():
        yield
        return
    _requested = None
    previous = {s: signal.signal(s, _handle) for s in _NAMES}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        _requested = None
        _forced = False
