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
from .params import PARAMS, LayoutParams

def _mid(l: TextLine) -> float:
    return (l.box[1] + l.box[3]) / 2


def _same_row(a: TextLine, b: TextLine, p: LayoutParams) -> bool:
    return abs(_mid(a) - _mid(b)) <= p.spaced_pair * min(a.height, b.height) and \
        p.spaced_size_lo <= a.height / b.height <= p.spaced_size_hi


def _spaced(a: TextLine, b: TextLine, h: float, p: LayoutParams) -> bool:
    return 0 < b.box[0] - a.box[2] < h and a.height <= p.spaced_tall * h and b.height <= p.spaced_tall * h


def _next_row(lines: list[TextLine], y: float, step: int, lo: float, hi: float, h: float,
              p: LayoutParams) -> list[TextLine]:
    """The lines of the next row above (step -1) or below (1) the row at height y, between lo and hi."""
    near = [l for l in lines if 0 < step * (_mid(l) - y) <= p.spaced_next * h and l.box[0] < hi and l.box[2] > lo
            and l.height <= p.spaced_tall * h]
    if not near:
        return []
    y = min((_mid(l) for l in near), key=lambda m: abs(m - y))
    return sorted((l for l in near if abs(_mid(l) - y) <= p.spaced_level * h), key=lambda l: l.box[0])


def _in_pieces(lines: list[TextLine], a: TextLine, b: TextLine, h: float, p: LayoutParams) -> bool:
    """The row above or below a and b is in pieces a word space apart too."""
    return any(any(_spaced(x, y, h, p) for x, y in zip(row, row[1:]))
               for row in (_next_row(lines, _mid(a), step, a.box[0] - h, b.box[2] + h, h, p) for step in (-1, 1)))


def _white_rows(lines: list[TextLine], a: TextLine, b: TextLine, h: float, p: LayoutParams) -> list[list[TextLine]]:
    """The rows above and below a and b, one after the next, with nothing across the strip between
    them (a piece ending or starting inside the strip leaves it white: a column's ragged edge, the
    padded boxes of two columns touching across a narrow gutter)."""
    s0, s1 = ink(a).box[2], ink(b).box[0]
    s0, s1 = min(s0, (s0 + s1) / 2 - 1), max(s1, (s0 + s1) / 2 + 1)
    out: list[list[TextLine]] = []
    for step in (-1, 1):
        y = _mid(a)
        while len(out) + 1 < p.spaced_rows:
            row = _next_row(lines, y, step, a.box[0], b.box[2], h, p)
            if not row or any(ink(l).box[0] <= s0 and ink(l).box[2] >= s1 for l in row):
                break
            out.append(row)
            y = _mid(row[0])
    return out


def _gutter(lines: list[TextLine], a: TextLine, b: TextLine, h: float, p: LayoutParams) -> bool:
    """The strip between a and b is a gutter: white down `spaced_rows` rows or more, or down a short
    block of columns, whose lines on either side start and end at the same places, row after row (a
    paragraph's last line aside); pieces of widely set type start and end wherever a word does."""
    rows = _white_rows(lines, a, b, h, p)
    if len(rows) + 1 >= p.spaced_rows:
        return True
    pairs = [(a, b)]
    for row in rows:
        left = [l for l in row if a.box[2] - p.spaced_reach * h <= l.box[2] <= b.box[0] + p.spaced_align * h]
        right = [l for l in row if a.box[2] - p.spaced_align * h <= l.box[0] <= b.box[0] + p.spaced_reach * h]
        if left and right:
            pairs.append((max(left, key=lambda l: l.box[2]), min(right, key=lambda l: l.box[0])))
    wide = [(l, r) for l, r in pairs if min(l.box[2] - l.box[0], r.box[2] - r.box[0]) >= p.spaced_wide * h]
    agree = max((sum(1 for l2, r2 in wide if abs(l2.box[0] - l.box[0]) <= p.spaced_align * h
                     and abs(r2.box[2] - r.box[2]) <= p.spaced_align * h) for l, r in wide), default=0)
    return agree >= max(2, (len(rows) + 1) / 2)


def join_spaced(lines: list[TextLine], h: float, p: LayoutParams = PARAMS) -> list[TextLine]:
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
            if _same_row(prev, line, p) and _spaced(prev, line, h, p) and _in_pieces(lines, prev, line, h, p) \
                    and not _gutter(lines, prev, line, h, p):
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
