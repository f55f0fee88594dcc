"""A first, simple layout: top-to-bottom lines grouped into paragraphs. (Replaced by the full layout.)"""

from __future__ import annotations

from statistics import median
from typing import Sequence

from ..records import TextLine


def lines_to_markdown(lines: Sequence[TextLine], width: int, height: int) -> str:
    if not lines:
        return ""
    ordered = sorted(lines, key=lambda l: (round(l.box[1] / max(1.0, l.height / 2)), l.box[0]))
    h = median(l.height for l in ordered)
    paras: list[list[str]] = [[]]
    prev = None
    for line in ordered:
        if prev is not None and line.box[1] - prev.box[3] > 0.8 * h:
            paras.append([])
        paras[-1].append(line.text)
        prev = line
    return "\n\n".join(" ".join(p) for p in paras if p) + "\n"
