"""Text lines from detector quadrilaterals, with the page's skew taken out.

A scan rotated by a degree shifts a column's edge by tens of pixels from top to bottom, enough to close
the gutter between two columns. The detector's quads carry each line's angle; the median angle of the
long lines is the page's skew, and rotating the quads back before taking axis-aligned boxes gives the
layout straight rows and clean gutters. The recognised text is unchanged (crops are taken from quads).
"""

from __future__ import annotations

import math
from statistics import median
from typing import Sequence

from ..records import TextLine

MAX_SKEW_DEG = 10.0


def skew_angle(quads: Sequence[Sequence[Sequence[float]]]) -> float:
    """The page's skew in radians (positive: text rises to the left), from its longer lines."""
    angles, weights = [], []
    for q in quads:
        (x0, y0), (x1, y1) = q[0], q[1]
        (x3, y3), (x2, y2) = q[3], q[2]
        dx = ((x1 - x0) + (x2 - x3)) / 2
        dy = ((y1 - y0) + (y2 - y3)) / 2
        height = math.hypot(x3 - x0, y3 - y0) or 1.0
        if dx <= 0 or math.hypot(dx, dy) < 4 * height:
            continue  # short boxes give noisy angles
        a = math.atan2(dy, dx)
        if abs(math.degrees(a)) <= MAX_SKEW_DEG:
            angles.append(a)
            weights.append(dx)
    if len(angles) < 3:
        return 0.0
    return float(median(angles))


def lines_from_quads(quads, texts: Sequence[str], scores: Sequence[float], width: int, height: int,
                     deskew: bool = True) -> list[TextLine]:
    """TextLines with axis-aligned boxes in the deskewed page frame (same size as the page)."""
    angle = skew_angle(quads) if deskew else 0.0
    c, s = math.cos(-angle), math.sin(-angle)
    cx, cy = width / 2, height / 2
    out = []
    for q, text, score in zip(quads, texts, scores):
        if abs(angle) > math.radians(0.05):
            pts = [(cx + (x - cx) * c - (y - cy) * s, cy + (x - cx) * s + (y - cy) * c) for x, y in q]
        else:
            pts = [(float(x), float(y)) for x, y in q]
        xs = [p[0] for p in pts]
        ys = [p[1] for p in pts]
        out.append(TextLine(str(text), (min(xs), min(ys), max(xs), max(ys)), float(score)))
    return out
