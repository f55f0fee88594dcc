"""Reading order from a layout model's regions (layout/regions.py): the trial of issue 11, not used
by the engine (scripts/layout_model_trial.py measures it).

Each recognised line goes to the model region that holds most of it. Regions are then ordered over
their extent (see `xy_order`): columns left to right, sections top to bottom at lone headings and at
what crosses the gutter. Inside a region our own order (layout/order.py) reads the lines, so a region
drawn round several columns stays readable. Only a region the model calls a table may become a
Markdown table: every other region's rows are read as single lines. Headers and footers in the page
margins are furniture. A page where the regions hold too few of the lines (a receipt, a form the
model was not trained on), or whose type the model sees too small (a broadsheet squeezed into
608x800 pixels), keeps our own order.
"""

from __future__ import annotations

from typing import Sequence

from ocrbatch.records import TextLine
from ocrbatch.layout.furniture import is_margin_stamp
from ocrbatch.layout.geometry import Box, Row, body_height, union
from ocrbatch.layout.markdown import lines_to_markdown, render
from ocrbatch.layout.page import layout_page
from ocrbatch.layout.paragraphs import build_blocks
from ocrbatch.layout.params import PARAMS
from .regions import INPUT_H, INPUT_W, LayoutRegion

MIN_HELD = 0.8  # share of the page's lines that the regions must hold for their order to be used
MIN_SEEN = 8.0  # body line height (pixels) in the model's 608x800 view below which its regions are guesses
COVERED = 0.7  # a region mostly inside a better-scored one is a duplicate
GUTTER = 0.5  # narrowest gap between columns, in body line heights (detector boxes are padded)
MIN_BESIDE = 0.3  # share of their joint height two columns must stand side by side
ALONE_INDENT = 2.0  # a heading that breaks a section starts within this many line heights of the left edge


def regions_to_markdown(lines: Sequence[TextLine], regions: Sequence[LayoutRegion], width: int, height: int,
                        keep_furniture: bool = False) -> str:
    """Markdown for one page, as layout.lines_to_markdown, with the model's regions as a second opinion."""
    lines = [l for l in lines if l.text.strip()]
    if not keep_furniture:
        lines = [l for l in lines if not is_margin_stamp(l, width, PARAMS)]
    if not lines:
        return ""
    groups = assign(lines, dedupe(regions))
    held = sum(len(g) for r, g in groups if r is not None)
    h = body_height(lines)
    if held < MIN_HELD * len(lines) or h * min(INPUT_H / height, INPUT_W / width) < MIN_SEEN:
        return lines_to_markdown(lines, width, height, keep_furniture)
    head = [g for g in groups if g[0] is not None and _is_furniture(g[0], height) and g[0].kind == "header"]
    foot = [g for g in groups if g[0] is not None and _is_furniture(g[0], height) and g[0].kind == "footer"]
    body = [g for g in groups if g[0] is None or not _is_furniture(g[0], height)]
    ordered = [(("head",), g) for g in head] + xy_order(body, h) + [(("foot",), g) for g in foot]
    rows: list[Row] = []
    for n, (path, (region, group)) in enumerate(ordered):
        if not keep_furniture and path in (("head",), ("foot",)):
            continue
        kind = region.kind if region is not None else "text"
        # inside a region our own order (a region the model drew round several columns stays readable)
        for sub in layout_page(group, width, height, keep_furniture=True).blocks:
            for row in sub.rows:
                if kind != "table" and len(row.lines) > 1:
                    row = Row([TextLine(row.text, row.box, min(l.score for l in row.lines))])
                row.region, row.column = n, path + sub.column
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
    """[(column path, group)] in reading order.

    A node is split, in this order of preference: into sections at titles that stand alone across
    the node (nothing beside them: a section of a multi-column page starts there); into columns at
    its vertical gaps (left to right); into sections at the groups that cross its best gutter (a
    title block, a spanning figure), each read on its own; into bands at its horizontal gaps. A node
    with none of these is read top to bottom."""
    if len(groups) <= 1:
        return [(path, g) for g in groups]
    boxes = [_extent(g, h) for g in groups]
    items = sorted(zip(boxes, groups), key=lambda t: (t[0][1], t[0][0]))
    alone = [_section_break(b, g, boxes, h) for b, g in items]
    if any(alone) and len(items) > 2:
        return _sections(items, alone, h, path)
    cuts = _cuts([(b[0], b[2]) for b in boxes], GUTTER * h)
    if cuts and _side_by_side(boxes, cuts):
        return _split(groups, boxes, cuts, 0, h, path)
    crossing = _gutter_crossers(items, h)
    if crossing is not None:
        return _sections(items, crossing, h, path)
    cuts = _cuts([(b[1], b[3]) for b in boxes], 0.3 * h)
    if cuts:
        return _split(groups, boxes, cuts, 1, h, path)
    return [(path, g) for _, g in items]


