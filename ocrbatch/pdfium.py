"""The only module that calls pypdfium2. PDFium is not thread-safe, even across documents, so every
call into it holds one process-wide lock; callers do their Pillow/numpy work outside it."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import DecodeError

LOCK = threading.RLock()
MAX_RENDER_PIXELS = 64_000_000  # a page is rendered at --dpi, or smaller if it would exceed this
CAPPED_DPI = "ocrbatch_capped_dpi"  # the image's info key for the dpi a capped page was rendered at
# PDFium keeps what it parsed of every page it has loaded (page dictionaries, image streams, fonts) until the
# document is closed: a 2,000-page scan would hold all of it. The document is reopened after this many pages.
REOPEN_EVERY = 64
# A PDF's page count is what its page tree claims (/Count). It is believed only within these bounds: a
# 700-byte file claiming a million pages would otherwise be a million failed records (issue 39, B5).
MAX_DOCUMENT_PAGES = 100_000  # the most pages ocrbatch reads from one document: more fails it as one record
MIN_PAGE_BYTES = 1  # each page takes at least a reference in the file ("3 0 R"): a claim over size/this is false


def _why(exc: Exception) -> str:
    msg = str(exc)
    if "Data format error" in msg:
        return "not a readable PDF (damaged or truncated)"
    if "Password" in msg or "password" in msg:
        return "the PDF is encrypted with a password"
    if "(PDFium: Success)" in msg:  # PDFium refuses a document whose page tree is empty, with no error code
        return "the PDF has no pages (an empty or damaged page tree)"
    return msg or type(exc).__name__


class PdfHandle:
    """An open PDF document. Methods take the lock themselves."""

    def __init__(self, path: Path) -> None:
        import pypdfium2

        self.path = path
        self._loaded = 0  # pages loaded since the document was opened
        with LOCK:
            self._doc = self._open()
            self.page_count = len(self._doc)

    def _open(self) -> Any:
        import pypdfium2

        try:
            return pypdfium2.PdfDocument(str(self.path))
        except pypdfium2.PdfiumError as exc:
            raise DecodeError(_why(exc)) from exc
        except FileNotFoundError as exc:  # gone since it was found (an upload removed, a file moved)
            raise DecodeError("cannot read: no such file (removed or moved since it was found)") from exc
        except OSError as exc:
            raise DecodeError(f"cannot read: {exc.strerror or exc}") from exc

    def _page(self, index: int) -> Any:
        """Page `index`, reopening the document every REOPEN_EVERY pages so its caches stay bounded."""
        if self._loaded >= REOPEN_EVERY:
            self._doc.close()
            self._doc = self._open()
            self._loaded = 0
        self._loaded += 1
        return self._doc[index]

    def render(self, index: int, dpi: int) -> Any:
        """Page `index` (0-based) as a PIL image (RGB or L) rendered at `dpi`."""
        import pypdfium2

        with LOCK:
            try:
                page = self._page(index)
                try:
                    width, height = page.get_size()
                    # A poster-sized page at --dpi would take gigabytes: cap its pixels, not its dpi.
                    scale = min(dpi / 72.0, math.sqrt(MAX_RENDER_PIXELS / max(1.0, width * height)))
                    bitmap = page.render(scale=scale, grayscale=False)
                    # to_pil() shares the bitmap's memory; copy it while we hold the lock.
                    image = bitmap.to_pil().copy()
                    bitmap.close()
                    if scale < dpi / 72.0:  # capped: the dpi it really has (pixel <-> point conversions need it)
                        image.info[CAPPED_DPI] = scale * 72.0
                finally:
                    page.close()
            except pypdfium2.PdfiumError as exc:
                raise DecodeError(f"cannot render: {_why(exc)}") from exc
        return image

    def text_chars(self, index: int) -> "PageText":
        """Page `index`'s text layer: every character with its loose box (the font's bounds, so line
        heights do not depend on the letters), in PDF points."""
        import pypdfium2
        import pypdfium2.raw as raw

        with LOCK:
            try:
                page = self._page(index)
                try:
                    width, height = page.get_size()
                    rotation = page.get_rotation()
                    textpage = page.get_textpage()
                    try:
                        n = textpage.count_chars()
                        text = textpage.get_text_range() if n else ""
                        handle, box = textpage.raw, raw.FS_RECTF()
                        unicode, loose = raw.FPDFText_GetUnicode, raw.FPDFText_GetLooseCharBox
                        same = len(text) == n  # then text[i] is char i: one call per char saved
                        chars = []
                        for i in range(n):
                            code = ord(text[i]) if same else unicode(handle, i)
                            if loose(handle, i, box):
                                chars.append((code, box.left, box.bottom, box.right, box.top))
                            else:
                                chars.append((code, 0.0, 0.0, 0.0, 0.0))
                    finally:
                        textpage.close()
                    image_area = 0.0
                    for obj in page.get_objects(filter=[raw.FPDF_PAGEOBJ_IMAGE], max_depth=2):
                        left, bottom, right, top = obj.get_bounds()
                        image_area = max(image_area, max(0.0, right - left) * max(0.0, top - bottom))
                finally:
                    page.close()
            except pypdfium2.PdfiumError as exc:
                raise DecodeError(f"cannot read the text layer: {_why(exc)}") from exc
        return PageText(chars, width, height, rotation, image_area / max(1.0, width * height))

    def held_pages(self, size: int) -> int:
        """How many pages the page tree really holds: its claim (/Count), bounded by MAX_DOCUMENT_PAGES and the
        file's `size`, then checked by finding the last page's dictionary (a claim past the pages the tree
        holds, a loop or a cut tree, is cut at the first page not found: by bisection, PDFium resolving
        pages in order). DecodeError when the claim cannot be right at all."""
        import pypdfium2.raw as raw

        claimed = self.page_count
        if claimed > MAX_DOCUMENT_PAGES:
            raise DecodeError(f"the PDF claims {claimed:,} pages, over the {MAX_DOCUMENT_PAGES:,} ocrbatch reads "
                              "from one document (split it)")
        if claimed * MIN_PAGE_BYTES > size:
            raise DecodeError(f"the PDF claims {claimed:,} pages, more than its {size:,} bytes can hold "
                              "(a damaged page tree)")
        with LOCK:
            box = raw.FS_SIZEF()

            def found(index: int) -> bool:
                return bool(raw.FPDF_GetPageSizeByIndexF(self._doc.raw, index, box))

            if claimed == 0 or found(claimed - 1):
                return claimed
            lo, hi = 0, claimed - 1  # pages [0, lo) found (none known yet); page hi not found
            while lo < hi:
                mid = (lo + hi) // 2
                if found(mid):
                    lo = mid + 1
                else:
                    hi = mid
            return lo

    def close(self) -> None:
        with LOCK:
            self._doc.close()


@dataclass(frozen=True)
class PageText:
    """A page's text layer as PDFium sees it; boxes are (left, bottom, right, top) in PDF points."""

    chars: list[tuple[int, float, float, float, float]]  # (unicode code point, box), PDFium's order
    width: float  # as shown (after /Rotate)
    height: float
    rotation: int  # degrees clockwise the page is shown turned
    image_cover: float  # the largest image's share of the page area


