"""pdf: a searchable PDF per document (OUT/NAME.pdf, written when the document's last page is done, as --join
writes OUT/NAME.md): each page as it was, with the text the engine read on it laid over it invisibly (text
render mode 3), each line on its box, so that selecting and searching finds the words where they stand.

    a PDF's page     copied as it is (pdfium.stamp), with the text over it as a form of its own; a page read from
                     its own text layer, a failed page and a page without line boxes: copied as it is, no text
    an image's page  the image as decoded (a JPEG as it is in its file when it needs no turning, else lossless,
                     compressed as a PNG would be)
                     with the text over it

The text is written by hand (`_Writer`): one font with no glyphs (Type0, Identity-H, a ToUnicode map from
each code to the same UTF-16 unit), every glyph 500/1000 em wide, each line's size its box's height and its
horizontal scaling (Tz) such that the line spans its box's width. Positions: the line's box in page pixels
(y down) → points of the page as shown (the crop box turned by /Rotate) → the page's own space (`_shown_to_user`).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..records import LINES, Kind, PageRecord, Source
from .base import DocumentPage, Renderer

GLYPH_WIDTH = 0.5  # of the font size: the width of every glyph (the font's /DW 500)
DESCENT = 0.2  # of the font size: how far below the baseline the glyph box reaches (/Descent -200)
IMAGE_DPI = 150.0  # an image that does not say its dpi is shown at this size (only its size on screen)

_TO_UNICODE = b"""/CIDInit /ProcSet findresource begin
12 dict begin
begincmap
/CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def
/CMapName /Adobe-Identity-UCS def
/CMapType 2 def
1 begincodespacerange
<0000> <FFFF>
endcodespacerange
1 beginbfrange
<0000> <FFFF> <0000>
endbfrange
endcmap
CMapName currentdict /CMap defineresource pop
end
end
"""

Matrix = tuple[float, float, float, float, float, float]


@dataclass
class _Image:
    width: int
    height: int
    data: bytes
    filter: str  # DCTDecode or FlateDecode
    colors: str  # DeviceRGB or DeviceGray
    predicted: bool = False  # Flate data whose rows carry PNG filter bytes (a PNG's own IDAT): /Predictor 15


@dataclass
class _Sheet:
    """One page of the hand-written PDF: a media box, the matrix from points as shown to its own space, the
    lines (text, x0, y0, x1, y1 in points as shown, y up) and, for an image's page, the image under them."""

    mediabox: tuple[float, float, float, float]
    shown: tuple[float, float]  # width, height in points as shown
    matrix: Matrix = (1, 0, 0, 1, 0, 0)
    lines: list[tuple[str, float, float, float, float]] = field(default_factory=list)
    image: _Image | None = None


def _num(v: float) -> bytes:
    return (b"%.3f" % v).rstrip(b"0").rstrip(b".") or b"0"


class _Writer:
    def __init__(self) -> None:
        self.objects: list[bytes] = []

    def add(self, body: bytes) -> int:
        self.objects.append(body)
        return len(self.objects)

    def stream(self, head: bytes, data: bytes) -> int:
        return self.add(b"<< " + head + b" /Length %d >>\nstream\n" % len(data) + data + b"\nendstream")

    def bytes(self, root: int) -> bytes:
        out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
        offsets = []
        for n, body in enumerate(self.objects, 1):
            offsets.append(len(out))
            out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
        xref = len(out)
        out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(self.objects) + 1)
        out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
        out += b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(self.objects) + 1, root, xref)
        return bytes(out)


