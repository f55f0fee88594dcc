"""Reading order: a recursive XY-cut over the line boxes.

At each node we look for a gutter: a vertical strip that few lines cross, with a text column on each
side (wide, mostly filled lines, not the narrow cells of a table or the amounts of a receipt). Lines
that cross the gutter (a title, a wide equation, a full-width figure caption) split the node into
horizontal sections: each run of bands free of crossing lines is read left column then right column,
each crossing band in its place. A node without a gutter is cut into horizontal bands at its empty
horizontal strips. Running heads and page numbers, isolated at the very top or bottom of the page,
come first and last. Where several pages are set on one image (blocks of prose the cut reads apart
at a wide white band or gutter), each page's own head and foot, if plainly furniture, are tagged in
their place the same way (see `_page_furniture`).

The result is a list of regions in reading order, each tagged with its column (the path of gutter
splits that led to it), so later steps know when text moves on to another column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from ..records import TextLine
from .geometry import body_height, core, ink as _ink
from .spaced import join_spaced

Column = tuple[int, ...]
BLANK_BAND = 3.0  # a white band across a node this many body heights tall separates what is above and below
BLOCK_GUTTER = 3.0  # a clean vertical white band this many body heights wide parts two blocks of prose
FURNITURE = {("head",), ("foot",)}  # the columns of running heads and feet
# a page number at either end of a line ("7", "Page 7", "2 / 86"), a year, a copyright or download stamp
_FOLIO = re.compile(r"^\W*(?:page\s+)?\d{1,4}(?:\s*/\s*\d{1,4})?\b|\b\d{1,4}(?:\s*/\s*\d{1,4})?\W*$"
                    r"|\b(?:19|20)\d\d\b|©|\bcopyright\b|\bdownloaded from\b", re.IGNORECASE)
# inside a page set among others on one image, where a story's heading may end in a year: a page number
# alone at either end of a piece ("12", "Page 12", "3 / 5"), never a year
_PAGE_NO = re.compile(r"^\W*(?:page\s+)?(?!(?:19|20)\d\d\b)\d{1,4}(?:\s*/\s*\d{1,4})?\b"
                      r"|\b(?!(?:19|20)\d\d\b)\d{1,4}(?:\s*/\s*\d{1,4})?\W*$", re.IGNORECASE)
_BARE_FOLIO = re.compile(r"^\W*(?:page\s+)?(?!(?:19|20)\d\d\b)\d{1,4}(?:\s*(?:/|of)\s*\d{1,4})?\W*$", re.IGNORECASE)
# a foot line of its own: a copyright, a "created using" or download stamp
_FOOT_LINE = re.compile(r"©|\bcopyright\b|\ball rights reserved\b|\bcreated (?:using|with)\b|\bdownloaded from\b",
                        re.IGNORECASE)
# what a stamp of several lines in the margin says: an author's version, where it is posted, its DOI
_STAMP = re.compile(r"\bauthor'?s? (?:version|copy)\b|\bpersonal use\b|\bredistribut|\bdoi\b|©|\bcopyright\b"
                    r"|\bdownloaded from\b|\bpreprint\b|\barxiv\b", re.IGNORECASE)


def is_furniture(region: "Region", h: float) -> bool:
    """A running head or foot: a thin band set apart at the top or bottom of the page (see
    `_margin_bands`) or of one page of several on the image (`_page_furniture`), not in title type,
    that carries a page number at a line's end, a year, a copyright line, a download or "created
    using" stamp. A receipt's shop name or closing thanks, a document's title, stays."""
    return (region.column in FURNITURE and _body_type(region.lines, h)
            and any(_FOLIO.search(l.text) or _FOOT_LINE.search(l.text) for l in region.lines))


def is_margin_stamp(line: TextLine, page_width: float) -> bool:
    """Text running up or down a side margin ("Downloaded from ... on DATE", an arXiv stamp)."""
    x0, y0, x1, y1 = line.box
    tall = (y1 - y0) >= 4 * (x1 - x0)
    return tall and (x1 <= 0.12 * page_width or x0 >= 0.88 * page_width)


@dataclass
class Region:
    lines: list[TextLine]
    column: Column


