"""The page JSON of `--format md,json` (NAME.json beside each page's NAME.md) and of serve's
`?format=lines`: a page's lines with their boxes, scores and places in the reading order.

Schema, version 1 (`SCHEMA` below is the same as a JSON Schema; tests/test_pagejson.py checks pages against it):

    {"schema": "ocrbatch-page", "version": 1,
     "source": "scans/report.pdf",        the input as it was named
     "page": 2,                           1-based
     "status": "ok",                      or "truncated" (DeepSeek-OCR-2 stopped at its token limit)
     "engine": "rapidocr/ppocrv6-small",
     "width": 1240, "height": 1754,       the page in pixels, as decoded: a PDF page rendered at `dpi`
     "dpi": 150,                          null for an image (its own pixels); lower than --dpi (a fraction) for a
                                          page so large it was rendered capped (its record's info: dpi_capped)
     "confidence": {...},                 as in the manifest (confidence.py); null when the engine gives none
     "lines": [                           in the order the Markdown gives them
       {"order": 0,                       the line's place in that order (0, 1, 2...)
        "block": 0,                       the Markdown block (heading, paragraph, list item, table) it went
                                          into, numbered in reading order; null: left out of the Markdown
                                          (furniture)
        "kind": "text",                   "text"; "furniture" (running head, page number, margin stamp: not in
                                          the Markdown unless --keep-furniture); DeepSeek-OCR-2 gives its
                                          block's label (title, table, ...)
        "text": "Annual report",
        "score": 0.987,                   the recognizer's (0..1); null for a text layer
        "box": [102.0, 88.5, 640.0, 121.0],        x0, y0, x1, y1 in page pixels, y down
        "box_norm": [0.08226, 0.05046, 0.51613, 0.06898]}, ...   the same as fractions of width and height
     ],
     "figures": [{"box": [...], "box_norm": [...], "file": "images/page-0002-1.png"}]}

Boxes are axis-aligned around the line on the page as decoded (a page the engine turned upright, or whose
skew it took out, has its boxes turned back). A text-layer page's lines are the layer's line segments.
"""

from __future__ import annotations

import json
import math
from typing import Any, Iterable, Sequence

from .confidence import Confidence
from .pagerecord import record_of
from .records import FURNITURE, Box, PageLines, PageRecord, PageResult, PlacedLine, RecordLine, TextLine

NAME = "ocrbatch-page"
VERSION = 1

_BOX = {"type": "array", "items": {"type": "number"}, "minItems": 4, "maxItems": 4}
_LINE = {"type": "object", "required": ["order", "block", "kind", "text", "score", "box", "box_norm"],
         "additionalProperties": False,
         "properties": {"order": {"type": "integer", "minimum": 0}, "block": {"type": ["integer", "null"]},
                        "kind": {"type": "string"}, "text": {"type": "string"},
                        "score": {"type": ["number", "null"]}, "box": _BOX, "box_norm": _BOX}}
_FIGURE = {"type": "object", "required": ["box", "box_norm", "file"], "additionalProperties": False,
           "properties": {"box": _BOX, "box_norm": _BOX, "file": {"type": ["string", "null"]}}}
SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "ocrbatch page", "type": "object", "additionalProperties": False,
    "required": ["schema", "version", "source", "page", "status", "engine", "width", "height", "dpi",
                 "confidence", "lines", "figures"],
    "properties": {
        "schema": {"const": NAME}, "version": {"const": VERSION},
        "source": {"type": "string"}, "page": {"type": "integer", "minimum": 1},
        "status": {"enum": ["ok", "truncated"]}, "engine": {"type": "string"},
        "width": {"type": "integer", "minimum": 0}, "height": {"type": "integer", "minimum": 0},
        "dpi": {"type": ["number", "null"]},
        "confidence": {"type": ["object", "null"], "required": ["method", "score"]},
        "lines": {"type": "array", "items": _LINE}, "figures": {"type": "array", "items": _FIGURE},
    },
}


def page_json(result: PageResult, engine: str, dpi: int | None = None, figure_files: Sequence[str] = ()) -> dict:
    """The page JSON of a finished page (see the module docstring). `dpi`: the PDF rendering resolution (None
    for images); `figure_files`: the figures' files, relative to the page's JSON."""
    ref = result.ref
    assert ref is not None, "only a page has a page JSON"
    conf = result.confidence
    return of_record(record_of(result), source=ref.source.display, page=ref.page, status=result.status.value,
                     engine=engine, confidence=conf.as_dict() if isinstance(conf, Confidence) else None,
                     figure_files=figure_files, dpi=dpi)