def _text_ops(lines: Sequence[tuple[str, float, float, float, float]]) -> bytes:
    ops = [b"BT 3 Tr"]
    for text, x0, y0, x1, y1 in lines:
        units = text.encode("utf-16-be")
        size = y1 - y0
        if size <= 0 or x1 <= x0 or not units:
            continue
        scale = 100.0 * (x1 - x0) / (len(units) // 2 * GLYPH_WIDTH * size)
        ops.append(b"/F1 %s Tf %s Tz 1 0 0 1 %s %s Tm <%s> Tj" % (
            _num(size), _num(scale), _num(x0), _num(y0 + DESCENT * size), units.hex().encode()))
    ops.append(b"ET")
    return b"\n".join(ops)


def sheets_pdf(sheets: Sequence[_Sheet]) -> bytes:
    """A PDF of `sheets`, written by hand."""
    w = _Writer()
    root = w.add(b"")  # the catalog, filled in below
    pages = w.add(b"")
    descriptor = w.add(b"<< /Type /FontDescriptor /FontName /GlyphLessFont /Flags 5 /FontBBox [0 -200 500 800] "
                       b"/ItalicAngle 0 /Ascent 800 /Descent -200 /CapHeight 800 /StemV 80 >>")
    cid = w.add(b"<< /Type /Font /Subtype /CIDFontType2 /BaseFont /GlyphLessFont /CIDSystemInfo << /Registry (Adobe) "
                b"/Ordering (Identity) /Supplement 0 >> /FontDescriptor %d 0 R /DW 500 /CIDToGIDMap /Identity >>"
                % descriptor)
    to_unicode = w.stream(b"", _TO_UNICODE)
    font = w.add(b"<< /Type /Font /Subtype /Type0 /BaseFont /GlyphLessFont /Encoding /Identity-H "
                 b"/DescendantFonts [%d 0 R] /ToUnicode %d 0 R >>" % (cid, to_unicode))
    kids = []
    for sheet in sheets:
        xobjects = b""
        content = b"q %s cm\n" % b" ".join(_num(v) for v in sheet.matrix)
        if sheet.image is not None:
            im = sheet.image
            parms = b" /DecodeParms << /Predictor 15 /Colors %d /BitsPerComponent 8 /Columns %d >>" % (
                3 if im.colors == "DeviceRGB" else 1, im.width) if im.predicted else b""
            ref = w.stream(b"/Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /%s /BitsPerComponent 8 "
                           b"/Filter /%s%s" % (im.width, im.height, im.colors.encode(), im.filter.encode(), parms),
                           im.data)
            xobjects = b" /XObject << /Im0 %d 0 R >>" % ref
            content += b"q %s 0 0 %s 0 0 cm /Im0 Do Q\n" % (_num(sheet.shown[0]), _num(sheet.shown[1]))
        content += _text_ops(sheet.lines) + b"\nQ"
        contents = w.stream(b"/Filter /FlateDecode", zlib.compress(content))
        kids.append(w.add(b"<< /Type /Page /Parent %d 0 R /MediaBox [%s] /Resources << /Font << /F1 %d 0 R >>%s >> "
                          b"/Contents %d 0 R >>" % (pages, b" ".join(_num(v) for v in sheet.mediabox), font,
                                                    xobjects, contents)))
    w.objects[root - 1] = b"<< /Type /Catalog /Pages %d 0 R >>" % pages
    w.objects[pages - 1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % k for k in kids), len(kids))
    return w.bytes(root)


# -- where the lines go -------------------------------------------------------------------------------

def _shown_to_user(crop: tuple[float, float, float, float], rotation: int) -> tuple[Matrix, tuple[float, float]]:
    """The matrix from points of the page as shown (its crop box turned `rotation` degrees clockwise, origin at
    the bottom left) to the page's own space, and the shown size."""
    x0, y0, x1, y1 = crop
    w, h = x1 - x0, y1 - y0
    if rotation == 90:
        return (0, 1, -1, 0, x0 + w, y0), (h, w)
    if rotation == 180:
        return (-1, 0, 0, -1, x0 + w, y0 + h), (w, h)
    if rotation == 270:
        return (0, -1, 1, 0, x0, y0 + h), (h, w)
    return (1, 0, 0, 1, x0, y0), (w, h)


def placed(record: PageRecord, shown: tuple[float, float]) -> list[tuple[str, float, float, float, float]]:
    """The record's lines in points of the page as shown (y up), from their boxes in page pixels (y down)."""
    sx, sy = shown[0] / max(1, record.width), shown[1] / max(1, record.height)
    out = []
    for line in record.lines:
        if line.box is None or not line.text.strip():
            continue
        x0, y0, x1, y1 = line.box
        out.append((line.text, x0 * sx, shown[1] - y1 * sy, x1 * sx, shown[1] - y0 * sy))
    return out


