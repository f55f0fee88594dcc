"""Box geometry shared by the layout steps: text rows, projection gaps, robust sizes.

Boxes are (x0, y0, x1, y1) in page pixels, y growing down. Detector boxes are padded around the ink
and consecutive lines often touch, so vertical tests use a box's *core*: its middle half.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import median
from typing import Iterable, Sequence

from ..records import TextLine
from .params import PARAMS

Box = tuple[float, float, float, float]


def core(line: TextLine) -> tuple[float, float]:
    """The middle half of a line's box, vertically: robust against padded, touching boxes."""
    y0, y1 = line.box[1], line.box[3]
    q = (y1 - y0) / 4
    return y0 + q, y1 - q


def ink(line: TextLine) -> TextLine:
    """`line` with its box narrowed by the detector's padding (a fraction of its height a side)."""
    x0, y0, x1, y1 = line.box
    pad = min(PARAMS.box_pad * (y1 - y0), 0.25 * (x1 - x0))  # never more than a quarter of its width a side
    return TextLine(line.text, (x0 + pad, y0, x1 - pad, y1), line.score)


def run_on(line: TextLine, lines: Iterable[TextLine], gap: float, level: float, until: float) -> float:
    """Where `line` ends with the pieces that follow it on its row at most `gap` apart (their middles
    within `level` of its, in the taller's height), none ending past `until`: one line the detector
    boxed in pieces."""
    x0, x1 = line.box[0], line.box[2]
    cy = (line.box[1] + line.box[3]) / 2
    for other in sorted(lines, key=lambda l: l.box[0]):
        if x1 < other.box[2] <= until and x0 < other.box[0] <= x1 + gap \
                and abs((other.box[1] + other.box[3]) / 2 - cy) <= level * max(line.height, other.height):
            x1 = other.box[2]
    return x1


def union(boxes: Iterable[Box]) -> Box:
    bs = list(boxes)
    return (min(b[0] for b in bs), min(b[1] for b in bs), max(b[2] for b in bs), max(b[3] for b in bs))


def body_height(lines: Sequence[TextLine]) -> float:
    """The height of ordinary text lines on the page: the median over lines of some length."""
    if not lines:
        return 1.0
    wide = [l.height for l in lines if (l.box[2] - l.box[0]) >= 3 * l.height] or [l.height for l in lines]
    return max(1.0, float(median(wide)))


def gaps(intervals: Iterable[tuple[float, float]], min_gap: float) -> list[tuple[float, float]]:
    """Empty stretches of at least `min_gap` between the union of `intervals` (inside their extent)."""
    out: list[tuple[float, float]] = []
    reach = None
    for a, b in sorted(intervals):
        if reach is not None and a - reach >= min_gap:
            out.append((reach, a))
        reach = b if reach is None else max(reach, b)
    return out


@dataclass
class Row:
    """Lines side by side on one visual row, left to right."""

    lines: list[TextLine]
    region: int = 0  # which reading-order region the row came from
    column: tuple = ()  # which column (the path of vertical cuts) the region lies in
    box: Box = field(init=False)

    def __post_init__(self) -> None:
        self.lines.sort(key=lambda l: l.box[0])
        self.box = union(l.box for l in self.lines)

    @property
    def height(self) -> float:
        return float(median(l.height for l in self.lines))

    @property
    def x0(self) -> float:
        return self.box[0]

    @property
    def x1(self) -> float:
        return self.box[2]

    def cells(self, min_gap: float) -> list[list[TextLine]]:
        """Runs of lines separated by horizontal gaps of at least `min_gap`."""
        out: list[list[TextLine]] = [[self.lines[0]]]
        for prev, line in zip(self.lines, self.lines[1:]):
            if line.box[0] - prev.box[2] >= min_gap:
                out.append([line])
            else:
                out[-1].append(line)
        return out

    @property
    def text(self) -> str:
        return " ".join(l.text.strip() for l in self.lines if l.text.strip())


def group_rows(lines: Sequence[TextLine]) -> list[Row]:
    """Lines whose boxes overlap vertically by at least half the smaller height share a row.

    A line joins the row whose vertical centre is nearest, compared with the row's own median line
    rather than its growing union, so a slightly skewed or crowded page does not chain rows together.
    """
    rows: list[list[TextLine]] = []
    centres: list[tuple[float, float]] = []  # (centre, height) of each row's first line
    for line in sorted(lines, key=lambda l: (l.box[1] + l.box[3]) / 2):
        y0, y1 = line.box[1], line.box[3]
        best, best_d = None, None
        for i in range(len(rows) - 1, max(-1, len(rows) - 4), -1):  # only recent rows can overlap
            cy, h = centres[i]
            top, bot = cy - h / 2, cy + h / 2
            overlap = min(y1, bot) - max(y0, top)
            if overlap >= 0.5 * min(h, y1 - y0) and not _collides(rows[i], line):
                d = abs((y0 + y1) / 2 - cy)
                if best_d is None or d < best_d:
                    best, best_d = i, d
        if best is None:
            rows.append([line])
            centres.append(((y0 + y1) / 2, y1 - y0))
        else:
            rows[best].append(line)
    return sorted((Row(r) for r in rows), key=lambda r: (r.box[1] + r.box[3]) / 2)


def _collides(row: list[TextLine], line: TextLine) -> bool:
    """True if `line` overlaps a line of `row` horizontally by much: then it is on another row."""
    for other in row:
        ov = min(other.box[2], line.box[2]) - max(other.box[0], line.box[0])
        if ov > 0.3 * min(other.box[2] - other.box[0], line.box[2] - line.box[0]):
            return True
    return False
