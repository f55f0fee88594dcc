"""md: the page's Markdown (NAME.md). Always written: it is the run's record of each page (the manifest names
it; --join and resume read it)."""

from __future__ import annotations

from typing import Sequence

from ..pipeline import joined
from .base import Page, Part, Renderer


def render(page: Page) -> bytes:
    text = page.record.markdown_text()
    return (text if text.endswith("\n") else text + "\n").encode("utf-8", errors="replace")


def _text(part: Part) -> tuple[int, str | None, str | None]:
    number, data, why = part
    return number, None if data is None else data.decode("utf-8", errors="replace"), why


def join(parts: Sequence[Part]) -> bytes:
    return joined.document([_text(p) for p in parts]).encode("utf-8", errors="replace")


def stream(part: Part, separated: bool) -> bytes:
    return joined.page_part(*_text(part), separated=separated).encode("utf-8", errors="replace")


RENDERER = Renderer("md", ".md", "text/markdown", "Markdown: headings, paragraphs, lists, tables (always written)",
                    render=render, join=join, stream=stream)
