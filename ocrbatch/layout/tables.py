"""Tables from aligned boxes: runs of rows whose cells line up in three or more columns, mostly filled
with short cells (prose in columns and a figure's labels align too, but are no table).

Two-column runs (label: value) are forms and stay lines; so do receipts' totals. A row with a single
cell inside a run (a wrapped description, a spanning header) stays in the table as a row of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

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
    if not _has_table_evidence(table_rows, p):
        return None
    return Table(table_rows)


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
