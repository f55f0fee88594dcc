"""The markdown stage: a laid-out page (`page.layout_page`) written as Markdown."""

from __future__ import annotations

from typing import Sequence

from ..records import ITEM, TextLine, join_markdown
from .geometry import Row
from .page import PageLayout, layout_page
from .paragraphs import Block, build_blocks
from .params import PARAMS, LayoutParams


def lines_to_markdown(lines: Sequence[TextLine], width: int, height: int, keep_furniture: bool = False,
                      p: LayoutParams = PARAMS) -> str:
    """Markdown for one page from its recognised lines (boxes in page pixels).

    Page furniture (running heads and feet, page numbers, stamps up the side margins) is left out
    unless `keep_furniture`."""
    return page_markdown(layout_page(lines, width, height, keep_furniture, p), keep_furniture, p=p)


def page_markdown(page: PageLayout, keep_furniture: bool = False,
                  placed: list[tuple[TextLine, int | None, bool]] | None = None, p: LayoutParams = PARAMS,
                  parts: list[tuple[str, str, str]] | None = None) -> str:
    """The Markdown of a laid-out page: its ordered blocks' rows made into paragraphs, headings, lists
    and tables. `placed`, when given, receives each line in reading order: (line, the number of the
    Markdown block it went into, whether it is furniture left out, with no block); `parts` each Markdown block
    (kind, Markdown, plain text), for the page record (pagerecord.of_layout)."""
    rows: list[Row] = []
    order: list[Row | TextLine] = []  # rows, and the lines of furniture left out, in reading order
    for n, block in enumerate(page.blocks):
        if block.kind == "furniture" and not keep_furniture:
            order += [line for row in block.rows for line in row.lines]
            continue
        for row in block.rows:
            row.region, row.column = n, block.column
            rows.append(row)
            order.append(row)
    blocks = build_blocks(rows, page.h, p) if rows else []
    if placed is not None:
        placed += _placed(order, rows, blocks)
    made = block_parts(blocks)
    if parts is not None:
        parts += made
    return join_markdown((kind, md) for kind, md, _ in made)


def _placed(order: list, rows: list[Row], blocks: Sequence[Block]) -> list[tuple[TextLine, int | None, bool]]:
    """Each line of `order` with the number of the Markdown block its row went into (blocks take rows in turn,
    each up to its `last`), or None for furniture left out."""
    index = {id(r): i for i, r in enumerate(rows)}
    block_of: dict[int, int] = {}
    start = 0
    for k, block in enumerate(blocks):
        end = index.get(id(block.last), -1) if block.last is not None else -1
        for i in range(start, end + 1):
            block_of[i] = k
        start = max(start, end + 1)
    out: list[tuple[TextLine, int | None, bool]] = []
    for item in order:
        if isinstance(item, Row):
            out += [(line, block_of.get(index[id(item)]), False) for line in item.lines]
        else:
            out.append((item, None, True))
    return out


def render(blocks: Sequence[Block]) -> str:
    return join_markdown((kind, md) for kind, md, _ in block_parts(blocks))


def block_parts(blocks: Sequence[Block]) -> list[tuple[str, str, str]]:
    """Each block as (kind, its Markdown, its plain text); kinds: heading, item, table, paragraph. Joined by
    records.join_markdown (consecutive items one tight list) they are the page's Markdown."""
    out: list[tuple[str, str, str]] = []
    for block in blocks:
        if block.kind == "heading":
            out.append(("heading", "#" * block.level + " " + block.lines[0], block.lines[0]))
        elif block.kind == "item":
            text = f"{block.marker} {block.lines[0]}"
            out.append((ITEM, text, text))
        elif block.kind == "table" and block.table is not None:
            out.append(("table", _pipe_table(block.table.rows), "\n".join("\t".join(r) for r in block.table.rows)))
        else:
            out.append(("paragraph", "  \n".join(block.lines), "\n".join(block.lines)))  # kept breaks: hard breaks
    return out


def _pipe_table(rows: list[list[str]]) -> str:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    out = [line(rows[0]), "|" + "|".join("---" for _ in rows[0]) + "|"]
    out += [line(r) for r in rows[1:]]
    return "\n".join(out)