def _section_break(box: Box, group, boxes: list[Box], h: float) -> bool:
    """A heading that starts a section of a multi-column page: a title (or a lone line) at the
    node's left edge with nothing beside it, and columns both above and below it (text right of
    the middle on both sides, so the end of a longer left column is no section break)."""
    region, lines = group
    kind = region.kind if region is not None else "text"
    if not (kind == "title" or kind == "text" and len(lines) == 1):
        return False  # a caption, an equation, a paragraph
    left, right = min(b[0] for b in boxes), max(b[2] for b in boxes)
    if box[0] - left > ALONE_INDENT * h:
        return False
    mid = (left + right) / 2
    above = below = False
    for o in boxes:
        if o is box:
            continue
        if min(o[3], box[3]) > max(o[1], box[1]):
            return False  # something beside it
        if o[0] > mid:
            above, below = above or o[3] <= box[1], below or o[1] >= box[3]
    return above and below


def _sections(items, splitters: list[bool], h: float, path: tuple) -> list:
    """Top to bottom: each splitter a section of its own, the groups between them a section."""
    sections: list[list] = []
    prev_split = True
    for (_, g), split in zip(items, splitters):
        if split or prev_split:
            sections.append([g])
        else:
            sections[-1].append(g)
        prev_split = split
    out = []
    for sec in sections:
        out += xy_order(sec, h, path)
    return out


def _gutter_crossers(items, h: float) -> list[bool] | None:
    """Which groups cross the node's best gutter: the x-strip at least GUTTER wide that the fewest
    lines cross, with columns of two groups or more standing side by side left and right of it.
    None when there is no such strip."""
    boxes = [b for b, _ in items]
    xs = sorted({v for b in boxes for v in (b[0], b[2])})
    best = None
    for a, b in zip(xs, xs[1:]):
        if b - a < GUTTER * h:
            continue
        mid = (a + b) / 2
        cross = [bx[0] < mid < bx[2] for bx in boxes]
        rest = [bx for bx, c in zip(boxes, cross) if not c]
        if sum(1 for bx in rest if bx[2] <= a) < 2 or sum(1 for bx in rest if bx[0] >= b) < 2:
            continue  # a column on each side, of two groups at least
        n = sum(len(g[1]) for (_, g), c in zip(items, cross) if c)  # lines, not groups: columns hold many
        if n == 0:  # a clean gap the columns test turned down
            continue
        if (best is None or n < best[0]) and _side_by_side(rest, [mid]):
            best = (n, cross)
    return None if best is None else best[1]


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


def _extent(group, h: float) -> Box:
    """Where a group's text lies: the lines' union pulled in a little (padded boxes of neighbouring
    lines often touch), and clipped to the model's box, which hugs the ink."""
    region, lines = group
    x0, y0, x1, y1 = union(l.box for l in lines)
    dx, dy = min(0.25 * h, (x1 - x0) / 4), min(0.25 * h, (y1 - y0) / 4)
    x0, y0, x1, y1 = x0 + dx, y0 + dy, x1 - dx, y1 - dy
    if region is not None:
        r = region.box
        if min(x1, r[2]) > max(x0, r[0]) and min(y1, r[3]) > max(y0, r[1]):
            x0, y0, x1, y1 = max(x0, r[0]), max(y0, r[1]), min(x1, r[2]), min(y1, r[3])
    return x0, y0, x1, y1


def _cuts(spans: list[tuple[float, float]], min_gap: float) -> list[float]:
    """Middles of the empty stretches of at least min_gap between the spans."""
    out, reach = [], None
    for a, b in sorted(spans):
        if reach is not None and a - reach >= min_gap:
            out.append((a + reach) / 2)
        reach = b if reach is None else max(reach, b)
    return out
