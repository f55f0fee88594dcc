"""The markdown stage: a laid-out page (`page.layout_page`) written as Markdown."""

from __future__ import annotations

from typing import Sequence

from ..records import TextLine
from .geometry import Row
from .page import PageLayout, layout_page
from .paragraphs import Block, build_blocks
from .params import PARAMS, LayoutParams


def lines_to_markdown(lines: Sequence[TextLine], width: int, height: int, keep_furniture: bool = False,
                      p: LayoutParams = PARAMS) -> str:
    """Markdown for one page from its recognised lines (boxes in page pixels).

    Page furniture (running heads and feet, page numbers, stamps up the side margins) is left out
    unless `keep_furniture`."""
    return page_markdown(layout_page(lines, width, height, keep_furniture, p), keep_furniture)


def page_markdown(page: PageLayout, keep_furniture: bool = False) -> str:
    """The Markdown of a laid-out page: its ordered blocks' rows made into paragraphs, headings, lists
    and tables."""
    rows: list[Row] = []
    for n, block in enumerate(page.blocks):
        if block.kind == "furniture" and not keep_furniture:
            continue
        for row in block.rows:
            row.region, row.column = n, block.column
            rows.append(row)
    return render(build_blocks(rows, page.h)) if rows else ""


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
