"""Tables from aligned boxes: runs of rows whose cells line up in three or more columns, mostly filled
with short cells (prose in columns and a figure's labels align too, but are no table).

Two-column runs (label: value) are forms and stay lines; so do receipts' totals. A row with a single
cell inside a run stays in the table as a row of its own (a group's title), unless it is set closer under
the row above than the table's rows follow each other: then it is that row's cell wrapped under itself
(`_join_wrapped`). The head is told by position and type (`_join_head`): the first rows, with no figure
in them, a heading's leading apart, are one row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .columns import _wordy
from .geometry import Row, gaps
from .params import PARAMS, LayoutParams


@dataclass
class Table:
    rows: list[list[str]]  # cell texts, every row as long as the widest


def find_tables(rows: Sequence[Row], h: float, p: LayoutParams = PARAMS) -> list[tuple[int, int, Table]]:
    """(start, end, table) for each table found; rows[start:end] are the table's rows."""
    found = []
    i = 0
    while i < len(rows):
        end = _run_end(rows, i, h, p)
        if end - i >= p.table_rows:
            table = _build(rows[i:end], h, p)
            if table is not None:
                found.append((i, end, table))
                i = end
                continue
        i += 1
    return found


def _multi(row: Row, h: float, p: LayoutParams) -> bool:
    return len(row.cells(p.table_cell_gap * h)) >= 2


def _run_end(rows: Sequence[Row], start: int, h: float, p: LayoutParams) -> int:
    """End of the run of multi-cell rows beginning at `start` (`table_lone_rows` single-cell rows allowed
    between)."""
    if not _multi(rows[start], h, p):
        return start
    end = start + 1
    j = start + 1
    while j < len(rows):
        row, prev = rows[j], rows[j - 1]
        if row.column != prev.column:
            break
        if row.box[1] - prev.box[3] > p.table_break * h:  # a clear vertical space ends the table
            break
        if _multi(row, h, p):
            end = j + 1
        elif j - end >= p.table_lone_rows:  # more single-cell rows in a row: the table is over
            break
        j += 1
    return end


def _build(rows: Sequence[Row], h: float, p: LayoutParams) -> Table | None:
    split = [r.cells(p.table_cell_gap * h) for r in rows]
    # Column bounds come from the rows with the most cells: a header cell spanning several columns,
    # or two cells set too close together in one row, would otherwise merge columns.
    most = max(len(c) for c in split)
    model = [c for c in split if len(c) == most]
    if len(model) < 2:
        model = [c for c in split if len(c) >= 2]
    cells = [cell for row in model for cell in row]
    bounds = gaps(((c[0].box[0], c[-1].box[2]) for c in cells), p.table_column_gap * h)
    ncol = len(bounds) + 1
    if ncol < p.table_columns:
        return None
    cuts = [(a + b) / 2 for a, b in bounds]
    used = [0] * ncol
    table_rows: list[list[str]] = []
    for row in rows:
        texts = [""] * ncol
        row_cells = row.cells(p.table_cell_gap * h)
        for cell in row_cells:  # a lone cell (a wrapped description) stays whole
            for x, text in _pieces(cell, cuts if len(row_cells) > 1 else []):
                k = sum(1 for c in cuts if x > c)
                texts[k] = f"{texts[k]} {text}".strip()
                used[k] += 1
        table_rows.append(texts)
    if sum(1 for u in used if u >= p.table_column_rows) < p.table_columns:
        return None
    if not _has_table_evidence(table_rows, p) or _form(table_rows, p):
        return None
    centres = [(r.box[1] + r.box[3]) / 2 for r in rows]
    return Table(_join_head(*_join_wrapped(table_rows, centres, p), h, p))


