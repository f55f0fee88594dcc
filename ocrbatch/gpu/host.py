"""This process's CPU use and resident memory, read without extra packages (psutil is not a dependency)."""

from __future__ import annotations

import os
import sys
import time


class ProcessMeter:
    """Call `read()` now and then: CPU % since the previous call (100 = one core busy) and RSS in bytes."""

    MIN_SPAN_S = 0.25  # os.times() ticks at 10 ms: a shorter span gives noise

    def __init__(self) -> None:
        self._last = (time.monotonic(), _cpu_seconds())
        self._pct = 0.0

    def read(self) -> tuple[float, int | None]:
        now, cpu = time.monotonic(), _cpu_seconds()
        t0, c0 = self._last
        if now - t0 >= self.MIN_SPAN_S:
            self._pct = max(0.0, 100.0 * (cpu - c0) / (now - t0))
            self._last = (now, cpu)
        return self._pct, rss_bytes()


def _cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


def rss_bytes() -> int | None:
    """Resident set size now; on systems without /proc, the peak so far; None when unknown."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        pass
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB elsewhere
