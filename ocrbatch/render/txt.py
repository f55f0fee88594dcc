"""txt: the page's plain text in reading order (NAME.txt): each block's text (no Markdown markup; a table's
cells apart by tabs), blocks apart by a blank line, furniture left out as the Markdown leaves it. Pages of a
document are apart by a form feed (as pdftotext writes them)."""

from __future__ import annotations

from typing import Sequence

from ..records import FURNITURE
from .base import Page, Part, Renderer

PAGE_BREAK = b"\f"


def text(page: Page) -> str:
    blocks = [b.text for b in page.record.blocks if b.kind != FURNITURE and b.text.strip()]
    return "\n\n".join(blocks) + "\n" if blocks else ""


def render(page: Page) -> bytes:
    return text(page).encode("utf-8", errors="replace")


def join(parts: Sequence[Part]) -> bytes:
    return PAGE_BREAK.join(data or b"" for _, data, _ in parts)


def stream(part: Part, separated: bool) -> bytes:
    return part[1] or b""  # a failed page: nothing (its error goes to stderr)


RENDERER = Renderer("txt", ".txt", "text/plain", "plain text in reading order, pages apart by a form feed",
                    render=render, join=join, stream=stream, between=PAGE_BREAK)
