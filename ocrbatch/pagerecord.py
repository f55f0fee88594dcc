"""The page record: what an engine read on a page, as data, before any output format (ocrbatch/render/ makes
each format from it).

    PageRecord   the page's size (pixels as decoded) and dpi, its blocks in reading order, its figures' boxes
      Block      a paragraph, heading, list item, table, furniture (running head, page number: not in the
                 Markdown unless --keep-furniture), or an engine's own Markdown block; its Markdown, its plain
                 text, its lines
        Line     text, box (pixels, y down) and the recognizer's score

What the boxes are is said once for the page (`boxes`):

    "lines"   each Line is a line of text with its own box (the embedded engine, a PDF's text layer)
    "blocks"  each Line is a whole block with the block's box (DeepSeek-OCR-2 tags blocks, not lines)
    "none"    no boxes (an engine that returns Markdown only, such as the fake engine)

A renderer that needs line boxes (hOCR, the searchable PDF) refuses a page whose boxes are not "lines".

The types are in records.py (PageRecord, RecordBlock, RecordLine); here are their builders: `of_layout` (the
layout's Markdown blocks and placed lines: the embedded engine and text layers), `of_markdown` (an engine's
Markdown, with the block boxes it gave if any) and `of_page_json` (a page JSON read back from disk, for a
document assembled from pages an earlier run wrote).
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from .records import (BLOCKS, FURNITURE, LINES, NO_BOXES, PageLines, PageRecord, PageResult,
                      RecordBlock as Block, RecordLine as Line)


# -- builders ------------------------------------------------------------------------------------------

def of_layout(parts: Sequence[tuple[str, str, str]], geometry: PageLines) -> PageRecord:
    """The record of a laid-out page: `parts`, its Markdown blocks in order (kind, Markdown, plain text: what
    `layout.markdown.page_markdown(parts=...)` gives), and `geometry`, its lines in reading order, each with the
    number of the block it went into (None: furniture left out; pagejson.placed_lines)."""
    blocks: list[Block] = []
    loose: list[Line] = []  # furniture lines left out, waiting to be a block

    def flush() -> None:
        if loose:
            blocks.append(Block(FURNITURE, "", "\n".join(ln.text for ln in loose), tuple(loose)))
            loose.clear()

    def take(upto: int) -> None:  # the blocks before `upto` not taken yet, in order
        while len(taken) < min(upto, len(parts)):
            k = len(taken)
            taken.append(k)
            blocks.append(Block(*parts[k], tuple(by_block.get(k, ()))))

    by_block: dict[int, list[Line]] = {}
    for placed in geometry.lines:
        if placed.block is not None:
            by_block.setdefault(placed.block, []).append(Line(placed.text, placed.box, placed.score, placed.kind))
    taken: list[int] = []
    for placed in geometry.lines:
        if placed.block is None:
            loose.append(Line(placed.text, placed.box, placed.score, placed.kind))
        elif placed.block >= len(taken):
            flush()
            take(placed.block + 1)
    flush()
    take(len(parts))
    return PageRecord(geometry.width, geometry.height, tuple(blocks), LINES, figures=geometry.figures)


def of_markdown(markdown: str, geometry: PageLines | None = None) -> PageRecord:
    """The record of an engine that writes Markdown itself: its Markdown kept as it is, and as blocks (split at
    blank lines) with no boxes; or, when the engine gave blocks with boxes (`geometry`: DeepSeek-OCR-2's tagged
    blocks), those blocks, each one Line over its block."""
    if geometry is not None and geometry.lines:
        blocks = tuple(Block(p.kind, p.text, plain(p.text), (Line(p.text, p.box, p.score, p.kind),))
                       for p in geometry.lines)
        return PageRecord(geometry.width, geometry.height, blocks, BLOCKS, figures=geometry.figures,
                          markdown=markdown)
    chunks = [c.strip("\n") for c in re.split(r"\n\s*\n", markdown) if c.strip()]
    blocks = tuple(Block("markdown", c, plain(c), tuple(Line(t) for t in plain(c).splitlines() if t.strip()))
                   for c in chunks)
    w, h = (geometry.width, geometry.height) if geometry is not None else (0, 0)
    return PageRecord(w, h, blocks, NO_BOXES, markdown=markdown)


def of_page_json(page: dict[str, Any], boxes: str | None = None) -> PageRecord:
    """The record behind a page JSON (pagejson.py) read back: its lines, grouped by block, with their boxes.
    Markdown and kinds of blocks are not in the JSON: each block's markdown is its lines' text. `boxes`: what the
    boxes are, as the page's manifest record says (the write stage keeps it there when a pdf is asked for); None:
    guessed (lines with no score and block labels are an engine's blocks)."""
    blocks: list[Block] = []
    current: int | None | str = "start"
    for item in page.get("lines", []):
        x0, y0, x1, y1 = (float(v) for v in item["box"])
        line = Line(str(item["text"]), (x0, y0, x1, y1), item.get("score"), str(item.get("kind", "text")))
        block = item.get("block")
        kind = FURNITURE if block is None else "paragraph"
        if blocks and block == current and block is not None:
            last = blocks[-1]
            blocks[-1] = Block(last.kind, last.markdown + "\n" + line.text, last.text + "\n" + line.text,
                               last.lines + (line,))
        else:
            blocks.append(Block(kind, "" if block is None else line.text, line.text, (line,)))
        current = block
    scored = any(ln.score is not None for b in blocks for ln in b.lines)
    label_kinds = {ln.kind for b in blocks for ln in b.lines} - {"text", FURNITURE}
    if boxes not in (LINES, BLOCKS, NO_BOXES):
        boxes = BLOCKS if label_kinds and not scored else LINES
    figures = tuple(tuple(float(v) for v in f["box"]) for f in page.get("figures", []))
    return PageRecord(int(page.get("width", 0)), int(page.get("height", 0)), tuple(blocks), boxes,
                      dpi=page.get("dpi"), figures=figures)  # type: ignore[arg-type]


def record_of(result: PageResult) -> PageRecord:
    """A finished page's record: its engine's, or, for an engine that returns Markdown only, one made from its
    Markdown (and its blocks' boxes, if it gave any)."""
    if result.record is not None:
        return result.record
    return of_markdown(result.markdown, result.lines)


# -- Markdown to plain text -------------------------------------------------------------------------------

_HEADING = re.compile(r"^#{1,6}\s+")
_RULE_ROW = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_CELL_END = re.compile(r"</t[dh]>\s*", re.I)
_ROW_END = re.compile(r"</tr>\s*", re.I)
_TAG = re.compile(r"<[^>]+>")


def plain(markdown: str) -> str:
    """A block of Markdown as plain text: heading marks, image links, table rules and HTML tags out; a table's
    cells separated by tabs, one row a line; hard breaks (two spaces at a line's end) plain line breaks."""
    text = _ROW_END.sub("\n", _CELL_END.sub("\t", _IMAGE.sub("", markdown)))
    text = _TAG.sub("", text)
    out: list[str] = []
    for line in text.splitlines():
        line = line.rstrip()
        if _RULE_ROW.match(line) and "-" in line:
            continue
        if line.startswith("|") and line.endswith("|"):
            line = "\t".join(c.strip().replace("\\|", "|") for c in line[1:-1].split(" | "))
        out.append(_HEADING.sub("", line).rstrip("\t"))
    return "\n".join(out).strip("\n")
