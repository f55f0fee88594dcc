"""SIGINT and SIGTERM during a run: the first asks the run to stop, a second exits at once.

    install()                          # first thing in `ocrbatch convert`: a signal from now on is kept
    with catch_stop_signals():
        summary = run(config)          # the orchestrator polls requested() and stops taking pages

A first signal only records the request (a handler must not do more); the orchestrator sees it within half a
second, stops taking pages, lets the batches in progress finish for up to GRACE_S seconds and writes their
results, then ends with a summary and exit code 130 (SIGINT) or 143 (SIGTERM). A second signal removes the
temporary file being written, if any, and exits at once with the same code: no file is left half written.

The command line installs the handler (`install`) before anything else, so a signal that comes while it
starts (imports, loading) is kept and the run, when it starts, stops at once with its summary. Signals a parent
left blocked are unblocked then: one that came meanwhile is kept the same way.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Iterator

from .. import atomic
from ..errors import ExitCode, Interrupted

GRACE_S = 10.0  # how long the batches in progress may take to finish after a stop was asked for

_NAMES = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}
_CODES = {signal.SIGINT: ExitCode.INTERRUPTED, signal.SIGTERM: ExitCode.TERMINATED}
_requested: Interrupted | None = None


def requested() -> Interrupted | None:
    """The stop a signal asked for during this run, if any."""
    return _requested


def _handle(signum: int, _frame: object) -> None:
    global _requested
    if _requested is None:
        _requested = Interrupted(_NAMES.get(signum, f"signal {signum}"),
                                 _CODES.get(signum, ExitCode.INTERRUPTED))
        return
    atomic.remove_in_flight()
    try:
        os.write(2, f"ocrbatch: error: second {_NAMES.get(signum, 'signal')}: stopped at once\n".encode())
    except OSError:
        pass
    os._exit(int(_requested.exit_code))


def install() -> bool:
    """Handle SIGINT and SIGTERM as stop requests from now on, for the rest of the process, and unblock them
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
    """Handle SIGINT and SIGTERM as stop requests for the duration (main thread only; elsewhere a no-op). When
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
