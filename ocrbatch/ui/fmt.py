"""Small number formatters shared by the panel, the log lines and the summary table."""

from __future__ import annotations


def duration(seconds: float | None) -> str:
    """42s, 4m05s, 1h10m; '?' when unknown."""
    if seconds is None:
        return "?"
    s = int(round(max(0.0, seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def wall(seconds: float) -> str:
    """Wall time with a decimal under a minute: 1.1 s, 4m05s."""
    return f"{seconds:.1f} s" if seconds < 60 else duration(seconds)


def size(n: int | None) -> str:
    """Bytes as MiB below 1 GiB, else GiB with one decimal."""
    if n is None:
        return "?"
    if n < 2**30:
        return f"{n / 2**20:.0f} MiB"
    return f"{n / 2**30:.1f} GiB"


def gib_pair(used: int, total: int) -> str:
    return f"{used / 2**30:.1f}/{total / 2**30:.1f} GiB"


def pct(fraction: float) -> str:
    return f"{100 * fraction:.0f}%"


def rate(pages_per_s: float) -> str:
    return f"{pages_per_s:.2f}" if pages_per_s < 100 else f"{pages_per_s:.0f}"
