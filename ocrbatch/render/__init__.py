"""Output formats: each a renderer of the page record (records.PageRecord), one module each, in one registry.

    RENDERERS   name → Renderer, in the order --format lists them; the write stage (pipeline/outputs.py),
                `-o -` (pipeline/stdout.py), --join and serve's answers (serve/accept.py) all read it

A new format is a module with a `RENDERER` (render/base.py says what one holds) and a line below.
"""

from __future__ import annotations

from . import hocr, jsonpage, md, pdf, txt
from .base import DocumentPage, Page, Part, Refusal, Renderer

RENDERERS: dict[str, Renderer] = {r.name: r for r in (
    md.RENDERER,
    jsonpage.RENDERER,
    txt.RENDERER,
    hocr.RENDERER,
    pdf.RENDERER,
)}
NAMES = tuple(RENDERERS)


def get(name: str) -> Renderer:
    return RENDERERS[name]


__all__ = ["RENDERERS", "NAMES", "DocumentPage", "Page", "Part", "Refusal", "Renderer", "get"]