def of_record(record: PageRecord, *, source: str, page: int, status: str, engine: str,
              confidence: dict | None = None, figure_files: Sequence[str] = (), dpi: float | None = None) -> dict:
    """The page JSON of a page record (render/jsonpage.py): its boxed lines in reading order, each with the number
    of its Markdown block (furniture left out: null). `dpi`: the record's when not given."""
    w, h = max(1, record.width), max(1, record.height)
    files = list(figure_files) + [None] * max(0, len(record.figures) - len(figure_files))
    lines: list[tuple[RecordLine, int | None]] = []
    number = 0
    for block in record.blocks:
        left_out = block.kind == FURNITURE
        lines += [(line, None if left_out else number) for line in block.lines if line.box is not None]
        number += not left_out
    return {
        "schema": NAME, "version": VERSION, "source": source, "page": page,
        "status": status, "engine": engine, "width": record.width, "height": record.height,
        "dpi": record.dpi if dpi is None else dpi, "confidence": confidence,
        "lines": [{"order": n, "block": block, "kind": line.kind, "text": line.text,
                   "score": None if line.score is None else round(line.score, 4),
                   "box": _px(line.box), "box_norm": _norm(line.box, w, h)}
                  for n, (line, block) in enumerate(lines) if line.box is not None],
        "figures": [{"box": _px(box), "box_norm": _norm(box, w, h), "file": f}
                    for box, f in zip(record.figures, files)],
    }


def dumps(page: dict) -> bytes:
    """The page JSON as a file: its fields on the first lines, then one line per line and per figure."""
    def array(items: list) -> str:
        if not items:
            return "[]"
        return "[\n" + ",\n".join("  " + json.dumps(i, ensure_ascii=False) for i in items) + "\n ]"

    head = json.dumps({k: v for k, v in page.items() if k not in ("lines", "figures")}, ensure_ascii=False)
    text = f'{head[:-1]},\n "lines": {array(page["lines"])},\n "figures": {array(page["figures"])}}}\n'
    return text.encode("utf-8", errors="replace")


def _px(box: Box) -> list[float]:
    return [round(float(v), 1) for v in box]


def _norm(box: Box, w: int, h: int) -> list[float]:
    return [round(min(1.0, max(0.0, v / s)), 5) for v, s in zip(box, (w, h, w, h))]


# -- from the layout's frame to the page's ------------------------------------------------------------

def placed_lines(laid_out: Iterable[tuple[TextLine, int | None, bool]], frame: tuple[int, int], *,
                 skew: float = 0.0, turn: int = 0, scored: bool = True) -> PageLines:
    """PageLines from the layout's lines in reading order ((line, block, furniture left out), as
    `layout.lines_to_markdown(placed=...)` gives them), whose boxes are in `frame` (width, height): the page
    turned `turn` degrees clockwise, then its skew (radians, `layout.skew.skew_angle`) taken out. Boxes go
    back to the page as decoded. `scored`: the lines carry recognizer scores (not a text layer)."""
    fw, fh = frame
    lines = tuple(PlacedLine(line.text, unturn(unskew(line.box, skew, fw, fh), turn, fw, fh),
                             float(line.score) if scored else None, block, "furniture" if furniture else "text")
                  for line, block, furniture in laid_out)
    w, h = (fh, fw) if turn in (90, 270) else (fw, fh)
    return PageLines(int(w), int(h), lines)


def unskew(box: Box, angle: float, w: float, h: float) -> list[tuple[float, float]]:
    """The corners of `box`, a box in the deskewed frame (`layout.skew.lines_from_quads` turned the page by
    -angle about its centre), in the page's frame."""
    x0, y0, x1, y1 = (float(v) for v in box)
    corners = [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]
    if abs(angle) <= math.radians(0.05):  # lines_from_quads leaves such pages as they are
        return corners
    c, s = math.cos(angle), math.sin(angle)
    cx, cy = w / 2, h / 2
    return [(cx + (x - cx) * c - (y - cy) * s, cy + (x - cx) * s + (y - cy) * c) for x, y in corners]


def unturn(points: Sequence[tuple[float, float]], turn: int, w: float, h: float) -> Box:
    """The box around `points` of a frame (w × h) that is the page turned `turn` degrees clockwise, in the
    page's own frame, clamped to the page."""
    if turn == 90:  # the page (h × w) turned clockwise: its (x, y) went to (h - y, x)
        back = [(y, w - x) for x, y in points]
        pw, ph = h, w
    elif turn == 180:
        back = [(w - x, h - y) for x, y in points]
        pw, ph = w, h
    elif turn == 270:
        back = [(h - y, x) for x, y in points]
        pw, ph = h, w
    else:
        back, pw, ph = list(points), w, h
    xs, ys = [p[0] for p in back], [p[1] for p in back]
    return (min(max(min(xs), 0.0), pw), min(max(min(ys), 0.0), ph),
            min(max(max(xs), 0.0), pw), min(max(max(ys), 0.0), ph))