def _usable(page: DocumentPage) -> PageRecord | None:
    """The page's record when its text goes over it: OCR read it, with line boxes."""
    rec = page.record
    return rec if rec is not None and not page.text_layer and rec.boxes == LINES else None


# -- a document ---------------------------------------------------------------------------------------

def document(source: Source, pages: Sequence[DocumentPage], image_of: Callable[[int], Any]) -> bytes:
    """The searchable PDF of `source`'s `pages` (in order); `image_of(page)`: an image's page as decoded (PIL),
    the frame its boxes are in. Raises DecodeError when the source cannot be read."""
    if source.kind is Kind.PDF:
        return _from_pdf(source, pages)
    return sheets_pdf([_image_sheet(source, page, image_of(page.number)) for page in pages])


def _from_pdf(source: Source, pages: Sequence[DocumentPage]) -> bytes:
    from .. import pdfium

    frames = pdfium.page_frames(source.path, [p.number - 1 for p in pages])
    sheets: list[_Sheet] = []
    plan: list[tuple[int, int | None]] = []
    for page, frame in zip(pages, frames):
        rec = _usable(page)
        if rec is None:
            plan.append((page.number - 1, None))
            continue
        matrix, shown = _shown_to_user(frame.cropbox, frame.rotation)
        sheets.append(_Sheet(frame.mediabox, shown, matrix, placed(rec, shown)))
        plan.append((page.number - 1, len(sheets) - 1))
    return pdfium.stamp(source.path, sheets_pdf(sheets) if sheets else None, plan)


def _image_sheet(source: Source, page: DocumentPage, image: Any) -> _Sheet:
    own = _own_dpi(source, page.number) or float(IMAGE_DPI)
    shown = (image.width * 72.0 / own, image.height * 72.0 / own)
    rec = _usable(page)
    lines = placed(rec, shown) if rec is not None else []
    return _Sheet((0.0, 0.0, *shown), shown, lines=lines, image=_embedded(source, page.number, image))


def _own_dpi(source: Source, number: int) -> float | None:
    from ..images import open_image

    try:
        with open_image(source.path) as im:
            if number > 1:
                im.seek(number - 1)
            dpi = im.info.get("dpi")
        value = float(dpi[0]) if dpi else None
    except (OSError, ValueError, TypeError, EOFError):
        return None
    return value if value is not None and 20 <= value <= 4800 else None


def _embedded(source: Source, number: int, image: Any) -> _Image:
    """The page's image for the PDF: a JPEG's own bytes when decoding changed nothing (no EXIF turn, RGB or
    grey), else the decoded pixels, losslessly."""
    if source.kind is Kind.JPEG and number == 1:
        from ..images import open_image

        try:
            with open_image(source.path) as im:
                same = (im.mode in ("RGB", "L") and im.getexif().get(0x0112, 1) == 1
                        and im.size == image.size)
                mode = im.mode
            if same:
                return _Image(image.width, image.height, source.path.read_bytes(), "DCTDecode",
                              "DeviceRGB" if mode == "RGB" else "DeviceGray")
        except OSError:
            pass
    rgb = image.convert("RGB")
    r, g, b = rgb.split()
    grey = r.tobytes() == g.tobytes() == b.tobytes()  # a grey scan: one channel, not three the same
    return _png_rows(r if grey else rgb)


def _png_rows(image: Any) -> _Image:
    """The image's pixels (RGB or L) as Pillow's PNG encoder compresses them (each row filtered as suits it
    best), its IDAT data taken as it is: a PDF reads it with /Predictor 15, and it is about as small as the PNG."""
    import io
    import struct

    buf = io.BytesIO()
    image.save(buf, format="PNG", compress_level=6)
    data, pos, idat = buf.getvalue(), 8, []
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            idat.append(data[pos + 8:pos + 8 + length])
        pos += 12 + length
    colors = "DeviceGray" if image.mode == "L" else "DeviceRGB"
    return _Image(image.width, image.height, b"".join(idat), "FlateDecode", colors, predicted=True)


RENDERER = Renderer("pdf", ".pdf", "application/pdf",
                    "a searchable PDF per document: each page as it was, the text read laid over it invisibly",
                    document=document, needs=LINES)
