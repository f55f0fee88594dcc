"""Text lines with boxes → Markdown: reading order, rows, blocks, then rendering."""

from __future__ import annotations

from typing import Sequence

from ..records import TextLine
from .blocks import Block, build_blocks
from .geometry import Row, body_height, group_rows
from .order import is_furniture, is_margin_stamp, reading_order


def lines_to_markdown(lines: Sequence[TextLine], width: int, height: int, keep_furniture: bool = False,
                      placed: list[tuple[TextLine, int | None, bool]] | None = None) -> str:
    """Markdown for one page from its recognised lines (boxes in page pixels).

    Page furniture (running heads and feet, page numbers, stamps up the side margins) is left out
    unless `keep_furniture`. `placed`, when given, receives each line as laid out, in reading order:
    (line, the number of the Markdown block it went into, whether it is furniture left out, with no
    block); margin stamps left out come last."""
    lines = [l for l in lines if l.text.strip()]
    stamps = [] if keep_furniture else [l for l in lines if is_margin_stamp(l, width)]
    if stamps:
        lines = [l for l in lines if not is_margin_stamp(l, width)]
    rows: list[Row] = []
    order: list[Row | TextLine] = []  # rows, and lines of furniture left out, in reading order
    if lines:
        h = body_height(lines)
        for n, region in enumerate(reading_order(lines, height)):
            left_out = not keep_furniture and is_furniture(region, h)
            for row in group_rows(region.lines):
                if left_out:
                    order += row.lines
                    continue
                row.region, row.column = n, region.column
                rows.append(row)
                order.append(row)
    blocks = build_blocks(rows, body_height(lines)) if rows else []
    if placed is not None:
        placed += _placed(order, rows, blocks) + [(l, None, True) for l in stamps]
    return render(blocks)


def _placed(order: list, rows: list[Row], blocks: Sequence[Block]) -> list[tuple[TextLine, int | None, bool]]:
    """Each line of `order` with the number of the block its row went into (blocks take rows in turn, each
    up to its last one), or None for furniture left out."""
    index = {id(r): i for i, r in enumerate(rows)}
    ends = [index[id(b.last)] if b.last is not None and id(b.last) in index else -1 for b in blocks]
    block_of: dict[int, int] = {}
    start = 0
    for k, end in enumerate(ends):
        for i in range(start, end + 1):
            block_of[i] = k
        start = max(start, end + 1)
    out: list[tuple[TextLine, int | None, bool]] = []
    for item in order:
        if isinstance(item, Row):
            out += [(l, block_of.get(index[id(item)]), False) for l in item.lines]
        else:
            out.append((item, None, True))
    return out


def render(blocks: Sequence[Block]) -> str:
    parts: list[str] = []
    prev = None
    for block in blocks:
        if block.kind == "heading":
            parts.append("#" * block.level + " " + block.lines[0])
        elif block.kind == "item":
            text = f"{block.marker} {block.lines[0]}"
            if prev is not None and prev.kind == "item":
                parts[-1] += "\n" + text  # consecutive items form one tight list
            else:
                parts.append(text)
        elif block.kind == "table" and block.table is not None:
            parts.append(_pipe_table(block.table.rows))
        else:
            parts.append("  \n".join(block.lines))  # kept line breaks are Markdown hard breaks
        prev = block
    return "\n\n".join(parts) + "\n" if parts else ""


def _pipe_table(rows: list[list[str]]) -> str:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    out = [line(rows[0]), "|" + "|".join("---" for _ in rows[0]) + "|"]
    out += [line(r) for r in rows[1:]]
    return "\n".join(out)
