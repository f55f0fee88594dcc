"""SIGINT and SIGTERM during a run: the first asks the run to stop, a second exits at once.

    with catch_stop_signals():
        summary = run(config)          # the orchestrator polls requested() and stops taking pages

A first signal only records the request (a handler must not do more); the orchestrator sees it within half a
second, stops taking pages, lets the batches in progress finish for up to GRACE_S seconds and writes their
results, then ends with a summary and exit code 130 (SIGINT) or 143 (SIGTERM). A second signal removes the
temporary file being written, if any, and exits at once with the same code: no file is left half written.
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


@contextlib.contextmanager
def catch_stop_signals() -> Iterator[None]:
    """Handle SIGINT and SIGTERM as stop requests for the duration (main thread only; elsewhere a no-op)."""
    global _requested
    _requested = None
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _handle) for s in _NAMES}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        _requested = None
