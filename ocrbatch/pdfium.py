"""The only module that calls pypdfium2. PDFium is not thread-safe, even across documents, so every
call into it holds one process-wide lock; callers do their Pillow/numpy work outside it."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from .errors import DecodeError

LOCK = threading.RLock()


def _why(exc: Exception) -> str:
    msg = str(exc)
    if "Data format error" in msg:
        return "not a readable PDF (damaged or truncated)"
    if "Password" in msg or "password" in msg:
        return "the PDF is encrypted with a password"
    return msg or type(exc).__name__


class PdfHandle:
    """An open PDF document. Methods take the lock themselves."""

    def __init__(self, path: Path) -> None:
        import pypdfium2

        self.path = path
        with LOCK:
            try:
                self._doc = pypdfium2.PdfDocument(str(path))
            except pypdfium2.PdfiumError as exc:
                raise DecodeError(_why(exc)) from exc
            self.page_count = len(self._doc)

    def render(self, index: int, dpi: int) -> Any:
        """Page `index` (0-based) as a PIL image (RGB or L) rendered at `dpi`."""
        import pypdfium2

        with LOCK:
            try:
                page = self._doc[index]
                try:
                    bitmap = page.render(scale=dpi / 72.0, grayscale=False)
                    # to_pil() shares the bitmap's memory; copy it while we hold the lock.
                    image = bitmap.to_pil().copy()
                    bitmap.close()
                finally:
                    page.close()
            except pypdfium2.PdfiumError as exc:
                raise DecodeError(f"cannot render: {_why(exc)}") from exc
        return image

    def close(self) -> None:
        with LOCK:
            self._doc.close()


def page_count(path: Path) -> int:
    handle = PdfHandle(path)
    try:
        return handle.page_count
    finally:
        handle.close()
