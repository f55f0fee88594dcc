"""Flow or records: whether a white strip between text parts two flows of text (columns, read one after
the other) or the cells of rows (a table, a form, a statement, a log: read row by row).

What the field does, and what is taken here (read, not copied):
- T-Recs (Kieninger, "Table structure recognition based on robust block segmentation", 1998) grows
  blocks bottom-up from words that interleave with their neighbours above and below, so that even the
  narrowest gap of a table column isolates the column; its later validation step (Kieninger and
  Strieder, 1999) found that blocks merely side by side (an address beside a date in a letter head)
  are no table, and asks for stronger evidence. Taken: side by side is not enough; the evidence is
  rows aligned across the gap, counted row after row.
- Tesseract's table finder (textord/tablefind.cpp, Shafait and Smith) splits text partitions at wide
  blob gaps on the premise that "a table will have several lines with similar overlapping whitespace
  whereas text will not", merges a column header into the table below it, and drops tables of a single
  column and the false alarms of paragraph endings. Taken: a wide gap is a cell border only where the
  white lines up with the white of other rows (`cell_borders`); a table's head joins it by position
  and type (`tables._join_head`); prose on both sides of a strip is never cells.
- Poppler's `pdftotext -layout` keeps the physical layout: each row is written across the page, its
  words at their places on a character grid. Taken: a region in fixed-width type (`monospaced`: all
  glyph advances equal) is records unless its two sides clearly run apart.

So, for one strip (`columns.flows_apart`), pieces on each side are paired with the pieces beside them:
- *level*: they share a row (middles within `row_centre` of a line height);
- *off*: they overlap vertically without sharing a row (another leading, half a line lower).
Columns have baselines that run independently on the two sides, so a share of the pieces on one side
(`flow_offsets`) sit off the rows beside them; records share baselines across every gap, row after
row (a wrapped cell, a name over two rows beside one row of figures, has nothing beside its second
line and counts neither way). The verdict, in order: figures or codes right of the strip, markers or a
form's labels left of it: cells; rows off each other: flow; prose on both sides: flow; a form's
labels right of it (a second label/value pair on each row): cells; fixed-width type: cells; a gap
clearly wider than the other gaps of its rows (a reference card's gutter between term/description
pairs): flow; else cells. Each verdict comes with its reason, which `--debug-layout` prints per region.
Within a row (`blocks.rows_of`), pieces are not joined across a gap wider than the page's widest word
gap (`widest_word_gap`) unless it is a cell border.
"""

from __future__ import annotations

from typing import Sequence

from ..records import TextLine
from .geometry import ink
from .params import LayoutParams


_NARROW = frozenset("iljtfrI1.,:;'!|()[] ")  # glyphs a proportional face sets narrow ...
_WIDE = frozenset("mwMW@%")  # ... and wide (a rough Helvetica; only their ratios matter)


def _proportional(text: str) -> float:
    """`text`'s advance in a proportional face, in ems (narrow, wide, capitals and figures, the rest)."""
    return sum(0.3 if c in _NARROW else 0.85 if c in _WIDE else 0.62 if c.isupper() or c.isdigit() else 0.52
               for c in text)


