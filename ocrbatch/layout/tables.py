"""Tables from aligned boxes: runs of rows whose cells line up in three or more columns.

Two-column runs (label: value) are forms and stay lines; so do receipts' totals. A row with a single
cell inside a run (a wrapped description, a spanning header) stays in the table as a row of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .geometry import Row, gaps

MIN_ROWS = 3
MIN_COLUMNS = 3


@dataclass
class Table:
    rows: list[list[str]]  # cell texts, every row as long as the widest


def cell_gap(h: float) -> float:
    """Horizontal space that separates two cells rather than two words."""
    return 1.0 * h


def find_tables(rows: Sequence[Row], h: float) -> list[tuple[int, int, Table]]:
    """(start, end, table) for each table found; rows[start:end] are the table's rows."""
    found = []
    i = 0
    while i < len(rows):
        end = _run_end(rows, i, h)
        if end - i >= MIN_ROWS:
            table = _build(rows[i:end], h)
            if table is not None:
                found.append((i, end, table))
                i = end
                continue
        i += 1
    return found


def _multi(row: Row, h: float) -> bool:
    return len(row.cells(cell_gap(h))) >= 2


def _run_end(rows: Sequence[Row], start: int, h: float) -> int:
    """End of the run of multi-cell rows beginning at `start` (single-cell rows allowed between)."""
    if not _multi(rows[start], h):
        return start
    end = start + 1
    j = start + 1
    while j < len(rows):
        row, prev = rows[j], rows[j - 1]
        if row.column != prev.column:
            break
        if row.box[1] - prev.box[3] > 1.5 * h:  # a clear vertical space ends the table
            break
        if _multi(row, h):
            end = j + 1
        elif j - end >= 1:  # two single-cell rows in a row: the table is over
            break
        j += 1
    return end


def _build(rows: Sequence[Row], h: float) -> Table | None:
    multi = [r for r in rows if _multi(r, h)]
    cells = [c for r in multi for c in r.cells(cell_gap(h))]
    bounds = gaps(((c[0].box[0], c[-1].box[2]) for c in cells), 0.3 * h)
    ncol = len(bounds) + 1
    if ncol < MIN_COLUMNS:
        return None
    cuts = [(a + b) / 2 for a, b in bounds]
    used = [0] * ncol
    table_rows: list[list[str]] = []
    for row in rows:
        texts = [""] * ncol
        for cell in row.cells(cell_gap(h)):
            x = (cell[0].box[0] + cell[-1].box[2]) / 2
            k = sum(1 for c in cuts if x > c)
            text = " ".join(l.text.strip() for l in cell)
            texts[k] = f"{texts[k]} {text}".strip()
            used[k] += 1
        table_rows.append(texts)
    if sum(1 for u in used if u >= 2) < MIN_COLUMNS:
        return None
    return Table(table_rows)
