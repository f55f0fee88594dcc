"""Rows in reading order → blocks: headings, paragraphs, list items, tables.

Rules are relative to the page's own body text height `h`, so they hold at any resolution:
- a *heading* is a short row, not ending like a sentence, that is taller than body text or stands
  isolated and carries a section number ("2.1 Scope");
- a *list item* starts with a bullet glyph or an enumerator; rows indented under it continue it;
- a *paragraph* grows while rows follow at normal line spacing without an indent; a row that ends
  short of the column's right edge ends the paragraph if it ends a sentence, else it is a hard line
  break (verse, addresses, code, receipts keep their lines);
- a row ending in dot leaders and a page number (a table of contents) keeps its own line;
- a form's value wrapped under itself (a row starting where the value above starts, under a label
  and its value) goes on its label's line;
- text that runs off the bottom of a column continues at the top of the next one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

from .geometry import Row, core
from .params import PARAMS, LayoutParams
from .tables import Table, find_tables

_BULLET = re.compile(r"^(?:[•·●▪◦‣∙○■□➢►✓✔]\s*|[-–—*+]\s+)(?=\S)")
_ENUM = re.compile(r"^\(?(?:\d{1,3}|[a-z]|[ivx]{1,4})[.)]\s+(?=\S)")
_SECTION = re.compile(r"^\d{1,2}(?:\.\d{1,2})*\.?\s+[^\W\d_]")
_SENTENCE_END = re.compile(r"[.!?:;]['\"’”)]*$")
_HYPHENATED = re.compile(r"[^\W\d_]-$")
_MARGIN = {("head",), ("foot",)}  # columns of running heads and feet (layout.order)
_LEADER_END = re.compile(r"(?:[.·…]\s*){3,}\S{1,8}$")  # "Options . . . . 7": a contents entry


@dataclass
class Block:
    kind: str  # heading | para | item | table
    lines: list[str] = field(default_factory=list)  # para: hard-broken lines; heading/item: one
    level: int = 0  # heading level
    marker: str = ""  # list item marker: "-" or "1."
    table: Table | None = None
    left: float = 0.0  # x of the block's text start
    last: Row | None = None


def build_blocks(rows: Sequence[Row], h: float, p: LayoutParams = PARAMS) -> list[Block]:
    if not rows:
        return []
    edges = _column_edges(rows, p)
    brk = _paragraph_gap(rows, h, p)
    tables = {start: (end, table) for start, end, table in find_tables(rows, h, p)}
    blocks: list[Block] = []
    i = 0
    while i < len(rows):
        if i in tables:
            end, table = tables[i]
            blocks.append(Block("table", table=table, last=rows[end - 1]))
            i = end
            continue
        row = rows[i]
        prev = rows[i - 1] if i > 0 else None
        nxt = rows[i + 1] if i + 1 < len(rows) else None
        text = row.text
        cur = blocks[-1] if blocks else None
        level = _heading_level(row, prev, nxt, h, edges, brk, p)
        if level:
            if (cur is not None and cur.kind == "heading" and cur.level == level and cur.last is not None
                    and _gap(cur.last, row) <= p.heading_wrap * h and cur.last.column == row.column):
                cur.lines[0] += " " + text  # a heading wrapped over two rows
                cur.last = row
            else:
                blocks.append(Block("heading", [text], level=level, left=row.x0, last=row))
        elif (m := _BULLET.match(text)) or ((m := _ENUM.match(text)) and not _continues(cur, row, h, edges, brk, p)):
            marker = m.group(0).strip()
            marker = marker if _ENUM.match(text) else "-"
            blocks.append(Block("item", [text[m.end():].strip()], marker=marker, left=row.x0, last=row))
        elif cur is not None and cur.kind == "item" and _continues_item(cur, row, h, brk, p):
            cur.lines[0] = _join(cur.lines[0], text)
            cur.last = row
        elif cur is not None and cur.kind == "para" and _value_wraps(cur.last, row, h, brk, p):
            cur.lines[-1] = _join(cur.lines[-1], text)  # a form's value wrapped under itself: its label's line
            cur.last = row
        elif cur is not None and cur.kind == "para" and _continues(cur, row, h, edges, brk, p):
            if _wraps(cur.last, row, edges, h, p) and not _is_form_row(cur.last, h, p) and not _is_form_row(row, h, p) \
                    and not _LEADER_END.search(cur.last.text):
                cur.lines[-1] = _join(cur.lines[-1], text)
            else:
                cur.lines.append(text)
            cur.last = row
        else:
            blocks.append(Block("para", [text], left=row.x0, last=row))
        i += 1
    return blocks


def _column_edges(rows: Sequence[Row], p: LayoutParams) -> dict[tuple, tuple[float, float]]:
    """Left and right text edge of each column: where all but `edge_share` of its rows start and end."""
    by_col: dict[tuple, list[Row]] = {}
    for row in rows:
        by_col.setdefault(row.column, []).append(row)
    edges = {}
    for col, rs in by_col.items():
        x0s = sorted(r.x0 for r in rs)
        x1s = sorted(r.x1 for r in rs)
        edges[col] = (x0s[int(p.edge_share * len(x0s))], x1s[int((1 - p.edge_share) * len(x1s))])
    page = (min(r.x0 for r in rows), max(r.x1 for r in rows))
    for col, rs in by_col.items():  # a running head, a lone title: measured against the page
        if col in (("head",), ("foot",)) or len(rs) < p.edge_rows:
            edges[col] = page
    return edges


def _paragraph_gap(rows: Sequence[Row], h: float, p: LayoutParams) -> float:
    """The space between two rows beyond which a new paragraph starts: a little more than the page's
    usual space between the lines of a paragraph (generous leading is not a paragraph break), and
    never less than `break_min`."""
    gaps = sorted(g for a, b in zip(rows, rows[1:]) if a.column == b.column and 0 < (g := _gap(a, b)) < p.lead_max * h)
    lead = gaps[len(gaps) // 2] if gaps else p.lead_none * h
    return max(p.break_min * h, lead + p.break_extra * h)


def _is_form_row(row: Row, h: float, p: LayoutParams) -> bool:
    """Text in separate cells (label and value, receipt columns): a line of its own, never joined."""
    return len(row.cells(p.form_gap * h)) > 1


def _value_wraps(last: Row | None, row: Row, h: float, brk: float, p: LayoutParams) -> bool:
    """Whether `row` is the value of the form row `last` (a label, then its value) wrapped under itself:
    one cell, starting where the value does (within `para_indent`), no label itself, at the leading."""
    if last is None or last.column != row.column or _gap(last, row) > brk or _is_form_row(row, h, p):
        return False
    cells = last.cells(p.form_gap * h)
    if len(cells) != 2 or not cells[0][-1].text.rstrip().endswith(":") or row.text.rstrip().endswith(":"):
        return False
    return abs(row.x0 - cells[1][0].box[0]) <= p.para_indent * h


def _gap(upper: Row, lower: Row) -> float:
    """Vertical space between two rows, measured between their cores."""
    return min(core(l)[0] for l in lower.lines) - max(core(l)[1] for l in upper.lines)


def _top(row: Row) -> float:
    return min(l.box[1] for l in row.lines)


def _is_full(row: Row | None, edges, h: float, p: LayoutParams) -> bool:
    if row is None:
        return False
    left, right = edges[row.column]
    return row.x1 >= right - max(p.full_row * h, p.full_share * (right - left))


def _wraps(last: Row, nxt: Row, edges, h: float, p: LayoutParams) -> bool:
    """Did the text wrap after `last`? Yes when it reaches the column's edge, or when the next row's
    first word would not have fitted in the space left (ragged-right text)."""
    if _is_full(last, edges, h, p):
        return True
    words = nxt.text.split()
    if not words or nxt.column != last.column:
        return False
    char_w = (nxt.x1 - nxt.x0) / max(1, len(nxt.text))
    return last.x1 + char_w * (len(words[0]) + 1) > edges[last.column][1]


def _tall(row: Row, h: float) -> float:
    return max(l.height for l in row.lines) / h


def _heading_level(row: Row, prev: Row | None, nxt: Row | None, h: float, edges, brk: float,
                   p: LayoutParams) -> int:
    text = row.text
    words = text.split()
    if not words or len(words) > p.heading_words or len(text) < p.heading_chars or _SENTENCE_END.search(text) \
            or text.endswith((",", "-")):
        return 0  # a heading does not end mid-sentence or mid-word
    if "=" in text:
        return 0  # a display equation: tall from its sub- and superscripts, not a title
    if len(row.cells(p.table_cell_gap * h)) > 1:
        return 0
    left, right = edges[row.column]
    ratio = _tall(row, h)
    if ratio < p.heading_big and row.x1 - row.x0 > p.heading_width * max(1.0, right - left):
        return 0  # a full-width row in body-like type is prose; much larger type is a title however wide
    if not any(c.isalpha() for c in text):
        return 0
    above = _gap(prev, row) if prev is not None and prev.column == row.column else p.heading_far * h
    below = _gap(row, nxt) if nxt is not None and nxt.column == row.column else p.heading_far * h
    isolated = above >= brk and below >= p.heading_space * h
    section = _SECTION.match(text)
    depth = min(p.heading_depth, text.split()[0].rstrip(".").count(".") + 2)  # ("2.1 Scope": level 3)
    if ratio >= p.heading_tall and (isolated or ratio >= p.heading_big):
        if section:
            return depth if ratio < p.heading_1 else 1
        return 1 if ratio >= p.heading_1 else 2 if ratio >= p.heading_2 else 3
    if section and isolated and text[0].isdigit():
        return depth
    if isolated and ratio >= p.runin_tall and len(words) <= p.runin_words and text[0].isupper():
        return 3  # a short line set apart, in slightly larger type: a run-in section title
    return 0


def _continues(cur: Block | None, row: Row, h: float, edges, brk: float, p: LayoutParams) -> bool:
    """Does `row` carry on paragraph `cur`?"""
    if cur is None or cur.kind != "para" or cur.last is None:
        return False
    last = cur.last
    ratio = _tall(row, h) / max(0.1, _tall(last, h))
    if not p.para_shrink <= ratio <= p.para_grow:
        return False
    if _MARGIN & {last.column[:1], row.column[:1]} and row.column != last.column:
        return False  # a running head or foot is never part of the body's paragraphs
    if row.column != last.column and _top(row) < _top(last):
        # text that runs off the bottom of one column goes on at the top of the next
        return _is_full(last, edges, h, p) and not _SENTENCE_END.search(last.text) and \
            abs(row.x0 - edges[row.column][0]) <= p.para_indent * h
    if _gap(last, row) > brk:
        return False
    full, ended = _wraps(last, row, edges, h, p), _SENTENCE_END.search(last.text)
    if row.x0 > cur.left + p.para_indent * h and len(cur.lines) == 1 and cur.lines[0] == last.text and full \
            and not ended:
        cur.left = row.x0  # a hanging indent (description lists): the first line sticks out
        return True
    if full and _HYPHENATED.search(last.text) and row.text[:1].islower():
        return True  # a word split over the line end
    if row.x0 < cur.left - p.para_outdent * h or row.x0 > cur.left + p.para_indent * h:
        return False  # outdented, or an indented first line: a new paragraph
    if not full and ended:
        return False
    return True


def _continues_item(cur: Block, row: Row, h: float, brk: float, p: LayoutParams) -> bool:
    last = cur.last
    if last is None or row.column != last.column or _gap(last, row) > brk:
        return False
    return cur.left + p.item_indent * h <= row.x0 <= cur.left + p.item_indent_max * h


def _join(left: str, right: str) -> str:
    """Join two lines of one paragraph, undoing end-of-line hyphenation ("exam-" + "ple")."""
    if len(left) > 2 and left.endswith("-") and left[-2].isalpha() and right[:1].islower():
        return left[:-1] + right
    return f"{left} {right}"