def _spread(values: list[float], q: float) -> float:
    """The `q` quantile of the values' relative distances from their median."""
    mid = sorted(values)[len(values) // 2]
    dev = sorted(abs(v / mid - 1) for v in values)
    return dev[int(q * (len(dev) - 1))]


def monospaced(lines: Sequence[TextLine], h: float, p: LayoutParams) -> bool:
    """Whether the body type is fixed-width: over `mono_pieces` pieces or more of `mono_chars` characters
    in body type, the advance per character (ink width over the characters, spaces included) agrees
    within `mono_spread` for all but `1 - mono_quantile` of them, and fits them better than a
    proportional face's widths do (its median spread under `mono_margin` times theirs: long lines of
    prose average their glyphs out, so equal advances alone would not tell)."""
    fixed, prop = [], []
    for l in lines:
        text = l.text.strip()
        if len(text) >= p.mono_chars and l.height <= p.block_size_ratio * h:
            box = ink(l).box
            fixed.append((box[2] - box[0]) / len(text))
            prop.append((box[2] - box[0]) / _proportional(text))
    if len(fixed) < p.mono_pieces:
        return False
    return _spread(fixed, p.mono_quantile) <= p.mono_spread and _spread(fixed, 0.5) < p.mono_margin * _spread(prop, 0.5)

def level_counts(side: Sequence[TextLine], other: Sequence[TextLine], p: LayoutParams) -> tuple[int, int]:
    """(level, off): pieces of `side` overlapping a piece of `other` vertically by more than padded boxes
    of consecutive rows do (`row_touch`), that share a row with one of them, or with none. A piece with
    nothing beside it (a label with no value) counts neither way."""
    level = off = 0
    for a in side:
        near = [o for o in other if min(o.box[3], a.box[3]) - max(o.box[1], a.box[1])
                > p.row_touch * min(o.height, a.height)]
        if not near:
            continue
        if any(abs((a.box[1] + a.box[3]) / 2 - (o.box[1] + o.box[3]) / 2) <= p.row_centre * max(a.height, o.height)
               for o in near):
            level += 1
        else:
            off += 1
    return level, off


def rows_apart(left: Sequence[TextLine], right: Sequence[TextLine], p: LayoutParams) -> str:
    """Why the rows either side of a strip run apart (two flows), or "" when they share their rows
    (records; see the module): on either side, at least `flow_offsets` of the pieces with pieces beside
    them, and `flow_offset_min` or more, share no row with those."""
    for side, other in ((left, right), (right, left)):
        level, off = level_counts(side, other, p)
        if off >= max(p.flow_offset_min, p.flow_offsets * (level + off)):
            return f"rows off each other ({off} of {level + off} pieces off the rows beside them)"
    return ""

def _level(a: TextLine, b: TextLine, p: LayoutParams) -> bool:
    return abs((a.box[1] + a.box[3]) / 2 - (b.box[1] + b.box[3]) / 2) <= p.row_centre * max(a.height, b.height)


def widest_word_gap(rows: Sequence[Sequence[TextLine]], h: float, p: LayoutParams) -> float:
    """The widest space between words on the page's body lines: the `word_gap_quantile` of the spaces
    between pieces of one row (left to right) that are under `word_gap_max` line heights and between
    pieces in body type, never under `word_gap_floor` (the spaces inside a box are not seen, and a
    justified line stretches them: a margin's keyword a space and a half from its line is on it)."""
    found = sorted(b.box[0] - a.box[2] for row in rows for a, b in zip(row, row[1:])
                   if 0 < b.box[0] - a.box[2] < p.word_gap_max * h and max(a.height, b.height) <= p.block_size_ratio * h)
    widest = found[int(p.word_gap_quantile * (len(found) - 1))] if found else 0.0
    return max(p.word_gap_floor * h, widest)


def cell_borders(rows: Sequence[Sequence[TextLine]], wide: float, p: LayoutParams) -> set[tuple[int, int]]:
    """(id of the piece left of it, id of the piece right of it) for each gap wider than `wide` that is a
    table row's cell border: the pieces either side are level, and the white between them lines up
    with white between level pieces on at least `wide_gap_rows` rows in all (a table's, a form's, a statement's
    column; a list's item beside a text box's line shares no such run), or the left piece is a label
    (it ends with a colon) and the right one its value."""
    gaps = []  # (x0, x1, row index, left id, right id) of the white between level pieces
    out = set()
    for k, row in enumerate(rows):
        for a, b in zip(row, row[1:]):
            if a.text.rstrip().endswith(":"):
                out.add((id(a), id(b)))  # a form's label and its value: one line, whatever the others
            if b.box[0] > a.box[2] and _level(a, b, p):
                gaps.append((a.box[2], b.box[0], k, id(a), id(b)))
    for x0, x1, k, ia, ib in gaps:
        if x1 - x0 <= wide:
            continue
        rows_with = {j for y0, y1, j, _, _ in gaps if max(x0, y0) < min(x1, y1)}
        if len(rows_with) >= p.wide_gap_rows:
            out.add((ia, ib))
    return out
