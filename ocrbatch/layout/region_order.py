"""Reading order from a layout model's regions (layout/regions.py): the trial of issue 11.

Each recognised line goes to the model region that holds most of it; regions are read in XY-cut
order over their lines' extent (columns first, then bands: a region spanning the columns splits
the page into sections); within a region, rows top to bottom. Only a region the model calls a table
may become a Markdown table: every other region's rows are read as single lines. Headers and
footers in the page margins are furniture. A page where the regions hold too few of the lines
(a receipt, a form the model was not trained on) falls back to our own order (layout/order.py).
"""

from __future__ import annotations

from typing import Sequence

from ..records import TextLine
from .blocks import build_blocks
from .geometry import Box, Row, body_height, group_rows, union
from .markdown import lines_to_markdown, render
from .order import is_margin_stamp
from .regions import LayoutRegion

MIN_HELD = 0.8  # share of the page's lines that the regions must hold for their order to be used
COVERED = 0.7
MIN_BESIDE = 0.3  # share of their joint height two columns must stand side by side  # a region mostly inside a better-scored one is a duplicate


def regions_to_markdown(lines: Sequence[TextLine], regions: Sequence[LayoutRegion], width: int, height: int,
                        keep_furniture: bool = False) -> str:
    lines = [l for l in lines if l.text.strip()]
    if not keep_furniture:
        lines = [l for l in lines if not is_margin_stamp(l, width)]
    if not lines:
        return ""
    groups = assign(lines, dedupe(regions))
    held = sum(len(g) for r, g in groups if r is not None)
    if held < MIN_HELD * len(lines):
        return lines_to_markdown(lines, width, height, keep_furniture)
    h = body_height(lines)
    rows: list[Row] = []
    for n, (path, (region, group)) in enumerate(xy_order(groups, h)):
        kind = region.kind if region is not None else "text"
        if not keep_furniture and region is not None and _is_furniture(region, height):
            continue
        for row in group_rows(group):
            if kind != "table" and len(row.lines) > 1:
                row = Row([TextLine(row.text, row.box, min(l.score for l in row.lines))])
            row.region, row.column = n, path
            rows.append(row)
    return render(build_blocks(rows, h))


def _is_furniture(region: LayoutRegion, height: float) -> bool:
    return (region.kind == "header" and region.box[3] <= 0.15 * height) or \
        (region.kind == "footer" and region.box[1] >= 0.85 * height)


def dedupe(regions: Sequence[LayoutRegion]) -> list[LayoutRegion]:
    """Best first; a region mostly covered by a better one (the same text seen as two classes) goes."""
    kept: list[LayoutRegion] = []
    for r in sorted(regions, key=lambda r: -r.score):
        if all(_inside(r.box, k.box) < COVERED for k in kept):
            kept.append(r)
    return kept


def _inside(a: Box, b: Box) -> float:
    """Share of box a's area inside box b."""
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    return ix * iy / max(1e-6, (a[2] - a[0]) * (a[3] - a[1]))


def assign(lines: Sequence[TextLine], regions: Sequence[LayoutRegion]):
    """[(region, its lines)], then each line no region holds as a group of its own (region None)."""
    groups: dict[int, list[TextLine]] = {}
    loose: list[TextLine] = []
    for line in lines:
        best, share = None, 0.5
        for i, r in enumerate(regions):
            g = line.height / 2  # model boxes hug the ink, detector boxes are padded
            s = _inside(line.box, (r.box[0] - g, r.box[1] - g, r.box[2] + g, r.box[3] + g))
            if s > share or (s == share and best is not None and _area(r.box) < _area(regions[best].box)):
                best, share = i, s
        if best is None:
            loose.append(line)
        else:
            groups.setdefault(best, []).append(line)
    return [(regions[i], g) for i, g in groups.items()] + [(None, [l]) for l in loose]


def _area(b: Box) -> float:
    return (b[2] - b[0]) * (b[3] - b[1])


def xy_order(groups, h: float, path: tuple = ()) -> list:
    """[(column path, group)] in reading order. A node is cut at its vertical gaps first (columns, left
    to right). Without one, groups wider than half the node (a title, a spanning figure) are what
    block the columns: they split the node into sections top to bottom, each read on its own; only
    when there is no such group is it cut at its horizontal gaps. Else top to bottom."""
    if len(groups) <= 1:
        return [(path, g) for g in groups]
    boxes = [_extent(g[1], h) for g in groups]
    cuts = _cuts([(b[0], b[2]) for b in boxes], 0.8 * h)
    if cuts and _side_by_side(boxes, cuts):
        return _split(groups, boxes, cuts, 0, h, path)
    width = max(b[2] for b in boxes) - min(b[0] for b in boxes)
    items = sorted(zip(boxes, groups), key=lambda t: (t[0][1], t[0][0]))
    wide = [b[2] - b[0] > 0.5 * width for b, _ in items]
    if any(wide) and not all(wide):
        sections: list[list] = []
        for (b, g), w in zip(items, wide):
            if w or not sections or sections[-1][-1][2]:
                sections.append([(b, g, w)])
            else:
                sections[-1].append((b, g, w))
        out = []
        for sec in sections:
            out += xy_order([g for _, g, _ in sec], h, path)
        return out
    cuts = _cuts([(b[1], b[3]) for b in boxes], 0.3 * h)
    if cuts:
        return _split(groups, boxes, cuts, 1, h, path)
    return [(path, g) for _, g in items]


def _side_by_side(boxes: list[Box], cuts: list[float]) -> bool:
    """Columns stand beside each other: neighbouring parts share most of their height. A page number
    beside a running head, over a title and the text below, is no column."""
    spans: list[list[float]] = [[] for _ in range(len(cuts) + 1)]
    for b in boxes:
        k = sum(1 for c in cuts if (b[0] + b[2]) / 2 > c)
        spans[k] = [min(spans[k][0], b[1]), max(spans[k][1], b[3])] if spans[k] else [b[1], b[3]]
    for (a0, a1), (b0, b1) in zip(spans, spans[1:]):
        if max(0.0, min(a1, b1) - max(a0, b0)) < MIN_BESIDE * (max(a1, b1) - min(a0, b0)):
            return False
    return True


def _split(groups, boxes, cuts: list[float], axis: int, h: float, path: tuple) -> list:
    parts: list[list] = [[] for _ in range(len(cuts) + 1)]
    for g, b in zip(groups, boxes):
        parts[sum(1 for c in cuts if (b[axis] + b[axis + 2]) / 2 > c)].append(g)
    out = []
    for k, part in enumerate(parts):
        out += xy_order(part, h, path + (k,) if axis == 0 else path)
    return out


def _extent(lines: Sequence[TextLine], h: float) -> Box:
    """The lines' union, pulled in a little: padded boxes of neighbouring lines often touch."""
    x0, y0, x1, y1 = union(l.box for l in lines)
    dx, dy = min(0.25 * h, (x1 - x0) / 4), min(0.25 * h, (y1 - y0) / 4)
    return x0 + dx, y0 + dy, x1 - dx, y1 - dy


def _cuts(spans: list[tuple[float, float]], min_gap: float) -> list[float]:
    """Middles of the empty stretches of at least min_gap between the spans."""
    out, reach = [], None
    for a, b in sorted(spans):
        if reach is not None and a - reach >= min_gap:
            out.append((a + reach) / 2)
        reach = b if reach is None else max(reach, b)
    return out
