"""The blocks stage: lines joined into rows, rows into blocks, the units that get ordered.

A *row* is the pieces side by side on one line of text, up to a column separator (a table's row, a
term with its description, a number with its line stay one row). A *block* is rows one under the next
in one type size, at the leading of running text, aligned with each other (poppler's TextOutputDev
builds its blocks this way, its gaps measured in the local font size): a paragraph, a column's run of
text, a caption, a sidebar's list, a chart's labels. A row that lies under two blocks (a full-width
line under two columns) starts a block of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from statistics import median
from typing import Sequence

from ..records import TextLine
from .columns import Separator, _wordy, beside
from .evidence import cell_borders, widest_word_gap
from .geometry import Box, Row, body_height, core, group_rows, ink, union
from .params import LayoutParams

_TICK = re.compile(r"^[-+−]?\d[\d.,]*%?$")  # a tick value of a chart's axis: 80, 0.5, 2015, 25%
_LABEL = re.compile(r"^[\W\d_]*\d[\W\d_]*$|^\S{1,6}$")  # a tick value, a unit, a one-word legend entry


@dataclass
class Block:
    """Rows read together, in order; `kind` is text, figure (a chart's labels) or furniture; `why`
    says which stage set it apart."""

    rows: list[Row]
    kind: str = "text"
    why: str = ""
    column: tuple = ()
    box: Box = field(init=False)

    def __post_init__(self) -> None:
        self.box = union(r.box for r in self.rows)

    def add(self, row: Row) -> None:
        self.rows.append(row)
        self.box = union((self.box, row.box))

    @property
    def size(self) -> float:
        """The block's line height: its type size."""
        return float(median(r.height for r in self.rows))

    @property
    def lines(self) -> list[TextLine]:
        return [l for r in self.rows for l in r.lines]


def rows_of(lines: Sequence[TextLine], seps: Sequence[Separator], p: LayoutParams,
            h: float | None = None) -> list[Row]:
    """Lines on one visual row, cut at every separator between them, where the type size jumps, and
    before words across a gap wider than the page's widest word gap unless it is a table row's cell
    border (`evidence.cell_borders`: a list item and the line of a text box beside it are two rows;
    an amount or an equation's number far right of its row stays on it)."""
    out: list[Row] = []
    h = body_height(lines) if h is None else h
    grouped = _pair_labels(group_rows(lines), h, p)
    wide = widest_word_gap([r.lines for r in grouped], h, p)
    cells = cell_borders([r.lines for r in grouped], wide, p)
    for row in grouped:
        run = [row.lines[0]]
        for prev, line in zip(row.lines, row.lines[1:]):
            parted = any(s.between(ink(prev).box, ink(line).box) for s in seps) \
                or line.box[0] - prev.box[2] > wide and (id(prev), id(line)) not in cells and _wordy(line.text, p)
            # (a number, an amount, an equation's number far right of its row stays on it)
            jump = max(prev.height, line.height) > p.row_size_ratio * min(prev.height, line.height) \
                and min(len(prev.text.strip()), len(line.text.strip())) > p.marker_chars  # (a bullet is small)
            label = _figure_label(prev.text, p) and line.box[0] - prev.box[2] >= p.label_gap * line.height \
                and not any(prev.box[2] < k.box[2] and k.box[0] < line.box[0] and core(k)[0] < core(prev)[1]
                            and core(k)[1] > core(prev)[0] for k in lines if k is not prev and k is not line)
            # (across white space: not a piece of a formula whose other pieces lie between, a row off)
            if parted or jump or label:  # (a chart's tick value, a figure's label far left of the rest of its row stays apart)
                out.append(Row(run))
                run = []
            run.append(line)
        out.append(Row(run))
    return sorted(out, key=lambda r: (core_top(r), r.x0))


def _pair_labels(rows: list[Row], h: float, p: LayoutParams) -> list[Row]:
    """Rows ending in a form's label ("BRAND NAME:") joined with the row of its value typed in off
    its row: the nearest row (middles within `label_reach`) whose pieces all start right of the label
    and hold no label. A label and its value are one line."""
    out = list(rows)
    for row in rows:
        if row not in out or not row.lines[-1].text.rstrip().endswith(":"):
            continue
        mid = (row.box[1] + row.box[3]) / 2
        near = [r for r in out if r is not row and abs((r.box[1] + r.box[3]) / 2 - mid) <= p.label_reach * h
                and r.x0 > row.x1 and not any(l.text.rstrip().endswith(":") for l in r.lines)]
        if near:
            value = min(near, key=lambda r: abs((r.box[1] + r.box[3]) / 2 - mid))
            out.remove(value)
            out[out.index(row)] = Row(row.lines + value.lines)
    return out


def _figure_label(text: str, p: LayoutParams) -> bool:
    """A chart's tick value (80, 0.5, 2015, 25%) or a figure's label: a few characters, no word ("r0 = 1",
    "↑y"; a receipt's "Total" or "Cash" is a word)."""
    text = text.strip()
    return _TICK.match(text) is not None or len(text) <= p.figure_label_chars and not _wordy(text, p)


def core_top(row: Row) -> float:
    return min(core(l)[0] for l in row.lines)


def _core_bottom(row: Row) -> float:
    return max(core(l)[1] for l in row.lines)


def _x_overlap(a: Box, b: Box) -> float:
    return min(a[2], b[2]) - max(a[0], b[0])


def build_blocks(rows: Sequence[Row], seps: Sequence[Separator], h: float, p: LayoutParams) -> list[Block]:
    """Rows (top to bottom) joined into blocks: each row joins the block whose last row is the nearest
    above it in its extent, when the type size, leading and alignment agree, and when that row is over
    it alone (a title across columns starts none of their blocks); else it starts a block."""
    blocks: list[Block] = []
    index = {id(r): k for k, r in enumerate(rows)}
    wide = widest_word_gap([r.lines for r in rows], h, p)
    for k, row in enumerate(rows):
        home = _home(blocks, row, h, p)
        if home is not None and _between(rows[index[id(home.rows[-1])] + 1:k], home, row, seps, p, wide):
            home = None  # another row lies in the space between, on this side of any gutter
        if home is not None and any(_x_overlap(home.rows[-1].box, mate.box) > p.x_overlap * mate.height
                                    for mate in _mates(rows, k, p)):
            home = None  # the row above runs over other rows level with this one: it spans columns
        if home is not None and joins(home, row, p) and _same_columns(home.rows[-1], row, seps, h, p):
            home.add(row)
        else:
            blocks.append(Block([row]))
    for block in blocks:
        block.kind = "figure" if is_figure_text(block, p) else "text"
    return blocks


def _home(blocks: list[Block], row: Row, h: float, p: LayoutParams) -> Block | None:
    """The block whose last row is the nearest above `row` in its extent, if no other is as near."""
    above = [b for b in blocks if _x_overlap(b.rows[-1].box, row.box) > p.x_overlap * row.height
             and _core_bottom(b.rows[-1]) <= core_top(row) + p.row_touch * row.height]
    if not above:
        return None
    near = max(above, key=lambda b: _core_bottom(b.rows[-1]))
    rivals = [b for b in above if b is not near
              and _core_bottom(b.rows[-1]) >= _core_bottom(near.rows[-1]) - p.row_level * row.height]
    return None if rivals else near


def _between(others: Sequence[Row], block: Block, row: Row, seps: Sequence[Separator], p: LayoutParams,
             wide: float = float("inf")) -> bool:
    """Whether one of `others`, in the same type, lies in the white space between `block`'s last row
    and `row` (the rows of a receipt: an item's name, its amounts on the next line to the right, the
    next name; not a sidebar's smaller lines beside a paragraph, nor the words of a text box further
    than `wide`, the widest word gap, to the side of words: a list beside a box), and no separator parts it
    from them."""
    top, bottom = _core_bottom(block.rows[-1]), core_top(row)
    x0, x1 = min(block.box[0], row.x0), max(block.box[2], row.x1)
    return any(top <= core_top(o) and _core_bottom(o) <= bottom and o.height * p.block_size_ratio >= row.height
               and not (max(o.x0 - x1, x0 - o.x1) > wide and _wordy(o.text, p) and _wordy(row.text, p))
               and not any(s.between(o.box, row.box) or s.between(row.box, o.box) for s in seps) for o in others)


def _mates(rows: Sequence[Row], k: int, p: LayoutParams) -> list[Row]:
    """The other rows level with rows[k] (rows are sorted by their tops)."""
    row = rows[k]
    out = []
    for step in (-1, 1):
        j = k + step
        while 0 <= j < len(rows) and abs(core_top(rows[j]) - core_top(row)) <= p.row_level * row.height:
            out.append(rows[j])
            j += step
    return out


def joins(block: Block, row: Row, p: LayoutParams) -> bool:
    """Whether `row` carries on `block` (its last row right above it): same type size, the leading of
    running text, and aligned with the block (within an indent; a block of two rows or more has its
    width, which a row under it may pass by little)."""
    last = block.rows[-1]
    size = max(last.height, row.height)
    if size > p.block_size_ratio * min(last.height, row.height):
        return False
    if core_top(row) - _core_bottom(last) > (p.block_leading + p.core_margins) * size:
        return False
    x0, _, x1, _ = block.box
    if len(block.rows) >= 2:
        slack = p.block_overhang * size
        return row.x0 >= x0 - p.block_indent * size and row.x1 <= x1 + slack
    return abs(row.x0 - x0) <= p.block_indent * size or abs(row.x1 - x1) <= p.block_overhang * size


def _same_columns(last: Row, row: Row, seps: Sequence[Separator], h: float, p: LayoutParams) -> bool:
    """Whether two rows border the same separators: a block ends where the columns beside it do (the
    end of balanced two-column sections, a figure's side)."""
    reach = p.gutter_reach * h
    cut = [s for s in seps if s.sections]
    return {id(s) for s in cut if beside(s, last.box, reach)} == {id(s) for s in cut if beside(s, row.box, reach)}


def is_figure_text(block: Block, p: LayoutParams) -> bool:
    """A chart's labels: rows mostly of tick values, units and one-word legend entries."""
    if len(block.rows) < 2:
        return False
    labels = sum(1 for r in block.rows if len(r.text) <= p.figure_label_chars or _LABEL.match(r.text))
    return labels >= p.figure_share * len(block.rows)
