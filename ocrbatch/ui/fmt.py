"""Small formatters shared by the panel, the log lines and the summary table: numbers, and text made safe."""

from __future__ import annotations

import re

# What a name must not carry onto a terminal: C0 and C1 control characters (a newline forges a log line, ESC
# starts an escape sequence), DEL, and the marks that reorder text on screen (bidi overrides and isolates).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def safe(text: str) -> str:
    """`text` with every control character written out as an escape (\\n, \\x1b, \\u202e): one line that only
    shows, whatever a file's name holds. Every message and panel text that carries a name goes through it."""
    return _UNSAFE.sub(_escaped, text)


def _escaped(m: re.Match) -> str:
    c = m.group()
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
    return named.get(c) or (f"\\x{ord(c):02x}" if ord(c) <= 0xFF else f"\\u{ord(c):04x}")


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