def _join_head(cells: list[list[str]], centres: list[float], h: float, p: LayoutParams) -> list[list[str]]:
    """The table's head, told by position and type: its first rows, at least two cells each and none of
    them a figure, each at most `head_leading` line heights under the last, are one row (a heading
    set over two lines: "Staff" over "costs"), where at least `head_figures` of the table's rows hold a
    figure (a table all of words has no type to tell its head by)."""
    body = [r for r in cells if any(c and not _wordy(c, p) for c in r)]
    if len(body) < p.head_figures * len(cells):
        return cells  # (no figures under it: a head is told from the body by type only over figures)
    k = 0
    while k + 1 < len(cells) and all(_head_row(cells[j], p) for j in (k, k + 1)) \
            and centres[k + 1] - centres[k] <= p.head_leading * h:
        k += 1
    if k == 0:
        return cells
    head = [" ".join(c for c in col if c) for col in zip(*cells[:k + 1])]
    return [head] + cells[k + 1:]


def _head_row(cells: list[str], p: LayoutParams) -> bool:
    filled = [c for c in cells if c]
    return len(filled) >= 2 and all(_wordy(c, p) for c in filled)


def _join_wrapped(cells: list[list[str]], centres: list[float],
                  p: LayoutParams) -> tuple[list[list[str]], list[float]]:
    """Rows of one filled cell set closer under the row above than the table's rows follow each other
    (`wrap_pitch` of their median pitch, centre to centre): the cell above, of words, wrapped under
    itself (a long name beside one row of figures); its text goes into that cell (a receipt's item
    code over its name is no such cell). A group's title over its rows stands
    a row's pitch away and stays a row."""
    pitches = sorted(b - a for a, b in zip(centres, centres[1:]))
    if not pitches:
        return cells, centres
    pitch = pitches[len(pitches) // 2]
    out, kept = [list(cells[0])], [centres[0]]
    for k in range(1, len(cells)):
        filled = [j for j, c in enumerate(cells[k]) if c]
        near = centres[k] - centres[k - 1] < p.wrap_pitch * pitch
        if len(filled) == 1 and near and _wordy(out[-1][filled[0]], p) and sum(1 for c in out[-1] if c) >= 2:
            j = filled[0]
            out[-1][j] = f"{out[-1][j]} {cells[k][j]}"
        else:
            out.append(list(cells[k]))
            kept.append(centres[k])
    return out, kept


def _form(rows: list[list[str]], p: LayoutParams) -> bool:
    """Label/value rows, not a table: in at least `form_labels` of the rows the first cell is a label
    (it ends with a colon), whatever the other cells hold (a form with two pairs a row, some values
    empty: "DATE RECEIVED: | 04/12/1991 | CASE NO.: | 91-0417"). Each row is a line of its own."""
    labelled = sum(1 for r in rows if r[0].rstrip().endswith(":"))
    return labelled >= p.form_labels * len(rows)


def _has_table_evidence(rows: list[list[str]], p: LayoutParams) -> bool:
    """Aligned boxes alone are not a table: prose set in columns aligns too (every line of a
    three-column page sits at three left edges), and so do a plot's tick labels. A table's cells
    are mostly filled and mostly short (a label, a number, a few words); running prose fills its
    "cells" with line after line of several words each."""
    cells = [c for r in rows for c in r]
    filled = [c for c in cells if c.strip()]
    if len(filled) < p.table_filled * len(cells):
        return False  # scattered labels (a figure), not rows of cells
    wordy = sum(1 for c in filled if len(c.split()) >= p.table_cell_words)
    return wordy <= p.table_wordy * len(filled)


def _pieces(cell, cuts: list[float]) -> list[tuple[float, str]]:
    """(x, text) of a cell; a box the detector ran across column bounds ("Wed Thu Fri") is split
    into its words, each placed where it sits, estimating the box's characters as equally wide."""
    x0, x1 = cell[0].box[0], cell[-1].box[2]
    text = " ".join(l.text.strip() for l in cell)
    crossed = sum(1 for c in cuts if x0 < c < x1)
    words = text.split()
    if crossed == 0 or len(words) <= crossed:
        return [((x0 + x1) / 2, text)]
    step = (x1 - x0) / max(1, len(text))
    out, pos = [], 0
    for word in words:
        start = text.index(word, pos)
        out.append((x0 + step * (start + len(word) / 2), word))
        pos = start + len(word)
    return out