class _Cutter:
    def __init__(self, lines: Sequence[TextLine]) -> None:
        self.h = body_height(lines)
        x0 = min(l.box[0] for l in lines)
        x1 = max(l.box[2] for l in lines)
        self.min_vgap = 0.4 * self.h
        self._tags = 0
        self.running: tuple[set[str], set[str]] = (set(), set())  # the image's running head and foot

    def _tag(self) -> int:
        """A fresh column tag for blocks cut apart without a gutter (their rows must not be measured
        with another column's that happens to have the same path)."""
        self._tags -= 1
        return self._tags

    # -- gutters ------------------------------------------------------------------------
    def _is_entry_list(self, side: list[TextLine], gutter: float) -> bool:
        """Entries of a reference card or a glossary: rows of a term and its description (at most
        two cells), each row starting at the side's left edge, the space between term and
        description clearly narrower than the gutter. Two columns of a table split down the
        middle have cell gaps as wide as the gap between them, so they do not pass."""
        rows: list[list[TextLine]] = []
        for line in sorted(side, key=lambda l: core(l)[0]):
            if rows and core(line)[0] < max(core(l)[1] for l in rows[-1]):
                rows[-1].append(line)
            else:
                rows.append([line])
        if len(rows) < 3 or any(len(r) > 2 for r in rows):
            return False
        left = min(l.box[0] for l in side)
        starts = sum(1 for r in rows if min(l.box[0] for l in r) - left <= 2.5 * self.h)
        inner = [max(r, key=lambda l: l.box[0]).box[0] - min(r, key=lambda l: l.box[0]).box[2]
                 for r in rows if len(r) == 2]
        return starts >= 0.8 * len(rows) and len(inner) >= 2 and max(inner) < 0.8 * gutter

    def _is_text_column(self, side: list[TextLine], node_width: float) -> bool:
        """A column of text: at least a fifth of the block being cut (`node_width` wide: the page, or
        one page of a sheet) and mostly full lines, or ragged lines starting at one left edge."""
        if len(side) < 2:
            return False
        width = max(l.box[2] for l in side) - min(l.box[0] for l in side)
        if width < max(0.2 * node_width, 7 * self.h):
            return False
        widths = sorted(l.box[2] - l.box[0] for l in side)
        if widths[(3 * len(widths)) // 4] >= 0.6 * width:
            return True  # mostly full lines: prose
        # Code, commands and short entries: ragged lines, but most start at the column's left edge
        # (a table's or a receipt's cells sit at several left edges within their side).
        left = min(l.box[0] for l in side)
        aligned = sum(1 for l in side if l.box[0] - left <= 2.5 * self.h)
        return len(side) >= 4 and widths[(3 * len(widths)) // 4] >= 0.35 * width and aligned >= 0.7 * len(side)

    def _is_prose_block(self, side: list[TextLine]) -> bool:
        """A block of running text, however it is set inside (a page of a sheet, a story in its own
        columns): many lines, most of them several words long and wide."""
        if len(side) < 8:
            return False
        prose = sum(1 for l in side if len(l.text.split()) >= 4 and l.box[2] - l.box[0] >= 6 * self.h)
        return prose >= 0.5 * len(side)

    def _is_columns(self, side: list[TextLine], depth: int, gutter: float, node_width: float) -> bool:
        """A side of a gutter `gutter` wide is text set in columns: one text column or list of
        entries, or several side by side (the right side of the first gutter of a three-column
        page holds two columns)."""
        if self._is_text_column(side, node_width) or self._is_entry_list(side, gutter):
            return True
        return depth < 4 and len(side) >= 4 and self.gutter(side, depth + 1, node_width) is not None

    def gutter(self, lines: list[TextLine], depth: int = 0, node_width: float | None = None):
        """The best split of `lines` at a gutter: (left, right, strip), or None.

        `strip` runs from the left column's right edge to the right column's left edge; a line
        covering most of it crosses the gutter.
        """
        best, best_key = None, None
        if node_width is None:
            node_width = _width(lines)
        n = len(lines)
        # The detector pads each box on every side; across a narrow gutter the padded boxes of two
        # columns touch. Gutters are looked for between the boxes' ink, trimmed of that padding.
        ink = {id(l): _ink(l) for l in lines}
        runs = {r for limit in sorted({0, 1, 2, 3, n // 10, n // 5, (35 * n) // 100})
                for r in _sparse_runs(list(ink.values()), limit, self.min_vgap)}
        for r0, r1 in sorted(runs):
            mid = (r0 + r1) / 2
            left = [l for l in lines if (l.box[0] + l.box[2]) / 2 < mid]
            right = [l for l in lines if (l.box[0] + l.box[2]) / 2 >= mid]
            if len(left) < 2 or len(right) < 2:
                continue
            inner_left = [ink[id(l)].box[2] for l in left if ink[id(l)].box[2] <= r1]
            inner_right = [ink[id(l)].box[0] for l in right if ink[id(l)].box[0] >= r0]
            if not inner_left or not inner_right:
                continue
            a, b = _quantile(inner_left, 0.9), _quantile(inner_right, 0.1)
            if b - a < 0.5 * self.min_vgap:
                continue
            strip = (a, b)
            crossing = [l for l in lines if _covers(ink[id(l)], strip) >= 0.6]
            left = [l for l in left if _covers(ink[id(l)], strip) < 0.6]
            right = [l for l in right if _covers(ink[id(l)], strip) < 0.6]
            if len(crossing) > 0.5 * (len(left) + len(right)):
                continue
            if not (self._is_columns(left, depth, b - a, node_width) and
                    self._is_columns(right, depth, b - a, node_width)) \
                    and not (not crossing and b - a >= BLOCK_GUTTER * self.h
                             and self._is_prose_block(left) and self._is_prose_block(right)):
                continue
            key = (min(len(left), len(right)), b - a)
            if best_key is None or key > best_key:
                best, best_key = (left, right, strip), key
        return best

    # -- bands ----------------------------------------------------------------------------
    def bands(self, lines: list[TextLine]) -> list[list[TextLine]]:
        ordered = sorted(lines, key=lambda l: core(l)[0])
        out: list[list[TextLine]] = []
        reach = None
        for line in ordered:
            c0, c1 = core(line)
            if reach is None or c0 > reach:
                out.append([line])
                reach = c1
            else:
                out[-1].append(line)
                reach = max(reach, c1)
        return out

    def _section_break(self, left: list[TextLine], right: list[TextLine]) -> float | None:
        """Where a page of balanced two-column sections starts a new section: one column is blank
        for two lines or more while the other holds one short line there (the section's
        title), and both columns stop above it and go on below it at the same heights. Text is then read section by section, each left then right.
        In ordinary two-column text a blank stretch in one column faces full lines in the other."""
        for a, b in ((left, right), (right, left)):
            ordered = sorted(a, key=lambda l: core(l)[0])
            reach = core(ordered[0])[1]
            for line in ordered[1:]:
                top = core(line)[0]
                if top - reach >= 2 * self.h:
                    # lines of the other column within the blank stretch (not level with its ends)
                    facing = [l for l in b if core(l)[1] > reach + 0.3 * self.h and core(l)[0] < top - 0.3 * self.h]
                    width = max(l.box[2] for l in b) - min(l.box[0] for l in b)
                    ends = [core(l)[1] for l in b if core(l)[1] <= reach + 0.6 * self.h and l not in facing]
                    starts = [core(l)[0] for l in b if core(l)[0] >= top - 0.6 * self.h and l not in facing]
                    # balanced: the other column ends and starts again where this one does
                    inside = len(facing) == 1 and core(facing[0])[0] > reach + 0.3 * self.h \
                        and core(facing[0])[1] < top - 0.3 * self.h  # not level with this column's lines
                    if inside:  # the title stands apart in its column too, not one line of a listing
                        c0, c1 = core(facing[0])
                        inside = not any(c0 - self.h < core(l)[1] <= c0 or c1 <= core(l)[0] < c1 + self.h
                                         for l in b if l is not facing[0])
                    if inside and facing[0].box[2] - facing[0].box[0] < 0.6 * width \
                            and ends and starts and abs(max(ends) - reach) <= 0.6 * self.h \
                            and abs(min(starts) - top) <= 0.6 * self.h:
                        return reach
                reach = max(reach, core(line)[1])
        return None

    def _blank_bands(self, lines: list[TextLine]) -> list[list[TextLine]]:
        """`lines` cut at horizontal white bands across their whole width, taller than any space
        between paragraphs or around a heading: what lies above and below is read apart, top to
        bottom, before any column is looked for (stories of a newspaper, pages set together on one
        sheet). Columns that flow on past such a band in both columns at once are rare."""
        out: list[list[TextLine]] = []
        reach = None
        for band in self.bands(lines):
            top = min(core(l)[0] for l in band)
            if reach is None or top - reach >= BLANK_BAND * self.h:
                out.append(list(band))
            else:
                out[-1] += band
            reach = max(core(l)[1] for l in band) if reach is None else max(reach, max(core(l)[1] for l in band))
        return out

    def _blocks_in_rows(self, lines: list[TextLine], sections: list[list[TextLine]]) -> bool:
        """Are the `sections` (cut at white bands across the node) rows of blocks, each set in columns
        of its own (pages on a sheet, stories of a newspaper), rather than the sections of columns
        that run on below the band (a reference card's columns of short sections)?"""
        split = self.gutter(lines)
        if split is None:
            return True
        for side in split[:2]:
            ids = {id(l) for l in side}
            for section in sections:
                part = [l for l in section if id(l) in ids]
                if self._is_prose_block(part) and self.gutter(part) is not None:
                    return True
        return False

    def _spanned(self, lines: list[TextLine]) -> list[list[TextLine]]:
        """`lines` cut into horizontal sections at the bands holding a line that spans most of
        their width (a title or banner across the columns): the columns above and below such a line
        may differ in number and place (three columns of one story, four of the next)."""
        x0 = min(l.box[0] for l in lines)
        x1 = max(l.box[2] for l in lines)
        if x1 - x0 < 16 * self.h:
            return [lines]
        out: list[list[TextLine]] = []
        run: list[TextLine] = []
        for band in self.bands(lines):
            if any(l.box[2] - l.box[0] >= 0.7 * (x1 - x0) for l in band):
                if run:
                    out.append(run)
                    run = []
                out.append(band)
            else:
                run += band
        if run:
            out.append(run)
        return out if len(out) > 1 and all(len(o) < len(lines) for o in out) else [lines]

    def _centred_stacks(self, lines: list[TextLine]) -> list[list[TextLine]] | None:
        """A grid of short centred blocks (the authors of a paper: name, affiliation, address, email
        stacked under each other, three across, a second row of them below), in reading order: each
        block whole, blocks left to right, then the next row of blocks. None if `lines` are not such
        a grid.

        A block is a run of lines one under the next whose centres agree while both their edges are
        ragged (not a column of text or of a table aligned at one edge); every line of the node must belong to one. A table's columns do not
        pass: their cells line up in rows of equal count across three or more columns, where the
        blocks of one row of a grid hold different numbers of lines (one author has two
        affiliations, another no email)."""
        if len(lines) < 6 or len(lines) > 80:
            return None
        h = self.h
        stacks: list[list[TextLine]] = []
        for line in sorted(lines, key=lambda l: l.box[1]):
            mid = (line.box[0] + line.box[2]) / 2
            home = None
            for stack in stacks:
                last = stack[-1]
                if abs((last.box[0] + last.box[2]) / 2 - mid) <= 0.5 * h \
                        and core(line)[0] - core(last)[1] <= 1.2 * h and core(line)[0] > core(last)[0]:
                    home = stack
                    break
            if home is None:
                stacks.append([line])
            else:
                home.append(line)
        if len(stacks) < 2 or any(len(s) < 2 for s in stacks):
            return None
        for stack in stacks:
            lefts = [l.box[0] for l in stack]
            rights = [l.box[2] for l in stack]
            if max(lefts) - min(lefts) < 0.3 * h or max(rights) - min(rights) < 0.3 * h:
                return None  # lines aligned at one edge: a column of text, a table's column of numbers
            if max(r - l for l, r in zip(lefts, rights)) > 16 * h:
                return None  # full lines of prose, no stacked labels

        def span(stack):
            return core(stack[0])[0], core(stack[-1])[1]

        # rows of blocks: blocks whose vertical spans overlap
        tiers: list[list[list[TextLine]]] = []
        for stack in sorted(stacks, key=lambda s: span(s)[0]):
            if tiers and span(stack)[0] < max(span(s)[1] for s in tiers[-1]):
                tiers[-1].append(stack)
            else:
                tiers.append([stack])
        for tier in tiers:
            tier.sort(key=lambda s: s[0].box[0])
            for a, b in zip(tier, tier[1:]):
                if max(l.box[2] for l in a) > min(l.box[0] for l in b):
                    return None  # blocks side by side do not overlap
            if len(tier) >= 3 and len({len(s) for s in tier}) == 1:
                return None  # rows of equal count across three or more columns: a table
        if max(len(t) for t in tiers) < 2:
            return None
        return [stack for tier in tiers for stack in tier]

    def _peel_stacks(self, lines: list[TextLine]):
        """(above, grid, below): a grid of centred blocks (`_centred_stacks`) set across the node
        among other text (the authors between a paper's title and its two columns), or None. The
        grid is a run of whole bands of short lines."""
        bands = self.bands(lines)
        short = [all(l.box[2] - l.box[0] <= 16 * self.h for l in band) for band in bands]
        i = 0
        while i < len(bands):
            if not short[i]:
                i += 1
                continue
            j = i
            while j < len(bands) and short[j]:
                j += 1
            for a in range(i, min(i + 3, j)):
                for b in range(j, max(a, j - 3), -1):
                    grid = [l for band in bands[a:b] for l in band]
                    if len(grid) < len(lines) and self._centred_stacks(grid) is not None:
                        return ([l for band in bands[:a] for l in band], grid,
                                [l for band in bands[b:] for l in band])
            i = j
        return None

    def _seam(self, lines: list[TextLine], bands: list[list[TextLine]]) -> tuple[int, int, float] | None:
        """Two columns of prose that meet without a visible gutter (their padded boxes touch or
        overlap across a narrow gutter, so no white strip runs down between them): (start, end, x),
        bands[start:end] being the two columns and x the seam between them, or None.

        The columns are a run of three or more bands in a row, each of two wide lines, one from the
        node's left edge and one to its right edge, meeting at one x (within a body height); then
        the bands that follow with no paragraph space, none crossing the seam (a column's last,
        short line). A single line between such pairs (a paragraph's last line across the block)
        ends the run: the pairs above it are one wide line cut in two, not two columns."""
        x0, x1 = min(l.box[0] for l in lines), max(l.box[2] for l in lines)
        width = x1 - x0

        def pair(band: list[TextLine]) -> float | None:
            if len(band) != 2:
                return None
            a, b = sorted(band, key=lambda l: l.box[0])
            if a.box[0] - x0 <= self.h and x1 - b.box[2] <= self.h \
                    and min(a.box[2] - a.box[0], b.box[2] - b.box[0]) >= 0.3 * width \
                    and abs(a.box[2] - b.box[0]) <= self.h:
                return (a.box[2] + b.box[0]) / 2
            return None

        seams = [pair(band) for band in bands]
        k = 0
        while k < len(bands):
            if seams[k] is None:
                k += 1
                continue
            start = k
            while k < len(bands) and seams[k] is not None and abs(seams[k] - seams[start]) <= self.h:
                k += 1
            if k - start >= 3:
                x = sorted(seams[start:k])[(k - start) // 2]
                end = k
                while end < len(bands) and seams[end] is None \
                        and min(core(l)[0] for l in bands[end]) - max(core(l)[1] for l in bands[end - 1]) <= 0.8 * self.h \
                        and not any(l.box[0] < x - 0.5 * self.h and l.box[2] > x + 0.5 * self.h for l in bands[end]):
                    end += 1
                return start, end, x
        return None

    # -- recursion ------------------------------------------------------------------------
    def _furniture(self, lines: list[TextLine]) -> tuple[list[TextLine], list[TextLine]]:
        """The running head and foot of `lines` if they are a page of running text of their own
        (`_page_furniture`), each [] if none."""
        if not self._is_prose_block(lines):
            return [], []
        head, foot = _page_furniture(lines, self.bands(lines), self.h, self.running)
        return head or [], foot or []

    def cut(self, lines: list[TextLine], column: Column, depth: int = 0, block: bool = False,
            peel: bool = True) -> list[Region]:
        """Regions of `lines` in reading order. `block`: `lines` are one of several blocks the
        image was cut into at a wide white band or gutter, perhaps a page of its own with its
        running head and foot (see `_page_furniture`), tagged as the page's are."""
        if len(lines) <= 1 or depth > 30:
            return [Region(lines, column)]
        if block:
            head, foot = self._furniture(lines)
            if head or foot:
                taken = {id(l) for l in head + foot}
                body = [l for l in lines if id(l) not in taken]
                return ([Region(head, ("head",))] if head else []) + self.cut(body, column, depth + 1) \
                    + ([Region(foot, ("foot",))] if foot else [])
        sections = self._blank_bands(lines)
        if len(sections) > 1 and not self._blocks_in_rows(lines, sections):
            # pages one above the other whose columns are read down through both: each page's own
            # head and foot go first and last, as the image's do
            found = [self._furniture(section) for section in sections] if peel else []
            heads, feet = [h for h, _ in found if h], [f for _, f in found if f]
            if heads or feet:
                taken = {id(l) for band in heads + feet for l in band}
                body = [l for l in lines if id(l) not in taken]
                return [Region(b, ("head",)) for b in heads] + self.cut(body, column, depth + 1, peel=False) \
                    + [Region(b, ("foot",)) for b in feet]
            sections = [lines]
        blocks = len(sections) > 1
        if not blocks:
            sections = self._spanned(lines)
        if len(sections) > 1:
            out: list[Region] = []
            for section in sections:
                out += self.cut(section, column, depth + 1, block=blocks)
            return out
        stacks = self._centred_stacks(lines)
        if stacks is not None:
            tag = self._tag()
            return [Region(stack, column + (tag, k)) for k, stack in enumerate(stacks)]
        peeled = self._peel_stacks(lines)
        if peeled is not None:
            return [r for part in peeled if part for r in self.cut(part, column, depth + 1)]
        split = self.gutter(lines)
        if split is not None:
            lines, split = _without_ornaments(lines, split, self.h)
            y = self._section_break(split[0], split[1])
            if y is not None:
                above = [l for l in lines if sum(core(l)) / 2 < y]
                below = [l for l in lines if sum(core(l)) / 2 >= y]
                return self.cut(above, column, depth + 1) + self.cut(below, column, depth + 1)
            return self._sections(lines, split, column, depth)
        bands = self.bands(lines)
        if len(bands) == 1:
            return [Region(lines, column)]
        seam = self._seam(lines, bands)
        if seam is not None:
            start, end, x = seam
            block = [l for band in bands[start:end] for l in band]
            above = [l for band in bands[:start] for l in band]
            below = [l for band in bands[end:] for l in band]
            left = [l for l in block if (l.box[0] + l.box[2]) / 2 < x]
            right = [l for l in block if (l.box[0] + l.box[2]) / 2 >= x]
            out = self.cut(above, column, depth + 1) if above else []
            tag = self._tag()
            out += self.cut(left, column + (tag, 0), depth + 1) + self.cut(right, column + (tag, 1), depth + 1)
            return out + (self.cut(below, column, depth + 1) if below else [])
        out: list[Region] = []
        for band in bands:
            out += self.cut(band, column, depth + 1)
        return out

    def _sections(self, lines, split, column: Column, depth: int) -> list[Region]:
        """Bands that bridge the gutter stay in place; runs of bands between them are read by column."""
        left_ids = {id(l) for l in split[0]}
        strip = split[2]
        out: list[Region] = []
        run: list[TextLine] = []

        def flush() -> None:
            if run:
                left = [l for l in run if id(l) in left_ids]
                right = [l for l in run if id(l) not in left_ids]
                node_width = _width(lines)
                if len(run) == len(lines) or (self._is_columns(left, 0, strip[1] - strip[0], node_width) and
                                              self._is_columns(right, 0, strip[1] - strip[0], node_width)):
                    # blocks of prose apart at a wide gutter: perhaps pages side by side
                    blocks = strip[1] - strip[0] >= BLOCK_GUTTER * self.h \
                        and self._is_prose_block(left) and self._is_prose_block(right)
                    out.extend(self.cut(left, column + (0,), depth + 1, block=blocks) if left else [])
                    out.extend(self.cut(right, column + (1,), depth + 1, block=blocks) if right else [])
                else:  # this stretch is no two-column text (a table, a form): cut it on its own
                    out.extend(self.cut(list(run), column, depth + 1))
                run.clear()

        left_edge = _quantile([l.box[0] for l in split[0]], 0.1)
        right_edge = _quantile([l.box[0] for l in split[1]], 0.1)
        width = max(1.0, strip[0] - left_edge)

        def column_text(line: TextLine, edge: float) -> bool:
            return abs(line.box[0] - edge) <= 0.35 * self.h or line.box[2] - line.box[0] >= 0.6 * width

        def bridges(band: list[TextLine]) -> bool:
            """A wide equation or figure label row set across the gutter: pieces on both sides that
            reach into the gutter, none of them a column's line (starting at its edge, or long)."""
            # a right column's line starting at its edge may reach into a narrow gutter by its padding;
            # a line of the left column's text (not a mark: a number, a symbol) that ends short of the
            # right column's lines crosses nothing, however far into the gutter it reaches (a ragged
            # column's longest lines, a box padded more than its neighbours)
            if _union_cover([l for l in band if (id(l) in left_ids and (l.box[2] >= right_edge
                                                                         or l.box[2] - l.box[0] < 4 * self.h))
                             or (id(l) not in left_ids and abs(l.box[0] - right_edge) > 0.5 * self.h)],
                            strip) >= 0.6:
                return True
            lefts = [l for l in band if id(l) in left_ids]
            rights = [l for l in band if id(l) not in left_ids]
            into_gutter = any(l.box[2] > strip[0] + 0.35 * self.h for l in lefts) or \
                any(l.box[0] < right_edge - 0.35 * self.h for l in rights)
            return bool(lefts and rights) and into_gutter and not any(column_text(l, left_edge) for l in lefts) \
                and not any(column_text(l, right_edge) for l in rights)

        # Consecutive bands across the gutter are cut together: a block set in other columns than
        # the rest (a two-column story under a four-column one) is read in its own columns.
        across: list[list[TextLine]] = []

        def flush_across() -> None:
            if sum(len(b) for b in across) == len(lines) or len(across) < 3:
                for b in across:
                    out.extend(self.cut(b, column, depth + 1))
            elif across:
                out.extend(self.cut([l for b in across for l in b], column, depth + 1))
            across.clear()

        for band in self.bands(lines):
            if bridges(band):
                flush()
                across.append(band)
            else:
                flush_across()
                run.extend(band)
        flush()
        flush_across()
        return out


# what an ornament down a gutter is read as: one or two circles, dots, dashes or dingbats, never a word
_ORNAMENT = re.compile(r"[oO0°•·∘◦○●◆◇■□▪▫*+\-–—|.:,;'\"]{1,2}")


def _without_ornaments(lines: list[TextLine], split, h: float):
    """`lines` and `split` less the ornaments of the gutter: a rule of dots or circles, a dingbat
    between the columns, read as "o", "0" or "•" (one or two such characters lying inside the
    gutter; a short word there, "to" or "or", is text and stays)."""
    a, b = split[2]
    texts = [l.box[0] for l in split[1] if len(l.text.strip()) > 2]  # where the right column's text starts
    b = max(b, _quantile(texts, 0.1)) if texts else b
    junk = {id(l) for l in lines if _ORNAMENT.fullmatch(l.text.strip())
            and l.box[0] >= a - 0.5 * h and l.box[2] <= b + 0.5 * h}
    if not junk:
        return lines, split
    keep = [l for l in lines if id(l) not in junk]
    return keep, ([l for l in split[0] if id(l) not in junk], [l for l in split[1] if id(l) not in junk], split[2])


def _width(lines: list[TextLine]) -> float:
    return max(1.0, max(l.box[2] for l in lines) - min(l.box[0] for l in lines))


def _quantile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def _covers(line: TextLine, strip: tuple[float, float]) -> float:
    a, b = strip
    return max(0.0, min(b, line.box[2]) - max(a, line.box[0])) / max(1e-6, b - a)


def _union_cover(band: list[TextLine], strip: tuple[float, float]) -> float:
    a, b = strip
    spans = sorted((max(a, l.box[0]), min(b, l.box[2])) for l in band if l.box[2] > a and l.box[0] < b)
    total, reach = 0.0, a
    for s0, s1 in spans:
        if s1 > reach:
            total += s1 - max(s0, reach)
            reach = s1
    return total / max(1e-6, b - a)


def _sparse_runs(lines: list[TextLine], limit: int, min_width: float) -> list[tuple[float, float]]:
    """Maximal x-intervals, inside the lines' extent, that at most `limit` lines cover."""
    events = sorted([(l.box[0], 1) for l in lines] + [(l.box[2], -1) for l in lines])
    runs: list[tuple[float, float]] = []
    depth, start = 0, None
    lo, hi = events[0][0], events[-1][0]
    for x, step in events:
        before = depth
        depth += step
        if before > limit >= depth and start is None:
            start = x
        elif before <= limit < depth and start is not None:
            if x - start >= min_width and lo < start and x < hi:
                runs.append((start, x))
            start = None
    return runs


def reading_order(lines: Sequence[TextLine], page_height: float) -> list[Region]:
    """Regions of `lines` in reading order (see the module docstring)."""
    lines = [l for l in lines if l.text.strip()]
    if not lines:
        return []
    lines = split_merged(lines, body_height(lines))
    lines = join_spaced(lines, body_height(lines))
    cutter = _Cutter(lines)
    bands = cutter.bands(list(lines))
    head, tail = _margin_bands(bands, cutter.h, page_height)
    cutter.running = (_running_keys(head), _running_keys(tail))
    taken = {id(l) for band in head + tail for l in band}
    body = [l for band in bands for l in band if id(l) not in taken]
    regions = [Region(b, ("head",)) for b in head]
    if body:
        regions += cutter.cut(body, ())
    regions += [Region(b, ("foot",)) for b in tail]
    return regions


def split_merged(lines: list[TextLine], h: float) -> list[TextLine]:
    """Lines the detector ran across a narrow gutter, cut back into their two columns' lines.

    Such a box starts where the left column's lines start and ends where the right column's lines
    end, and the lines just above and below it stop short of a narrow strip and start again after it,
    at the same places. A title or a wide equation across the gutter is centred, or has no
    column lines around it at both sides, and stays whole; so do the lines of a paragraph set across
    both columns right under or over them, which end on a short last line with nothing beside it."""
    # A line cut apart gives its neighbours' test two more column lines at once, so a stack of
    # merged lines is cut from its clean end inwards: top down, then bottom up, and again.
    lines = list(lines)
    for rnd in range(4):
        before = len(lines)
        for line in sorted(lines, key=lambda l: l.box[1], reverse=rnd % 2 == 1):
            parts = _split_one(line, lines, h)
            if len(parts) > 1:
                i = next(i for i, l in enumerate(lines) if l is line)
                lines[i:i + 1] = parts
        if len(lines) == before and rnd >= 1:
            break
    return lines


def _split_one(line: TextLine, lines: list[TextLine], h: float) -> list[TextLine]:
    parts = _split_two(line, lines, h)
    return parts if len(parts) > 1 else _split_columns(line, lines, h)


def _lines_near(line: TextLine, lines: list[TextLine], h: float, left: float) -> list[TextLine]:
    """Other lines within six line heights above or below `line`, inside its span (from `left` line
    heights before its start to one past its end) and clearly narrower than it."""
    x0, y0, x1, y1 = line.box
    cy = (y0 + y1) / 2
    return [l for l in lines if l is not line and abs((l.box[1] + l.box[3]) / 2 - cy) <= 6 * h
            and l.box[0] >= x0 - left * h and l.box[2] <= x1 + h and l.box[2] - l.box[0] < 0.8 * (x1 - x0)]


def _cut_text(line: TextLine, a: float, b: float) -> tuple[str, str]:
    """The line's text cut at the word boundary nearest the gutter between a and b, placing characters
    evenly in the box."""
    x0, x1 = line.box[0], line.box[2]
    at = len(line.text) * ((a + b) / 2 - x0) / (x1 - x0)
    spaces = [i for i, ch in enumerate(line.text) if ch == " "]
    cut = min(spaces, key=lambda i: abs(i - at))
    return line.text[:cut].strip(), line.text[cut:].strip()


def _split_two(line: TextLine, lines: list[TextLine], h: float) -> list[TextLine]:
    """A line run across the gutter of two columns whose lines stop and start at its ends."""
    x0, y0, x1, y1 = line.box
    words = line.text.split()
    if x1 - x0 < 10 * h or len(words) < 6:
        return [line]
    near = _lines_near(line, lines, h, left=1)
    left = [l for l in near if abs(l.box[0] - x0) <= h and l.box[2] <= x1 - 6 * h]
    right = [l for l in near if l.box[0] >= x0 + 6 * h and abs(l.box[2] - x1) <= 2 * h]
    if len(left) < 3 or len(right) < 3:
        return [line]
    a = _quantile([l.box[2] for l in left], 0.9)
    b = _quantile([l.box[0] for l in right], 0.1)
    # padded boxes of the two columns may overlap a little across a narrow gutter
    if not -h <= b - a <= 3 * h or any(l.box[0] < min(a, b) - 2 * h and l.box[2] > max(a, b) + 2 * h
                                       for l in near):
        return [line]
    if _paragraph_across(line, lines, h, a):
        return [line]
    head, tail = _cut_text(line, a, b)
    if len(head.split()) < 3 or len(tail.split()) < 3:
        return [line]
    return [TextLine(head, (x0, y0, a, y1), line.score), TextLine(tail, (b, y0, x1, y1), line.score)]



def _split_columns(line: TextLine, lines: list[TextLine], h: float) -> list[TextLine]:
    """A line run across two or three columns inside a stretch of such lines, cut at every gutter
    that the lines around it show."""
    x0, y0, x1, y1 = line.box
    words = line.text.split()
    if x1 - x0 < 10 * h or len(words) < 6:
        return [line]
    cy = (y0 + y1) / 2
    near = _lines_near(line, lines, h, left=2)
    # a line of body type that ends where several lines around it end, at a column's right edge (a
    # title across the columns is set larger, or stops short of that edge)
    # (or a column's paragraph ending short in the right column, run together with the left
    # column's line: it starts at the left column's edge, and the columns are seen both above and
    # below it, so it is no full-width paragraph's last line under or over the columns)
    ends_at_edge = sum(1 for l in near if abs(l.box[2] - x1) <= h) >= 3
    if y1 - y0 > 1.2 * h or not (ends_at_edge or sum(1 for l in near if abs(l.box[0] - x0) <= h) >= 3):
        return [line]
    if not ends_at_edge:  # the right column's lines reach past this line's end
        near = [l for l in lines if l is not line and abs((l.box[1] + l.box[3]) / 2 - cy) <= 6 * h
                and x0 - 2 * h <= l.box[0] <= x1 - 2 * h and l.box[2] - l.box[0] < 0.8 * (x1 - x0)]
    # A gutter inside the line: several lines nearby start at one place b (the next column's edge)
    # and several end just before it (the column's right edge). With three columns run together,
    # the leftmost gutter is cut first and the rest of the line is looked at again.
    # (a paragraph's last line may end a word or two into the last column)
    starts = sorted(l.box[0] for l in near if x0 + 6 * h <= l.box[0] <= x1 - (6 if ends_at_edge else 2) * h)

    def c(l: TextLine) -> float:
        return (l.box[1] + l.box[3]) / 2

    for s0 in starts:
        # column lines on both sides, wide (not a word the detector boxed apart); the left ones start at
        # the line's left edge or a paragraph indent past it
        right = [l for l in near if abs(l.box[0] - s0) <= h and l.box[2] - l.box[0] >= 6 * h]
        left = [l for l in near if s0 - 3 * h <= l.box[2] <= s0 + h and -2 * h <= l.box[0] - x0 <= 2 * h
                and l.box[2] - l.box[0] >= 6 * h]
        if len(right) < 3 or len(left) < 3:
            continue
        # (seen above and below it, or in the row just above it at the usual leading: the columns'
        # last row, not a full-width paragraph's last line, which follows a full-width line)
        if not ends_at_edge and not all(any(c(l) < cy for l in side) and any(c(l) > cy for l in side)
                                        for side in (left, right)) \
                and not all(any(0 < cy - c(l) <= 1.6 * h for l in side) for side in (left, right)):
            continue
        a = _quantile([l.box[2] for l in left], 0.9)
        b = _quantile([l.box[0] for l in right], 0.1)
        # padded boxes of the two columns may overlap a little across a narrow gutter; a line across
        # the strip (a title, a wide equation) keeps it whole, unless it is another line merged the
        # same way (the detector often runs a whole stretch of both columns' lines together)
        # (the last line of a full-width paragraph reaching past the gutter shows there is none)
        # (a short byline, or a title in larger type, centred over the columns a few lines off is
        # no such line)
        if not -h <= b - a <= 3 * h or any(l.box[0] < min(a, b) - h and l.box[2] > max(a, b) + h
                                           and not (abs(l.box[0] - x0) <= h and abs(l.box[2] - x1) <= h)
                                           and (l.box[2] - l.box[0] >= 0.5 * (x1 - x0) and l.height <= 1.3 * h
                                                or abs(c(l) - cy) <= h)
                                           for l in near) or _paragraph_across(line, lines, h, a):
            continue
        head, tail = _cut_text(line, a, b)
        if len(head.split()) < 3 or len(tail.split()) < (3 if ends_at_edge else 2):
            continue
        return [TextLine(head, (x0, y0, a, y1), line.score)] + \
            _split_columns(TextLine(tail, (b, y0, x1, y1), line.score), lines, h)
    return [line]


def _paragraph_across(line: TextLine, lines: list[TextLine], h: float, a: float) -> bool:
    """Whether `line` is a line of a paragraph set across the gutter at `a`, not lines of two columns
    run together: the lines of its extent around it, one per row at the usual leading, end on the
    paragraph's last line, a short line from the left edge that stops well before the gutter with
    nothing level with it further right. Where the columns run together, the right column goes on
    beside such a short line (or the detector runs it in too, and the row is of the same extent),
    unless the columns end there, the left one a line after the right: then both columns run full
    into the first of those lines from the row above, where a paragraph under the columns follows
    the end of at least one of them (a short line) and one over them follows no columns."""
    x0, x1 = line.box[0], line.box[2]

    def c(l: TextLine) -> float:
        return (l.box[1] + l.box[3]) / 2

    def row(l: TextLine, step: float) -> list[TextLine]:  # the lines of the row above (-1) or below (1)
        return [k for k in lines if 0 < step * (c(k) - c(l)) <= 1.6 * h and k.height <= 1.3 * h]

    # (the first line of a paragraph may be indented, so the left edges agree within two heights)
    same = [l for l in lines if abs(l.box[2] - x1) <= h and abs(l.box[0] - x0) <= 2 * h and l.height <= 1.3 * h]
    first = last = line
    while above := [l for l in same if 0 < c(first) - c(l) <= 1.6 * h]:
        first = max(above, key=c)
    while below := [l for l in same if 0 < c(l) - c(last) <= 1.6 * h]:
        last = min(below, key=c)
    edge = min(x0, last.box[0])  # (or the indent, when the paragraph has only this line and its last)
    ends = [l for l in row(last, 1) if edge - 2 * h <= l.box[0] <= edge + h and l.box[2] < a - 2 * h]
    if not any(not any(abs(c(l) - c(end)) <= 0.5 * h and end.box[2] < l.box[0] < x1 for l in lines)
               for end in ends):
        return False
    over = row(first, -1)
    return not (any(abs(l.box[0] - edge) <= 2 * h and a - h <= l.box[2] <= a + h for l in over)
                and any(l.box[0] >= a and l.box[2] >= x1 - h for l in over))


def _margin_bands(bands: list[list[TextLine]], h: float, page_height: float):
    """A thin band alone at the top (bottom) of the page: a running head (foot, page number); or a
    stamp of a few close-set lines there ("This is the author's version ... posted at ... doi: ..."),
    returned as one band."""
    if len(bands) < 3:
        return [], []

    def thin(band: list[TextLine]) -> bool:
        return _thin(band, h)

    gap = _band_gap

    def stamp(group: list[list[TextLine]]) -> bool:
        return all(thin(b) for b in group) and all(gap(a, b) < 0.8 * h for a, b in zip(group, group[1:])) \
            and any(_STAMP.search(l.text) for b in group for l in b)

    x0 = min(l.box[0] for b in bands for l in b)
    x1 = max(l.box[2] for b in bands for l in b)

    def spread(band: list[TextLine]) -> bool:
        return _spread(band, x0, x1, h, _FOLIO)

    def apart(upper: list[TextLine], lower: list[TextLine], edge: list[TextLine]) -> bool:
        return gap(upper, lower) >= (0.8 * h if edge and thin(edge) and spread(edge) else 1.5 * h)

    head: list[list[TextLine]] = []
    tail: list[list[TextLine]] = []
    for k in range(min(4, len(bands) - 2), 0, -1):
        group = bands[:k]
        if (thin(group[0]) if k == 1 else stamp(group)) and apart(group[-1], bands[k], group[0] if k == 1 else []) \
                and max(l.box[3] for b in group for l in b) <= 0.15 * page_height:
            head = [[l for b in group for l in b]]
            break
    for k in range(min(4, len(bands) - 2 - len(head)), 0, -1):
        group = bands[-k:]
        if (thin(group[0]) if k == 1 else stamp(group)) and apart(bands[-k - 1], group[0], group[0] if k == 1 else []) \
                and min(l.box[1] for b in group for l in b) >= 0.85 * page_height:
            tail = [[l for b in group for l in b]]
            break
    return head, tail


def _thin(band: list[TextLine], h: float) -> bool:
    return max(l.box[3] for l in band) - min(l.box[1] for l in band) <= 2.5 * h


def _running_keys(bands: list[list[TextLine]]) -> set[str]:
    """The pieces of running heads or feet, reduced to their letters (page numbers and dates differ
    from page to page), those long enough to tell a repeat from chance."""
    keys = {re.sub(r"[\W\d_]+", "", l.text).lower() for band in bands for l in band}
    return {k for k in keys if len(k) >= 8}


def _body_type(lines: list[TextLine], h: float) -> bool:
    """Not in title type: of three pieces or more, most, and none much taller (a paper's name set as
    a logo in its running head is boxed a little taller than the rest; a masthead title far more)."""
    heights = sorted(l.height for l in lines)
    return heights[len(heights) // 2] <= 1.3 * h and heights[-1] <= 1.5 * h


def _band_gap(upper: list[TextLine], lower: list[TextLine]) -> float:
    return min(core(l)[0] for l in lower) - max(core(l)[1] for l in upper)


def _spread(band: list[TextLine], x0: float, x1: float, h: float, number: re.Pattern, piece: float = 0.35) -> bool:
    """A running head or foot set at both ends of the text block (from x0 to x1: "Journal of X" at
    the left margin, "PREPRINT / 3" at the right), each piece short (at most `piece` of the block's
    width), one carrying a page number (`number`): it may sit closer to the text than a lone folio
    does (under a footnote)."""
    left = min(band, key=lambda l: l.box[0])
    right = max(band, key=lambda l: l.box[2])
    return left is not right and len(band) <= 3 and left.box[0] - x0 <= h and x1 - right.box[2] <= h \
        and all(l.box[2] - l.box[0] <= piece * (x1 - x0) for l in band) \
        and any(number.search(l.text) for l in band)


def _page_furniture(lines: list[TextLine], bands: list[list[TextLine]], h: float,
                    running: tuple[set[str], set[str]] = (set(), set())):
    """(head, foot) of one page set among others on an image (pages side by side, a sheet of
    pages in rows): the band alone at its top (bottom), or None each.

    Inside an image a story's heading, a caption or a credit line may sit at a block's edge too,
    and a heading may end in a year ("Results of 2007") or be a bare section number, so the evidence
    asked for is stronger than at the image's margins: pieces set at both ends of the page, one a
    page number ("Chapter 3 ... 12", "paperTeX ... 3 / 5"), or one piece across it starting or
    ending with one; at the foot also one line alone that is a page number ("12", "- 12 -", "Page
    12") at the page's left or right edge or centred on it, or a copyright or "created using" line
    starting at the page's left edge or centred on it; or a band that repeats a piece of the
    image's own running head (foot), `running` (`_running_keys`), and carries a year or a page
    number. All in body type, thin, set apart from the text. The page must be running text
    (`_Cutter._is_prose_block`, checked by the caller)."""
    if len(bands) < 4:
        return None, None
    x0 = min(l.box[0] for l in lines)
    x1 = max(l.box[2] for l in lines)
    mid = (x0 + x1) / 2

    def strong(band: list[TextLine], foot: bool) -> float | None:
        """How far from the text such a band must stand, or None if it is no furniture."""
        if not _thin(band, h) or not _body_type(band, h):
            return None
        if _spread(band, x0, x1, h, _PAGE_NO, piece=0.6):  # a narrow page: its head fills more of it
            return 1.2 * h
        if len(band) <= 3 and _running_keys([band]) & running[foot] and any(_FOLIO.search(l.text) for l in band):
            # (not the heads of two pages side by side: each page's is found when they are cut apart)
            return 1.2 * h
        if len(band) != 1:
            return None
        line = band[0]
        centred = abs((line.box[0] + line.box[2]) / 2 - mid) <= max(2 * h, 0.15 * (x1 - x0))  # ragged text too
        if line.box[0] - x0 <= h and x1 - line.box[2] <= h and _PAGE_NO.search(line.text):
            return 1.5 * h  # a running head the detector boxed in one piece across the page
        if foot and _BARE_FOLIO.search(line.text) and (centred or line.box[0] - x0 <= h or x1 - line.box[2] <= h):
            return 1.5 * h
        if foot and _FOOT_LINE.search(line.text) and (centred or line.box[0] - x0 <= h):
            return 1.5 * h
        return None

    head = foot = None
    need = strong(bands[0], False)
    if need is not None and _band_gap(bands[0], bands[1]) >= need:
        head = bands[0]
    need = strong(bands[-1], True)
    if need is not None and _band_gap(bands[-2], bands[-1]) >= need:
        foot = bands[-1]
    return head, foot
