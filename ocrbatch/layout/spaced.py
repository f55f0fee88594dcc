"""Lines of widely set type (a typewriter, a monospaced font) put back together before the reading
order is worked out.

The detector boxes such a line in pieces at its wide word spaces. On a short block the spaces of a
few lines can line up by chance into a white strip down the block, which the reading order would
take for the gutter between two columns and read every sentence in halves. A gutter runs white
down the whole height of its columns; word spaces line up over a few lines at most.
"""

from __future__ import annotations

from ..records import TextLine
from .geometry import ink

SPACED_ROWS = 5  # a strip under a line height wide, white down this many rows, is a gutter (not word spaces by chance)


SPACED_PAIR = 0.25  # pieces of one row have centres this near (in the smaller height) ...
SPACED_SIZE = (0.7, 1.4)  # ... and heights in this ratio; they are a word space apart: under a line height
SPACED_TALL = 1.5  # a piece taller than this (in body heights) is a title, never widely set body type
SPACED_NEXT = 2.5  # the next row above or below lies this near (centre to centre, in body heights)
SPACED_LEVEL = 0.3  # pieces of that row have centres this near
SPACED_ALIGN = 0.3  # lines of columns start and end within this of each other, row after row
SPACED_WIDE = 4.0  # ... and are at least this wide (in body heights)


def _mid(l: TextLine) -> float:
    return (l.box[1] + l.box[3]) / 2


def _same_row(a: TextLine, b: TextLine) -> bool:
    lo, hi = SPACED_SIZE
    return abs(_mid(a) - _mid(b)) <= SPACED_PAIR * min(a.height, b.height) and lo <= a.height / b.height <= hi


def _spaced(a: TextLine, b: TextLine, h: float) -> bool:
    return 0 < b.box[0] - a.box[2] < h and a.height <= SPACED_TALL * h and b.height <= SPACED_TALL * h


def _next_row(lines: list[TextLine], y: float, step: int, lo: float, hi: float, h: float) -> list[TextLine]:
    """The lines of the next row above (step -1) or below (1) the row at height y, between lo and hi."""
    near = [l for l in lines if 0 < step * (_mid(l) - y) <= SPACED_NEXT * h and l.box[0] < hi and l.box[2] > lo
            and l.height <= SPACED_TALL * h]
    if not near:
        return []
    y = min((_mid(l) for l in near), key=lambda m: abs(m - y))
    return sorted((l for l in near if abs(_mid(l) - y) <= SPACED_LEVEL * h), key=lambda l: l.box[0])


def _in_pieces(lines: list[TextLine], a: TextLine, b: TextLine, h: float) -> bool:
    """The row above or below a and b is in pieces a word space apart too."""
    return any(any(_spaced(p, q, h) for p, q in zip(row, row[1:]))
               for row in (_next_row(lines, _mid(a), step, a.box[0] - h, b.box[2] + h, h) for step in (-1, 1)))


def _white_rows(lines: list[TextLine], a: TextLine, b: TextLine, h: float) -> list[list[TextLine]]:
    """The rows above and below a and b, one after the next, with nothing across the strip between
    them (a piece ending or starting inside the strip leaves it white: a column's ragged edge, the
    padded boxes of two columns touching across a narrow gutter)."""
    s0, s1 = ink(a).box[2], ink(b).box[0]
    s0, s1 = min(s0, (s0 + s1) / 2 - 1), max(s1, (s0 + s1) / 2 + 1)
    out: list[list[TextLine]] = []
    for step in (-1, 1):
        y = _mid(a)
        while len(out) + 1 < SPACED_ROWS:
            row = _next_row(lines, y, step, a.box[0], b.box[2], h)
            if not row or any(ink(l).box[0] <= s0 and ink(l).box[2] >= s1 for l in row):
                break
            out.append(row)
            y = _mid(row[0])
    return out


def _gutter(lines: list[TextLine], a: TextLine, b: TextLine, h: float) -> bool:
    """The strip between a and b is a gutter: white down SPACED_ROWS rows or more, or down a short
    block of columns, whose lines on either side start and end at the same places, row after row (a
    paragraph's last line aside); pieces of widely set type start and end wherever a word does."""
    rows = _white_rows(lines, a, b, h)
    if len(rows) + 1 >= SPACED_ROWS:
        return True
    pairs = [(a, b)]
    for row in rows:
        left = [l for l in row if a.box[2] - 0.5 * h <= l.box[2] <= b.box[0] + SPACED_ALIGN * h]
        right = [l for l in row if a.box[2] - SPACED_ALIGN * h <= l.box[0] <= b.box[0] + 0.5 * h]
        if left and right:
            pairs.append((max(left, key=lambda l: l.box[2]), min(right, key=lambda l: l.box[0])))
    wide = [(l, r) for l, r in pairs if min(l.box[2] - l.box[0], r.box[2] - r.box[0]) >= SPACED_WIDE * h]
    agree = max((sum(1 for l2, r2 in wide if abs(l2.box[0] - l.box[0]) <= SPACED_ALIGN * h
                     and abs(r2.box[2] - r.box[2]) <= SPACED_ALIGN * h) for l, r in wide), default=0)
    return agree >= max(2, (len(rows) + 1) / 2)


def join_spaced(lines: list[TextLine], h: float) -> list[TextLine]:
    """Pieces of one line of widely set type (a typewriter, a monospaced font), which the detector
    boxes apart at its wide word spaces, joined back into their line (`h`: the body line height).

    Two pieces side by side on a row, less than a line height apart, are one line when the row
    above or below is in such pieces too (type set wide all through, not a justified column's line
    broken now and then), unless the strip between them is a gutter (`_gutter`)."""
    out: list[TextLine] = []
    rows: dict[int, list[int]] = {}  # the pieces kept so far (indexes into out), by their row
    for line in sorted(lines, key=lambda l: l.box[0]):
        r = int(_mid(line) // h)
        home = None
        for k in (k for rr in (r - 1, r, r + 1) for k in rows.get(rr, [])):
            prev = out[k]
            if _same_row(prev, line) and _spaced(prev, line, h) and _in_pieces(lines, prev, line, h) \
                    and not _gutter(lines, prev, line, h):
                home = k
                break
        if home is None:
            rows.setdefault(r, []).append(len(out))
            out.append(line)
        else:
            prev = out[home]
            box = (prev.box[0], min(prev.box[1], line.box[1]), line.box[2], max(prev.box[3], line.box[3]))
            out[home] = TextLine(prev.text.rstrip() + " " + line.text.lstrip(), box, min(prev.score, line.score))
    return out
