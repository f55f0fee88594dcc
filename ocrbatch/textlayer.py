"""The PDF text-layer fast path: a born-digital page's own characters → TextLines → the same layout.

PDFium gives every character of the page with its box (`pdfium.PdfHandle.text_chars`, read under the
PDFium lock); here, outside the lock, characters are joined into line segments: a segment ends at a
line break, where the next character is not on the same baseline, or across a gap wider than about a
character's height (a column gutter, a table cell). The segments go through `layout.lines_to_markdown`
like OCR lines do (`layout.page.layout_page`: the same stages), so both paths give the same kind of Markdown.

A layer is used only when it looks real: enough characters, few unmapped glyphs (private-use or
replacement code points, which is how a PDF with broken font encodings reads), mostly letters and
digits, and not a few stray characters over a full-page scan.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from .layout.markdown import page_markdown as page_markdown_of
from .layout.page import layout_page
from .pagejson import placed_lines
from .pdfium import PageText
from .pagerecord import of_layout
from .records import PageLines, PageRecord, TextLine

MIN_CHARS = 20  # fewer visible characters: an empty layer (or just a stamp on a scan)
MAX_BAD = 0.1  # share of unmapped glyphs that makes a layer garbage
MIN_ALNUM = 0.4  # share of letters and digits a real layer has at least
SCAN_COVER = 0.5  # an image covering this much of the page is a scan ...
SCAN_MIN_CHARS = 200  # ... unless the layer has this many characters (an OCR layer)



_BREAKS = {0x0A, 0x0D}
_SPACES = {0x09, 0x20, 0xA0}
_SOFT_HYPHENS = {0x02, 0xFFFE}  # how PDFium marks a hyphen that breaks a word at the end of a line
_LEADERS = {ord(c) for c in ".·…_-‥"}


@dataclass(frozen=True)
class TextLayerPage:
    markdown: str
    lines: int
    chars: int
    turn: int = 0  # degrees the page was turned clockwise so its text runs left to right
    geometry: PageLines | None = None  # the line segments in reading order, boxes on the page as rendered
    record: PageRecord | None = None  # the page as data (pagerecord.py): its Markdown is `markdown`


def unusable(text: PageText) -> str | None:
    """Why this layer cannot stand in for OCR, or None when it can."""
    visible = [c[0] for c in text.chars if c[0] > 0x20 and c[0] not in _SPACES]
    if len(visible) < MIN_CHARS:
        return "the page has no text layer" if not visible else "the text layer is nearly empty"
    bad = sum(1 for c in visible if c in (0xFFFD, 0xFFFF) or 0xE000 <= c <= 0xF8FF)
    if bad > MAX_BAD * len(visible):
        return "the text layer is garbage (unmapped glyphs)"
    marks = [c for c in visible if c not in _LEADERS]  # a table of contents is half dot leaders
    if sum(1 for c in marks if chr(c).isalnum()) < MIN_ALNUM * len(marks):
        return "the text layer is garbage (few letters or digits)"
    boxed = sum(1 for c in text.chars if c[3] > c[1] and c[4] > c[2])
    if boxed < 0.5 * len(visible):
        return "the text layer has no usable character positions"
    if text.image_cover >= SCAN_COVER and len(visible) < SCAN_MIN_CHARS:
        return "the page is a scanned image with a few characters of text"
    return None


def reading_turn(text: PageText) -> int:
    """Degrees (0, 90, 180, 270) to turn the page clockwise so most of its text runs left to right.

    Text drawn sideways (a landscape table on a portrait page, a scan whose layer was written turned)
    advances up or down the page. Each character votes with the step to the next one on its line.
    """
    votes = {0: 0, 90: 0, 180: 0, 270: 0}
    prev = None
    for code, left, bottom, right, top in text.chars:
        if code in _BREAKS or code in _SPACES or code <= 0x20 or right <= left or top <= bottom:
            prev = None if code in _BREAKS else prev
            continue
        cx, cy, size = (left + right) / 2, (bottom + top) / 2, max(right - left, top - bottom)
        if prev is not None:
            dx, dy = cx - prev[0], cy - prev[1]
            if 0.1 * size < max(abs(dx), abs(dy)) < 3 * size:
                if abs(dx) >= abs(dy):
                    votes[0 if dx > 0 else 180] += 1
                else:  # y grows up the page: text running up is read after a clockwise quarter turn
                    votes[90 if dy > 0 else 270] += 1
        prev = (cx, cy)
    best = max(votes, key=lambda k: votes[k])
    return best if votes[best] > votes[0] else 0


def _unrotated_size(text: PageText) -> tuple[float, float]:
    """The page's width and height before /Rotate (the frame its character boxes are in)."""
    return (text.height, text.width) if text.rotation in (90, 270) else (text.width, text.height)


