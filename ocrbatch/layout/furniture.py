"""Page furniture: running heads and feet, page numbers, stamps in the margins.

A running head (foot) is a thin band alone at the top (bottom) of the page, set apart from the text,
in body type, carrying a page number at a line's end, a year, a copyright line, a download or
"created using" stamp. Where several pages are set on one image (an open book scanned flat, a sheet of
pages in rows), each page's own head and foot is looked for too, with stronger evidence (a story's
heading may end in a year). A receipt's shop name or closing thanks, a document's title, stays.
"""

from __future__ import annotations

import re
from typing import Sequence

from ..records import TextLine
from .geometry import core
from .params import LayoutParams

Band = list[TextLine]
# a page number at either end of a line ("7", "Page 7", "2 / 86"), a year, a copyright or download stamp
FOLIO = re.compile(r"^\W*(?:page\s+)?\d{1,4}(?:\s*/\s*\d{1,4})?\b|\b\d{1,4}(?:\s*/\s*\d{1,4})?\W*$"
                   r"|\b(?:19|20)\d\d\b|©|\bcopyright\b|\bdownloaded from\b", re.IGNORECASE)
# inside a page set among others: a page number alone at either end of a piece, never a year
PAGE_NO = re.compile(r"^\W*(?:page\s+)?(?!(?:19|20)\d\d\b)\d{1,4}(?:\s*/\s*\d{1,4})?\b"
                     r"|\b(?!(?:19|20)\d\d\b)\d{1,4}(?:\s*/\s*\d{1,4})?\W*$", re.IGNORECASE)
BARE_FOLIO = re.compile(r"^\W*(?:page\s+)?(?!(?:19|20)\d\d\b)\d{1,4}(?:\s*(?:/|of)\s*\d{1,4})?\W*$", re.IGNORECASE)
# a foot line of its own: a copyright, a "created using" or download stamp
FOOT_LINE = re.compile(r"©|\bcopyright\b|\ball rights reserved\b|\bcreated (?:using|with)\b|\bdownloaded from\b",
                       re.IGNORECASE)
# what a notice of several lines in the margin says: an author's version, where it is posted, its DOI
STAMP = re.compile(r"\bauthor'?s? (?:version|copy)\b|\bpersonal use\b|\bredistribut|\bdoi\b|©|\bcopyright\b"
                   r"|\bdownloaded from\b|\bpreprint\b|\barxiv\b", re.IGNORECASE)


def is_margin_stamp(line: TextLine, page_width: float, p: LayoutParams) -> bool:
    """Text running up or down a side margin ("Downloaded from ... on DATE", an arXiv stamp)."""
    x0, y0, x1, y1 = line.box
    tall = (y1 - y0) >= p.stamp_aspect * (x1 - x0)
    return tall and (x1 <= p.stamp_margin * page_width or x0 >= (1 - p.stamp_margin) * page_width)


def says_furniture(lines: Sequence[TextLine], h: float, p: LayoutParams) -> bool:
    """A band of furniture says so: body type, and a page number, year, copyright or stamp."""
    return body_type(lines, h, p) and any(FOLIO.search(l.text) or FOOT_LINE.search(l.text) for l in lines)


def bands(lines: Sequence[TextLine]) -> list[Band]:
    """`lines` in horizontal bands: runs whose cores (the middle half of each box) overlap."""
    out: list[Band] = []
    reach = None
    for line in sorted(lines, key=lambda l: core(l)[0]):
        c0, c1 = core(line)
        if reach is None or c0 > reach:
            out.append([line])
            reach = c1
        else:
            out[-1].append(line)
            reach = max(reach, c1)
    return out


def thin(band: Band, h: float, p: LayoutParams) -> bool:
    return max(l.box[3] for l in band) - min(l.box[1] for l in band) <= p.band_thin * h


def band_gap(upper: Band, lower: Band) -> float:
    return min(core(l)[0] for l in lower) - max(core(l)[1] for l in upper)