@dataclass(frozen=True)
class PageTree:
    """A PDF's pages as counted: `held` found in its page tree, of the `claimed` it says it has."""

    held: int
    claimed: int


def page_tree(path: Path, size: int) -> PageTree:
    """The PDF's page count, checked (PdfHandle.held_pages); DecodeError when it cannot be believed."""
    handle = PdfHandle(path)
    try:
        return PageTree(handle.held_pages(size), handle.page_count)
    finally:
        handle.close()


def page_count(path: Path) -> int:
    return page_tree(path, path.stat().st_size).held


@dataclass(frozen=True)
class PageFrame:
    """Where a PDF page's content lies: its boxes in its own space (points) and its /Rotate (clockwise)."""

    mediabox: tuple[float, float, float, float]
    cropbox: tuple[float, float, float, float]
    rotation: int


def page_frames(path: Path, indices: list[int]) -> list[PageFrame]:
    """The frames of pages `indices` (0-based) of the PDF at `path`; DecodeError when it cannot be read."""
    import pypdfium2

    with LOCK:
        try:
            doc = pypdfium2.PdfDocument(str(path))
        except pypdfium2.PdfiumError as exc:
            raise DecodeError(f"cannot open: {_why(exc)}") from exc
        try:
            frames = []
            for index in indices:
                page = doc[index]
                try:
                    media, crop = page.get_mediabox(), page.get_cropbox()
                    frames.append(PageFrame(media, crop, int(page.get_rotation()) % 360))
                finally:
                    page.close()
            return frames
        except pypdfium2.PdfiumError as exc:
            raise DecodeError(f"cannot read a page: {_why(exc)}") from exc
        finally:
            doc.close()


def stamp(path: Path, overlay: bytes | None, plan: list[tuple[int, int | None]]) -> bytes:
    """A new PDF of the pages of the PDF at `path` named by `plan` ((0-based page, its overlay's page or None)),
    in order, each copied as it is and, where `plan` names one, with that page of the PDF `overlay` drawn over
    it as a form (render/pdf.py: its invisible text). DecodeError when the source cannot be read."""
    import io

    import pypdfium2

    with LOCK:
        docs = []
        try:
            src = pypdfium2.PdfDocument(str(path))
            docs.append(src)
            over = pypdfium2.PdfDocument(overlay) if overlay is not None else None
            if over is not None:
                docs.append(over)
            dest = pypdfium2.PdfDocument.new()
            docs.append(dest)
            dest.import_pages(src, [index for index, _ in plan])
            for n, (_, sheet) in enumerate(plan):
                if sheet is None or over is None:
                    continue
                page = dest[n]
                try:
                    page.insert_obj(over.page_as_xobject(sheet, dest).as_pageobject())
                    page.gen_content()
                finally:
                    page.close()
            out = io.BytesIO()
            dest.save(out)
            return out.getvalue()
        except pypdfium2.PdfiumError as exc:
            raise DecodeError(f"cannot make its PDF: {_why(exc)}") from exc
        finally:
            for doc in reversed(docs):
                doc.close()
