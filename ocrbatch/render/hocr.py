"""hocr: the page as hOCR 1.2 (NAME.hocr): XHTML whose elements carry the page's layout in their `title`.

    ocr_page    bbox of the page; image (the input's name); ppageno (0-based)
    ocr_carea   one per block in reading order (furniture too: it is on the page), bbox round its lines
    ocr_par     the block's paragraph, the same bbox
    ocr_line    each line: bbox; baseline 0 0 (the box's bottom); x_size (its height)
    ocrx_word   each word of the line: bbox cut from the line's box in proportion to the characters before
                and in it (a recognizer reads lines, not words); x_wconf, the line's score in percent (left
                out for a text layer, which has none)

Boxes are whole pixels of the page as decoded, y down, as hOCR has them. A page without line boxes (an engine
that gives Markdown only, or DeepSeek-OCR-2's block boxes) is refused: `Renderer.check`.
"""

from __future__ import annotations

import re
from html import escape
from typing import Sequence

from .. import __version__
from ..records import LINES, Box, RecordLine
from .base import Page, Part, Renderer

CAPABILITIES = "ocr_page ocr_carea ocr_par ocr_line ocrx_word ocrp_wconf"
_HEAD = f"""<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN"
    "http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">
<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="en" lang="en">
 <head>
  <title></title>
  <meta http-equiv="Content-Type" content="text/html;charset=utf-8"/>
  <meta name="ocr-system" content="ocrbatch {__version__}"/>
  <meta name="ocr-capabilities" content="{CAPABILITIES}"/>
 </head>
 <body>
"""
_TAIL = " </body>\n</html>\n"
_PAGE_DIV = re.compile(rb"(  <div class=\"ocr_page\".*?\n  </div>\n)", re.S)


def bbox(box: Box) -> str:
    return "bbox " + " ".join(str(int(round(v))) for v in box)


def words(line: RecordLine) -> list[tuple[str, Box]]:
    """The line's words with boxes cut from its box in proportion to the characters before each."""
    assert line.box is not None
    x0, y0, x1, y1 = line.box
    n = max(1, len(line.text))
    per = (x1 - x0) / n
    return [(m.group(), (x0 + per * m.start(), y0, x0 + per * m.end(), y1)) for m in re.finditer(r"\S+", line.text)]


def _quoted(text: str) -> str:
    """A value for hOCR's `image "..."` property: inside a title attribute, double quotes and backslashes
    escaped by a backslash, then the whole escaped as XML."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def page_div(page: Page) -> str:
    rec, p = page.record, page.number
    title = f"image {_quoted(page.source)}; " if page.source else ""
    out = [f'  <div class="ocr_page" id="page_{p}" title="{escape(title)}bbox 0 0 {rec.width} {rec.height}; '
           f'ppageno {p - 1}">\n']
    n_line = n_word = 0
    for b, block in enumerate((b for b in rec.blocks if b.lines), 1):
        box = block.box
        if box is None:
            continue
        out.append(f'   <div class="ocr_carea" id="block_{p}_{b}" title="{bbox(box)}">\n')
        out.append(f'    <p class="ocr_par" id="par_{p}_{b}" title="{bbox(box)}">\n')
        for line in block.lines:
            if line.box is None:
                continue
            n_line += 1
            height = int(round(line.box[3] - line.box[1]))
            out.append(f'     <span class="ocr_line" id="line_{p}_{n_line}" title="{bbox(line.box)}; baseline 0 0; '
                       f'x_size {height}">')
            conf = "" if line.score is None else f"; x_wconf {int(round(100 * min(1.0, max(0.0, line.score))))}"
            spans = []
            for text, wbox in words(line):
                n_word += 1
                spans.append(f'<span class="ocrx_word" id="word_{p}_{n_word}" title="{bbox(wbox)}{conf}">'
                             f"{escape(text, quote=False)}</span>")
            out.append(" ".join(spans) + "</span>\n")
        out.append("    </p>\n   </div>\n")
    out.append("  </div>\n")
    return "".join(out)


def render(page: Page) -> bytes:
    return (_HEAD + page_div(page) + _TAIL).encode("utf-8", errors="replace")


def join(parts: Sequence[Part]) -> bytes:
    """The pages' hOCR as one document: each page's ocr_page in order; a page without one, a comment."""
    body = []
    for number, data, why in parts:
        found = _PAGE_DIV.search(data) if data is not None else None
        if found is not None:
            body.append(found.group(1).decode("utf-8", errors="replace"))
        else:
            reason = " ".join((why or "failed").replace("--", "- -").split())
            body.append(f"  <!-- page {number}: {escape(reason, quote=False)} -->\n")
    return (_HEAD + "".join(body) + _TAIL).encode("utf-8", errors="replace")


RENDERER = Renderer("hocr", ".hocr", "text/vnd.hocr+html",
                    "hOCR 1.2: blocks, lines and words with their boxes and confidence", render=render, join=join,
                    needs=LINES)