def body_type(lines: Sequence[TextLine], h: float, p: LayoutParams) -> bool:
    """Not in title type: of three pieces or more, most, and none much taller (a paper's name set as
    a logo in its running head is boxed a little taller than the rest; a masthead title far more)."""
    heights = sorted(l.height for l in lines)
    return heights[len(heights) // 2] <= p.title_type * h and heights[-1] <= p.title_type_max * h


def spread(band: Band, x0: float, x1: float, h: float, number: re.Pattern, piece: float = 0.35) -> bool:
    """A head or foot set at both ends of the text block (x0 to x1), each piece short (at most `piece`
    of the block's width), one carrying a page number (`number`)."""
    left = min(band, key=lambda l: l.box[0])
    right = max(band, key=lambda l: l.box[2])
    return left is not right and len(band) <= 3 and left.box[0] - x0 <= h and x1 - right.box[2] <= h \
        and all(l.box[2] - l.box[0] <= piece * (x1 - x0) for l in band) \
        and any(number.search(l.text) for l in band)


def running_keys(bands_: Sequence[Band]) -> set[str]:
    """The pieces of running heads or feet reduced to their letters (page numbers and dates differ from
    page to page), those long enough to tell a repeat from chance."""
    keys = {re.sub(r"[\W\d_]+", "", l.text).lower() for band in bands_ for l in band}
    return {k for k in keys if len(k) >= 8}


def margin_bands(lines: Sequence[TextLine], h: float, page_height: float, p: LayoutParams):
    """(head, foot): the band alone at the top (bottom) of the page, or a notice of a few close-set
    lines there ("This is the author's version ... doi: ..."), as [band] or []. Whether it is
    furniture is `says_furniture`'s to tell."""
    bs = bands(lines)
    if len(bs) < 3:
        return [], []
    x0 = min(l.box[0] for l in lines)
    x1 = max(l.box[2] for l in lines)

    def fits(group: list[Band], gap: float) -> bool:
        if len(group) == 1:
            apart = p.margin_apart_spread if spread(group[0], x0, x1, h, FOLIO) else p.margin_apart
            return thin(group[0], h, p) and gap >= apart * h
        return all(thin(b, h, p) for b in group) and gap >= p.margin_apart * h \
            and all(band_gap(a, b) < p.stamp_leading * h for a, b in zip(group, group[1:])) \
            and any(STAMP.search(l.text) for b in group for l in b)

    head: list[Band] = []
    for k in range(min(p.stamp_lines, len(bs) - 2), 0, -1):
        group = bs[:k]
        if fits(group, band_gap(group[-1], bs[k])) and max(l.box[3] for b in group for l in b) <= p.margin_share * page_height:
            head = [[l for b in group for l in b]]
            break
    foot: list[Band] = []
    for k in range(min(p.stamp_lines, len(bs) - 2 - len(head)), 0, -1):
        group = bs[-k:]
        if fits(group, band_gap(bs[-k - 1], group[0])) and min(l.box[1] for b in group for l in b) >= (1 - p.margin_share) * page_height:
            foot = [[l for b in group for l in b]]
            break
    return head, foot


def page_furniture(lines: Sequence[TextLine], h: float, p: LayoutParams,
                   running: tuple[set[str], set[str]] = (set(), set())):
    """(head, foot) of one page set among others on an image, each a band or None.

    Inside an image a story's heading or a credit line may sit at a block's edge too, so the evidence
    is stronger than at the image's margins: pieces at both ends of the page with a page number (not
    a year); one piece across it starting or ending with one; at the foot a lone page number at the
    page's edge or centred, or a copyright or "created using" line; or a band repeating a piece of the
    image's own running head (foot), `running`, that carries a year or page number. All in body type,
    thin, set apart from the text by `page_apart` (a lone line: `margin_apart`)."""
    bs = bands(lines)
    if len(bs) < 4:
        return None, None
    x0 = min(l.box[0] for l in lines)
    x1 = max(l.box[2] for l in lines)
    head = bs[0] if _strong(bs[0], False, x0, x1, h, p, running) is not None \
        and band_gap(bs[0], bs[1]) >= _strong(bs[0], False, x0, x1, h, p, running) else None
    need = _strong(bs[-1], True, x0, x1, h, p, running)
    foot = bs[-1] if need is not None and band_gap(bs[-2], bs[-1]) >= need else None
    return head, foot


def _strong(band: Band, foot: bool, x0: float, x1: float, h: float, p: LayoutParams,
            running: tuple[set[str], set[str]]) -> float | None:
    """How far from the text a page's head (foot) `band` must stand, or None if it is no furniture."""
    if not thin(band, h, p) or not body_type(band, h, p):
        return None
    if spread(band, x0, x1, h, PAGE_NO, piece=0.6):  # a narrow page: its head fills more of it
        return p.page_apart * h
    if len(band) <= 3 and running_keys([band]) & running[foot] and any(FOLIO.search(l.text) for l in band):
        return p.page_apart * h
    if len(band) != 1:
        return None
    line = band[0]
    mid = (x0 + x1) / 2
    centred = abs((line.box[0] + line.box[2]) / 2 - mid) <= max(2 * h, 0.15 * (x1 - x0))  # ragged text too
    if line.box[0] - x0 <= h and x1 - line.box[2] <= h and PAGE_NO.search(line.text):
        return p.margin_apart * h  # a running head the detector boxed in one piece across the page
    if foot and BARE_FOLIO.search(line.text) and (centred or line.box[0] - x0 <= h or x1 - line.box[2] <= h):
        return p.margin_apart * h
    if foot and FOOT_LINE.search(line.text) and (centred or line.box[0] - x0 <= h):
        return p.margin_apart * h
    return None
