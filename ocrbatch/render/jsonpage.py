"""json: the page JSON (NAME.json: its lines with boxes, scores and places in the reading order; schema in
ocrbatch/pagejson.py)."""

from __future__ import annotations

import json
from typing import Sequence

from .. import pagejson
from .base import Page, Part, Renderer


def render(page: Page) -> bytes:
    return pagejson.dumps(pagejson.of_record(page.record, source=page.source, page=page.number,
                                             status=page.status, engine=page.engine, confidence=page.confidence,
                                             figure_files=page.figure_files))


def join(parts: Sequence[Part]) -> bytes:
    """A document's page JSONs as one JSON array (a failed page: {"page": N, "error": why})."""
    items = [json.loads(data) if data is not None else {"page": n, "error": why or "failed"} for n, data, why in parts]
    return (json.dumps(items, ensure_ascii=False) + "\n").encode("utf-8", errors="replace")


RENDERER = Renderer("json", ".json", "application/json", "the page JSON: each line's text, box, score and block",
                    render=render, join=join)
