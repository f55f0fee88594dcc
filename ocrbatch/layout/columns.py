"""Column separators: white strips down the page that text on either side does not cross.

Two ideas from the literature, combined:
- a column's left edge is a *tab stop*: several lines, one under the other, start at one x (Smith,
  "Hybrid page layout analysis via tab-stop detection", 2009, as tesseract's column finder does);
- what parts two columns is a *whitespace rectangle* that borders text on both sides (Breuel, "Two
  geometric algorithms for layout analysis", 2002).

So a separator is the white strip just left of a tab stop, as far up and down as it stays white and the
tab stop's lines go on, with text bordering it on the left. A table's cells and a list's markers start
at tab stops too, with white strips left of them; those strips are gaps between cells of one row, not
between columns: the pieces left of them are short and pair up row by row with the pieces right of
them. A gap clearly wider than the row's other gaps still parts columns (a reference card's gutter
between its term/description pairs).

Boxes are measured by their ink (`geometry.ink`: a detector box less its padding), since the padded
boxes of two columns touch across a narrow gutter.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass, replace
from statistics import median
from typing import Sequence

from ..records import TextLine
from .evidence import monospaced, rows_apart
from .geometry import core, ink
from .params import PARAMS, LayoutParams

# what an ornament down a gutter is read as: one or two circles, dots, dashes or dingbats, never a word
_ORNAMENT = re.compile(r"[oO0°•·∘◦○●◆◇■□▪▫*+\-–—|.:,;'\"]{1,2}")


@dataclass(frozen=True)
class Separator:
    """A white strip from x0 to x1, y0 to y1, parting the columns either side of it; the boxes either
    side may reach into it, or a little past it (`slack`: padded boxes over a narrow gutter)."""

    x0: float
    x1: float
    y0: float
    y1: float
    slack: float = 0.0
    why: str = ""
    sections: bool = False  # cut where both its columns end a section: blocks end with it

    def between(self, left: tuple, right: tuple) -> bool:
        """Whether the strip parts box `left` from box `right` (x0, y0, x1, y1): the left one starts
        before the strip and does not run past it, the right one starts inside or after it, and the
        strip runs beside both."""
        start = min(self.x0, self.x1)
        return left[0] < start <= right[0] + self.slack and left[2] <= self.x1 + self.slack \
            and _reach(self, left) and _reach(self, right)


def beside(sep: Separator, box: tuple, reach: float) -> bool:
    """Whether `box` borders the strip of `sep` on either side (within `reach`) at its height."""
    return _reach(sep, box) and sep.x0 - reach <= box[2] <= sep.x1 + sep.slack + 1 \
        or _reach(sep, box) and sep.x0 - sep.slack - 1 <= box[0] <= sep.x1 + reach


def _reach(sep: Separator, box: tuple) -> bool:
    c0, c1 = box[1] + (box[3] - box[1]) / 4, box[3] - (box[3] - box[1]) / 4
    return c0 < sep.y1 and c1 > sep.y0


def find_separators(lines: Sequence[TextLine], h: float, p: LayoutParams,
                    verdicts: list[str] | None = None) -> list[Separator]:
    """The column separators among `lines` (`h`: the body line height). `verdicts`, when given,
    receives a line for each white strip weighed: flow (a separator) or cells, and why."""
    inks = [ink(l) for l in lines]
    mono = monospaced(lines, h, p)
    if verdicts is not None and mono:
        verdicts.append("type monospaced (equal glyph advances), records unless rows run apart")
    found: list[Separator] = []
    for x, members in tab_stops(inks, h, p):
        for sep, left, right in _strips(x, members, inks, h, p):
            why = flows_apart(left, right, inks, h, p, mono)
            if verdicts is not None and not any(_same(sep, f, h) for f in found):
                verdicts.append(f"strip x {sep.x0:.0f}-{sep.x1:.0f} y {sep.y0:.0f}-{sep.y1:.0f}: "
                                + (f"flow, {why}" if why else f"cells, {_cells_why(left, right, inks, h, p, mono)}"))
            if why and not any(_same(sep, f, h) for f in found):
                found += _sections(replace(sep, why=f"{sep.why}: {why}"), left, right, inks, h, p)
    return found


def extend_separators(lines: Sequence[TextLine], seps: list[Separator], h: float,
                      p: LayoutParams) -> list[Separator]:
    """Each tab stop's separator run on up and down its white strip past the lines that made it
    (Breuel's whitespace rectangles are maximal), while nothing runs across the strip and no other
    separator's strip (a grid's tier, the next section's separator) lies in the way, where text borders
    the new stretch on both sides, side by side (a table atop one column beside a figure's labels atop
    the other). A stretch with text on one side only (a date line over one column) is not taken."""
    inks = [ink(l) for l in lines]
    out = list(seps)
    for k, sep in enumerate(out):
        if not sep.why.startswith("grid"):
            for step in (-1, 1):
                out[k] = sep = _extend(sep, step, inks, [s for s in out if s is not out[k]], h, p)
    return out


def _extend(sep: Separator, step: int, inks: Sequence[TextLine], others: Sequence[Separator], h: float,
            p: LayoutParams) -> Separator:
    """`sep` run on up (step -1) or down (1), see `extend_separators`. What runs across the strip stops
    it: a piece, another separator's strip, or a row whose gap at the strip is no wider than its gaps
    next to it (a table set across the columns: its cells are as far apart on both sides)."""
    edge = sep.y0 if step < 0 else sep.y1

    def past(y: float) -> bool:  # beyond the separator's end, on this side
        return step * (y - edge) > 0

    beyond = [l for l in inks if past(core(l)[0]) and past(core(l)[1])]
    left = [l for l in beyond if l.box[2] <= sep.x1 + sep.slack and l.box[0] < sep.x0]
    right = [l for l in beyond if l.box[0] >= sep.x1 - sep.slack]
    walls = [l for l in beyond if l.box[0] < sep.x1 - p.tab_clearance * h and l.box[2] > sep.x1 + sep.slack
             and not (_prose([l], h, p) and l.box[0] >= sep.x0)]
    for b in right:  # (each row's pieces next to the strip)
        row = [a for a in left if _level(a, b, p)]
        a = max(row, key=lambda l: l.box[2], default=None)
        if a is not None and min((k for k in right if _level(k, a, p)), key=lambda l: l.box[0]) is b \
                and _reads_across(a, b, beyond, p):
            walls.append(a)
    ends = [(l.box[3] if step < 0 else l.box[1]) for l in walls]
    ends += [o.y1 if step < 0 else o.y0 for o in others if o.x0 < sep.x1 and sep.x0 < o.x1 and past(o.y0) and past(o.y1)]
    wall = (max if step < 0 else min)(ends, default=step * float("inf"))

    def inside(l: TextLine) -> bool:
        return step * (wall - (l.box[1] + l.box[3]) / 2) > 0

    left, right = [l for l in left if inside(l)], [l for l in right if inside(l)]
    if not any(min(a.box[3], b.box[3]) - max(a.box[1], b.box[1]) > p.row_touch * min(a.height, b.height)
               for a in left for b in right):
        return sep
    reach = [l.box[1] if step < 0 else l.box[3] for l in left + right]
    return replace(sep, y0=min(reach)) if step < 0 else replace(sep, y1=max(reach))


def _reads_across(a: TextLine, b: TextLine, inks: Sequence[TextLine], p: LayoutParams) -> bool:
    """Whether pieces `a` and `b`, side by side on a row, are cells of one row read across: the gap
    between them no wider than `across_ratio` times the gap before `a` or after `b` on their row."""
    row = [k for k in inks if _level(k, a, p)]
    before = [a.box[0] - k.box[2] for k in row if k.box[2] <= a.box[0]]
    after = [k.box[0] - b.box[2] for k in row if k.box[0] >= b.box[2]]
    near = [min(g) for g in (before, after) if g]
    return bool(near) and b.box[0] - a.box[2] <= p.across_ratio * max(near)


def cut_merged(lines: Sequence[TextLine], seps: list[Separator], h: float,
               p: LayoutParams) -> tuple[list[TextLine], list[Separator]]:
    """Lines the detector ran across a separator's gutter right where the separator stops (the first
    or last rows of two columns boxed as one), cut back at the gutter, the separator run on past
    them. Such a line starts at the left column's edge and ends at the right column's, where a
    paragraph set across the columns under or over them ends on a short line (`lines._paragraph_across`)."""
    from .lines import _cut_text, _paragraph_across

    lines = list(lines)
    for k, sep in enumerate(seps):
        if sep.why.startswith("grid") or sep.x1 - sep.x0 > p.merged_gutter * h:
            continue  # (the detector runs lines together across a narrow gutter only)
        beside = [l for l in lines if _reach(sep, l.box)]
        lefts = [l.box[0] for l in beside if l.box[2] <= sep.x1 + sep.slack and l.box[2] >= sep.x0 - p.hug * h]
        rights = [l.box[2] for l in beside if abs(l.box[0] - sep.x1) <= p.hug * h]
        if len(lefts) < p.tab_min_lines or len(rights) < p.tab_min_lines:
            continue
        x0, x1 = min(lefts), max(rights)
        for step in (-1, 1):
            while True:
                edge = sep.y0 if step < 0 else sep.y1
                near = [l for l in lines if abs(l.box[0] - x0) <= h and l.box[2] >= x1 - 2 * h and l.box[2] <= x1 + 2 * h
                        and 0 <= step * ((l.box[1] + l.box[3]) / 2 - edge) <= p.merged_reach * h
                        and len(l.text.split()) >= p.merged_words and l.height <= p.title_type * h]
                if not near or _paragraph_across(near[0], lines, h, sep.x0, p) or _runs_on(near[0], lines, step, sep, h, p):
                    break
                line = near[0]
                head, tail = _cut_text(line, sep.x0, sep.x1)
                if len(head.split()) < 2 or len(tail.split()) < 2:
                    break
                lines[lines.index(line):lines.index(line) + 1] = [
                    TextLine(head, (line.box[0], line.box[1], sep.x0, line.box[3]), line.score),
                    TextLine(tail, (sep.x1, line.box[1], line.box[2], line.box[3]), line.score)]
                sep = seps[k] = replace(sep, y0=min(sep.y0, line.box[1]), y1=max(sep.y1, line.box[3]))
    return lines, seps


def _runs_on(line: TextLine, lines: Sequence[TextLine], step: int, sep: Separator, h: float,
             p: LayoutParams) -> bool:
    """Whether the lines of `line`'s extent, one after the next away from the separator, end on a
    line that starts where they do and runs on past the gutter, short of their end: lines of one
    paragraph set across the columns, its last (first) line shorter."""
    x0, x1 = line.box[0], line.box[2]
    cur = line
    while True:
        cy = (cur.box[1] + cur.box[3]) / 2
        nxt = [l for l in lines if l is not cur and 0 < step * ((l.box[1] + l.box[3]) / 2 - cy) <= p.next_row * h
               and abs(l.box[0] - x0) <= 2 * h]
        if not nxt:
            return False
        cur = min(nxt, key=lambda l: abs((l.box[1] + l.box[3]) / 2 - cy))
        if abs(cur.box[2] - x1) > 2 * h:
            return sep.x1 + h < cur.box[2] < x1 - 2 * h


def drop_ornaments(lines: Sequence[TextLine], seps: Sequence[Separator], h: float,
                   p: LayoutParams) -> list[TextLine]:
    """`lines` less the ornaments down a gutter: a rule of dots or circles, a dingbat between the
    columns, read as "o", "0" or "•" (one or two such characters inside a separator's strip; a short
    word there, "to" or "or", is text and stays)."""
    def ornament(l: TextLine) -> bool:
        return bool(_ORNAMENT.fullmatch(l.text.strip())) and any(
            l.box[0] >= s.x0 - p.seam_overlap * h and l.box[2] <= s.x1 + p.seam_overlap * h and _reach(s, l.box)
            for s in seps)
    return [l for l in lines if not ornament(l)]


def _sections(sep: Separator, left: list[TextLine], right: list[TextLine], inks: Sequence[TextLine], h: float,
              p: LayoutParams) -> list[Separator]:
    """`sep` cut where both its columns break off level with each other and a title stands in the
    break on one side (balanced two-column sections, each under its own title in one column): the
    columns above are read before the title, and the title before the columns below. Breaks level
    on both sides with nothing in them are paragraph breaks, and the columns run on past them."""
    out = [sep]
    rcol = [l for l in inks if min(sep.x0, sep.x1 - sep.slack) < l.box[0] <= sep.x1 + p.hug * h]  # (indented lines,
    # lines whose boxes start inside the gutter too)
    # the left column: from where the rows that border the strip start (a card's term, a line's start)
    start = min(min(k.box[0] for k in inks if k.box[2] <= l.box[2] and _same_row(k, l, p)) for l in left)
    lcol = [l for l in inks if start - p.hug * h <= l.box[0] < sep.x0 and l.box[2] <= sep.x1 + sep.slack]
    lo = min(core(l)[0] for l in lcol + rcol) - 2 * p.title_apart * h
    hi = max(core(l)[1] for l in lcol + rcol) + 2 * p.title_apart * h
    span = [k for k in inks if lo <= core(k)[0] <= hi]  # (the lines near the columns)
    titles = [t for t in lcol + rcol if _apart(t, span, h, p)]
    for a, b in _breaks([l for l in lcol if l not in titles], h, p):
        for c, d in _breaks([l for l in rcol if l not in titles], h, p):
            if abs(a - c) > p.section_level * h or abs(b - d) > p.section_level * h:
                continue
            top, bottom = max(a, c), min(b, d)
            last = out[-1]
            inside = [t for t in titles if top < core(t)[0] and core(t)[1] < bottom]
            one_side = all(t in lcol for t in inside) or all(t in rcol for t in inside)  # (headings across: no)
            if inside and one_side and last.y0 < top and bottom < last.y1:
                out[-1:] = [replace(last, y1=top, sections=True), replace(last, y0=bottom, sections=True)]
    return out


def _apart(t: TextLine, inks: Sequence[TextLine], h: float, p: LayoutParams) -> bool:
    """A title stands apart from the lines above and below it (not one line of a listing)."""
    return not any(k is not t and _x_overlap(k, t) > 0 and (-p.title_apart * h < core(k)[0] - core(t)[1] < p.title_apart * h
                                                            or -p.title_apart * h < core(t)[0] - core(k)[1] < p.title_apart * h)
                   for k in inks)


def _x_overlap(a: TextLine, b: TextLine) -> float:
    return min(a.box[2], b.box[2]) - max(a.box[0], b.box[0])


def _breaks(pieces: list[TextLine], h: float, p: LayoutParams) -> list[tuple[float, float]]:
    """White stretches down one side of a separator, at least `section_break` tall: (top, bottom)."""
    spans = sorted(core(l) for l in pieces)
    out, reach = [], None
    for c0, c1 in spans:
        if reach is not None and c0 - reach >= p.section_break * h:
            out.append((reach, c0))
        reach = c1 if reach is None else max(reach, c1)
    return out


def tab_stops(inks: Sequence[TextLine], h: float, p: LayoutParams) -> list[tuple[float, list[TextLine]]]:
    """(x, pieces starting there) for each x where at least `tab_min_lines` pieces start within
    `tab_tolerance` of each other; x is the leftmost start of its lines of prose (of any of its pieces if
    it has none), and a short piece starting more than `tab_lead` before that is none of its pieces (a
    piece of an equation set across the columns does not move a column's edge)."""
    ordered = sorted((l for l in inks if not _ORNAMENT.fullmatch(l.text.strip())), key=lambda l: l.box[0])
    out: list[tuple[float, list[TextLine]]] = []
    i = 0
    while i < len(ordered):
        x = ordered[i].box[0]
        j = i
        while j < len(ordered) and ordered[j].box[0] - x <= p.tab_tolerance * h:
            j += 1
        if j - i >= p.tab_min_lines - 1:  # (a short column of two lines counts, see `_strips`)
            x = min((l.box[0] for l in ordered[i:j] if _prose([l], h, p)), default=x)
            out.append((x, [l for l in ordered[i:j] if l.box[0] >= x - p.tab_lead * h]))
        i = j
    return out


def _strips(x: float, members: list[TextLine], inks: Sequence[TextLine], h: float, p: LayoutParams,
            slack: float | None = None):
    """(separator, pieces bordering it on the left, tab-stop pieces on the right) for each stretch
    down the page where nothing runs across the tab stop at `x` (from left of it to past it by more
    than `slack`: over a narrow gutter a left column's line may end a little past it; over a wide one
    no line may) and enough of its lines start."""
    slack = p.seam_overlap * h if slack is None else slack
    blocked = _white_bands(_crossing(x, members, inks, h, p, slack), x, members, inks, h, p)
    runs, top = [], float("-inf")
    for c0, c1 in blocked + [(float("inf"), float("inf"))]:
        if c0 > top:
            runs.append((top, c0))
        top = max(top, c1)
    for r0, r1 in runs:
        right = [m for m in members if r0 <= core(m)[0] and core(m)[1] <= r1]
        if len(right) < p.tab_min_lines - 1:
            continue
        reach = _reach_left(right, inks, h, p)
        left = [l for l in inks if x - reach <= l.box[2] <= x + slack and l.box[0] < x - p.tab_clearance * h
                and not _ORNAMENT.fullmatch(l.text.strip()) and r0 <= core(l)[0] and core(l)[1] <= r1]
        if len(right) < p.tab_min_lines:  # a short column: the white strip runs on down a column beside it
            y0, y1 = min(m.box[1] for m in right), max(l.box[3] for l in right + left)
            left = [l for l in left if l.box[3] > y0]
            if len(left) < p.tab_min_lines or not (_prose(left, h, p) and _prose(right, h, p)):
                continue
        else:
            y0, y1 = min(m.box[1] for m in right), max(m.box[3] for m in right)
            left = [l for l in left if l.box[3] > y0 and l.box[1] < y1]
        if len(left) < p.gutter_min_left:
            continue
        edges = sorted(l.box[2] for l in left)
        if slack and x - edges[len(edges) // 2] > 2 * slack:  # a wide gutter: nothing may cross the stop
            yield from _strips(x, right, [l for l in inks if r0 <= core(l)[0] and core(l)[1] <= r1], h, p, 0.0)
            continue
        # the strip is white from r0 to r1: the separator runs on up and down beside the lines that
        # hug it within that stretch (a column's lines that end at the gutter, from the column's edge;
        # indented lines that start just after it), not past the columns' ends nor through a table
        # set across the left column (rows whose first piece starts inside it)
        edge = sorted(l.box[0] for l in left)[len(left) // 2] + p.hug * h
        stretch = [l for l in inks if r0 <= core(l)[0] and core(l)[1] <= r1]
        starts = [l for l in stretch if l.box[0] < x - p.tab_clearance * h]

        def across(l: TextLine) -> bool:
            row = [k.box[0] for k in starts if _same_row(l, k, p)]
            return bool(row) and min(row) > edge

        hug = [l for l in stretch if not across(l) and (
            l.box[0] <= edge and edges[len(edges) // 2] - p.hug * h <= l.box[2] <= x + slack
            or x - slack <= l.box[0] <= x + p.hug * h)]
        y0, y1 = min([y0] + [l.box[1] for l in hug]), max([y1] + [l.box[3] for l in hug])
        if x - edges[min(len(edges) - 1, int(p.edge_quantile * len(edges)))] < p.gutter_min * h and not _seam(left, right, x, h, p):
            continue
        yield Separator(edges[len(edges) // 2], x, y0, y1, slack, f"tab stop at x={x:.0f}, {len(right)} lines"), left, right


def _crossing(x: float, members: list[TextLine], inks: Sequence[TextLine], h: float, p: LayoutParams,
              slack: float) -> list[tuple[float, float]]:
    """The spans (middle halves) of the pieces that run across the tab stop at `x`: starting left of it
    (by more than `tab_clearance`) and ending past it (by more than `slack`). A line of prose that
    starts inside the gutter, right of where the lines beside the stop's lines end, does not: it is a
    line of the column whose box took in a mark before it (a dot of a rule down the gutter)."""
    spans, inner, own = [], None, {id(m) for m in members}
    for l in inks:
        if id(l) in own or not (l.box[0] < x - p.tab_clearance * h and l.box[2] > x + slack):
            continue
        if _prose([l], h, p) and l.box[0] > x - p.gutter_reach_max * h:
            if inner is None:
                inner = _inner_edge(x, members, inks, h, p)
            if l.box[0] >= inner:
                continue
        spans.append(core(l))
    return sorted(spans)


def _inner_edge(x: float, members: list[TextLine], inks: Sequence[TextLine], h: float, p: LayoutParams) -> float:
    """Where the lines beside a tab stop's lines end, left of it: the median end of the pieces ending
    within `gutter_reach_max` left of the stop level with one of its lines (the stop itself if none)."""
    mids = sorted((m.box[1] + m.box[3]) / 2 for m in members)
    ends = []
    for k in inks:
        if not x - p.gutter_reach_max * h <= k.box[2] <= x:
            continue
        c = (k.box[1] + k.box[3]) / 2
        i = bisect_left(mids, c - p.row_centre * h)
        if i < len(mids) and mids[i] <= c + p.row_centre * h:
            ends.append(k.box[2])
    return float(median(ends)) if ends else x


def _white_bands(blocked: list[tuple[float, float]], x: float, members: list[TextLine], inks: Sequence[TextLine],
                 h: float, p: LayoutParams) -> list[tuple[float, float]]:
    """`blocked` and the white bands (`blank_band` tall) between a tab stop's lines with nothing left of
    the stop in them, and nothing left of it on one side of them: the stop's lines above and below such
    a band are weighed apart (a form's values, and a note in prose far below set at the same edge; not
    two sections of a card, its columns going on under the band on both sides)."""
    ys = sorted((m.box[1], m.box[3]) for m in members)
    lefts = [(l.box[1] + l.box[3]) / 2 for l in inks if l.box[0] < x]
    bands, bottom = [], None
    for y0, y1 in ys:
        if bottom is not None and y0 - bottom > p.blank_band * h and not any(bottom < c < y0 for c in lefts) \
                and not (any(c < bottom for c in lefts) and any(c > y0 for c in lefts)):
            bands.append((bottom, y0))
        bottom = y1 if bottom is None else max(bottom, y1)
    return sorted(blocked + bands)


def _reach_left(right: list[TextLine], inks: Sequence[TextLine], h: float, p: LayoutParams) -> float:
    """How far left of a tab stop a piece may end and still border its strip: `gutter_reach`, or more
    where the gap left of the stop's lines is wider (a wide gutter), up to `gutter_reach_max`."""
    gaps_ = []
    for r in right:
        ends = [l.box[2] for l in inks if l.box[2] <= r.box[0] and _same_row(l, r, p)]
        if ends:
            gaps_.append(r.box[0] - max(ends))
    wide = p.gap_reach * median(gaps_) if gaps_ else 0.0
    return min(p.gutter_reach_max * h, max(p.gutter_reach * h, wide))


def _prose(pieces: list[TextLine], h: float, p: LayoutParams) -> bool:
    """Lines of running text: most several words long and wide."""
    return sum(1 for l in pieces if len(l.text.split()) >= p.prose_words and l.box[2] - l.box[0] >= p.prose_width * h) \
        >= p.prose_share * len(pieces)


def _seam(left: list[TextLine], right: list[TextLine], x: float, h: float, p: LayoutParams) -> bool:
    """Two columns whose padded boxes touch or overlap across a gutter too narrow to show white: rows
    in a row where a piece ends at the tab stop and the next starts there, both wide."""
    meets = [l.box[0] for l in left for r in right if _same_row(l, r, p) and abs(l.box[2] - x) <= p.seam_overlap * h
             and min(l.box[2] - l.box[0], r.box[2] - r.box[0]) >= p.prose_width * h]
    # (the left column's lines start at one edge too)
    return any(sum(1 for m in meets if abs(m - start) <= p.tab_tolerance * h) >= p.tab_min_lines for start in meets)


def _same_row(a: TextLine, b: TextLine, p: LayoutParams) -> bool:
    ab, bb = a.box, b.box
    ha, hb = ab[3] - ab[1], bb[3] - bb[1]
    if abs(ab[1] + ab[3] - bb[1] - bb[3]) > 2 * p.row_centre * max(ha, hb):
        return False  # (middles too far apart: the usual answer, told first)
    # (words of one row are set in one size; figures and capitals lack the descenders of words, and a
    # bullet is smaller still)
    marker = min(len(a.text.strip()), len(b.text.strip())) <= p.marker_chars
    return max(ha, hb) <= (p.marker_size_ratio if marker else p.row_size_ratio) * min(ha, hb)


def flows_apart(left: list[TextLine], right: list[TextLine], inks: Sequence[TextLine], h: float,
                p: LayoutParams, mono: bool = False) -> str:
    """Why the strip between `left` (the pieces bordering it on the left) and `right` (its tab stop's
    pieces) parts two flows of text, or "" when it is a gap between the cells of rows.

    A gutter needs evidence that the lines on its two sides belong to different flows (tesseract's
    column partitions must agree over a run of rows; Breuel's gutter has text on both sides):
    - their rows do not align one to one: pieces beside each other but off each other's rows (lines
      at another leading, or half a line lower);
    - or a card's gutter: a gap much wider than the other gaps of its rows (term, description | term,
      description);
    - or running prose on both sides (two columns set on one baseline grid).
    Rows that pair one to one with no prose on both sides are a table's, a form's, a receipt's
    (label ... value): cells, never columns. So are a column of amounts beside its items and a list's
    markers beside its lines."""
    if sum(1 for r in right if not _wordy(r.text, p)) >= p.cell_numeric * len(right):
        return ""  # a column of amounts, figures, quantities or codes: a table's or a receipt's
    if median(len(l.text.strip()) for l in left) <= p.marker_chars:
        return ""  # a list's bullets, a line's number: markers, never a column of text
    if sum(1 for l in left if l.text.rstrip().endswith(":")) >= p.form_labels * len(left):
        return ""  # a form's labels: their values beside them, typed in off their rows as they may be
    x = min(r.box[0] for r in right)
    y0, y1 = min(l.box[1] for l in left + right), max(l.box[3] for l in left + right)
    beside = [k for k in inks if x - p.seam_overlap * h <= k.box[0] <= x + p.hug * h  # (indented lines too)
              and y0 <= (k.box[1] + k.box[3]) / 2 <= y1]
    apart = rows_apart(left, beside, p)
    if apart:
        return apart
    if _prose_side(left, p) and _prose_side(beside, p):
        return "prose on both sides"
    if sum(1 for r in right if r.text.rstrip().endswith(":")) >= p.form_labels * len(right):
        return ""  # a form's second column of labels ("TOWN:"), each after a pair on its row
    if mono:
        return ""  # fixed-width type, rows level across the strip: a log's or a listing's fields
    pairs = [(l, r) for l in left for r in right if _same_row(l, r, p)]
    if _widest(pairs, inks, p) >= p.gutter_ratio:
        return "a gap wider than its rows' others"
    return ""


def _cells_why(left: list[TextLine], right: list[TextLine], inks: Sequence[TextLine], h: float, p: LayoutParams,
               mono: bool) -> str:
    """Why `flows_apart` took a strip for a gap between cells (for `--debug-layout`)."""
    if sum(1 for r in right if not _wordy(r.text, p)) >= len(right) * p.cell_numeric:
        return "figures or codes right of it"
    if median(len(l.text.strip()) for l in left) <= p.marker_chars:
        return "markers left of it"
    if sum(1 for l in left if l.text.rstrip().endswith(":")) >= len(left) * p.form_labels:
        return "a form's labels left of it"
    if sum(1 for r in right if r.text.rstrip().endswith(":")) >= len(right) * p.form_labels:
        return "a form's labels right of it"
    if mono:
        return "monospaced rows level across it"
    return "rows level across it, short pieces (no prose on both sides)"


def _level(a: TextLine, b: TextLine, p: LayoutParams) -> bool:
    """Pieces on one row, whatever their sizes: their middles agree (a heading in a table's cell)."""
    return abs((a.box[1] + a.box[3]) / 2 - (b.box[1] + b.box[3]) / 2) <= p.row_centre * max(a.height, b.height)


def _prose_side(pieces: list[TextLine], p: LayoutParams) -> bool:
    """Lines of running text: nearly all wide (in their own line height), or most of several words."""
    widths = sorted((l.box[2] - l.box[0]) / max(1.0, l.height) for l in pieces)
    return widths[int(p.edge_quantile * (len(widths) - 1))] >= p.flow_width \
        or median(len(l.text.split()) for l in pieces) >= p.flow_words


def _widest(pairs: list[tuple[TextLine, TextLine]], inks: Sequence[TextLine], p: LayoutParams) -> float:
    """How many times wider the gap between the paired pieces is than the other gaps on their rows,
    over rows of pairs side by side, a card's (a term, its description | the next term, its
    description: the piece left of the gap has one before it, the piece right of it one after);
    the median, or 0 if no row is such. Amounts and codes, as on a receipt, are set at gaps of any
    width, and a table's first column has nothing before it."""
    ratios = []
    for l, r in pairs:
        if not (_wordy(l.text, p) and _wordy(r.text, p)):
            continue
        row = sorted((k for k in inks if _same_row(k, l, p)), key=lambda k: k.box[0])
        before = [a.box[2] for a in row if a.box[2] <= l.box[0]]
        after = [b.box[0] for b in row if b.box[0] >= r.box[2]]
        if before and after:
            ratios.append((r.box[0] - l.box[2]) / max(l.box[0] - max(before), min(after) - r.box[2], 1.0))
    return median(ratios) if ratios else 0.0


def _wordy(text: str, p: LayoutParams = PARAMS) -> bool:
    """Mostly letters, with a word of three or more: not an amount, a figure, a date, a tax code."""
    return any(sum(1 for c in w if c.isalpha()) >= p.word_letters for w in text.split()) and \
        sum(1 for c in text if c.isalpha()) >= p.wordy_share * sum(1 for c in text if not c.isspace())


def _same(a: Separator, b: Separator, h: float) -> bool:
    return abs(a.x1 - b.x1) <= h and a.y0 < b.y1 and b.y0 < a.y1