def _turned_size(text: PageText, turn: int) -> tuple[float, float]:
    """Width and height in PDF points after turning the page `turn` degrees clockwise."""
    w, h = _unrotated_size(text)
    return (h, w) if turn in (90, 270) else (w, h)


def _turned(text: PageText, turn: int) -> list[tuple[int, float, float, float, float]]:
    """The characters, boxes in PDF points (y up), after turning the page `turn` degrees clockwise."""
    if not turn:
        return text.chars
    w, h = _unrotated_size(text)

    def point(x: float, y: float) -> tuple[float, float]:
        if turn == 90:
            return y, w - x
        if turn == 180:
            return w - x, h - y
        return h - y, x  # 270

    chars = []
    for code, left, bottom, right, top in text.chars:
        if right <= left or top <= bottom:
            chars.append((code, left, bottom, right, top))
            continue
        (x0, y0), (x1, y1) = point(left, bottom), point(right, top)
        chars.append((code, min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1)))
    return chars


def text_lines(text: PageText, dpi: float, turn: int = 0) -> list[TextLine]:
    """Line segments of the layer, boxes in pixels of the page rendered at `dpi` (y down), after
    turning the page `turn` degrees clockwise."""
    scale = dpi / 72.0
    chars = _turned(text, turn)
    _, page_h = _turned_size(text, turn)
    lines: list[TextLine] = []
    line: list[str] = []
    boxes: list[tuple[float, float, float, float]] = []

    def close() -> None:
        body = re.sub(r"\s+", " ", "".join(line)).strip()
        if body and boxes:
            lines.append(TextLine(body, (min(b[0] for b in boxes), min(b[1] for b in boxes),
                                         max(b[2] for b in boxes), max(b[3] for b in boxes))))
        line.clear()
        boxes.clear()

    for code, left, bottom, right, top in chars:
        if code in _BREAKS:
            close()
            continue
        if code in _SPACES or code == 0 or right <= left or top <= bottom:
            if line and code != 0:
                line.append(" ")
            continue
        box = (left * scale, (page_h - top) * scale, right * scale, (page_h - bottom) * scale)
        if boxes and not _same_segment(boxes[-1], box):
            close()
        line.append("-" if code in _SOFT_HYPHENS else chr(code))
        boxes.append(box)
    close()
    return lines


def _same_segment(prev, box) -> bool:
    h = min(prev[3] - prev[1], box[3] - box[1])
    if min(prev[3], box[3]) - max(prev[1], box[1]) < 0.5 * h:
        return False  # not on the same line
    if prev[0] - 0.05 * h <= box[0] < prev[2]:
        return True  # a ligature ("fi") spelled out: its letters share the glyph's box
    gap = box[0] - prev[2]
    return -0.5 * h <= gap <= 1.0 * max(prev[3] - prev[1], box[3] - box[1])


def page_markdown(text: PageText, dpi: float, keep_furniture: bool = False, debug_layout: str | None = None,
                  ref: object = None) -> TextLayerPage | None:
    """Markdown from the page's text layer, or None when the layer is not usable. Page furniture (running
    heads and feet, page numbers) is left out unless `keep_furniture`, as the engine's is. With
    `debug_layout` (a folder), a picture of the layout is written there too (on a white page)."""
    if unusable(text) is not None:
        return None
    turn = reading_turn(text)
    lines = text_lines(text, dpi, turn)
    if not lines:
        return None
    scale = dpi / 72.0
    w, h = _turned_size(text, turn)
    frame = (int(w * scale), int(h * scale))
    layout = layout_page(lines, *frame, keep_furniture=keep_furniture)
    if debug_layout:
        from .layout.debug import write_debug

        write_debug(debug_layout, ref, layout, None)
    laid_out: list = []
    parts: list[tuple[str, str, str]] = []
    page_markdown_of(layout, keep_furniture, placed=laid_out, parts=parts)
    # the lines' frame is the unrotated page turned `turn`; the rendered page is it turned by /Rotate
    geometry = placed_lines(laid_out, frame, turn=(turn - text.rotation) % 360, scored=False)
    record = of_layout(parts, geometry)
    return TextLayerPage(record.markdown_text(), len(lines), sum(len(l.text) for l in lines), turn, geometry,
                         record)
