"""One page's layout, stage by stage:

    lines → furniture → regions → columns → blocks → order → tables → markdown

each stage a function of this package, its thresholds in `params.LayoutParams`:
- lines (`lines.clean_lines`): the detector's boxes cleaned, merged lines cut back, spaced type joined;
- furniture (`furniture.margin_bands`, `furniture.page_furniture`): running heads and feet set aside;
- regions (`order.page_regions`): pages or stories parted by wide white space, read one after another;
- columns (`columns.find_separators`): the white strips left of tab stops that part columns;
- blocks (`blocks.rows_of`, `blocks.build_blocks`): rows, and blocks of rows by type size and leading;
- order (`order.order_blocks`): the partial order of blocks, topologically sorted;
- tables and markdown (`paragraphs.build_blocks`, `markdown.render`): paragraphs, headings, lists and
  tables within the ordered rows.

`layout_page` returns the ordered blocks with the separators that decided the cuts, which
`debug.draw_layout` draws for `--debug-layout`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from ..records import TextLine
from .blocks import Block, build_blocks, rows_of
from .columns import Separator, cut_merged, drop_ornaments, extend_separators, find_separators
from .grids import grid_separators
from .furniture import margin_bands, page_furniture, running_keys, says_furniture
from .geometry import Row, body_height
from .lines import clean_lines
from .order import is_prose_page, order_blocks, page_regions
from .params import PARAMS, LayoutParams


@dataclass
class PageLayout:
    width: int
    height: int
    h: float = 1.0  # the body line height
    blocks: list[Block] = field(default_factory=list)  # in reading order, furniture included
    separators: list[Separator] = field(default_factory=list)
    regions: list[tuple] = field(default_factory=list)  # the box of each region, in reading order
    verdicts: list[str] = field(default_factory=list)  # each region read as flow or records, and why


def layout_page(lines: Sequence[TextLine], width: int, height: int, keep_furniture: bool = False,
                p: LayoutParams = PARAMS) -> PageLayout:
    """The page's blocks in reading order (see the module docstring)."""
    page = PageLayout(width, height)
    lines = clean_lines(list(lines), width, keep_furniture, p)
    if not lines:
        return page
    h = page.h = body_height(lines)
    head, foot = margin_bands(lines, h, height, p)
    taken = {id(l) for band in head + foot for l in band}
    body = [l for l in lines if id(l) not in taken]
    page.blocks += [_furniture_block(band, "head", "furniture: band at the top", h, p) for band in head]
    regions = page_regions(body, h, p) if body else []
    running = (running_keys(head), running_keys(foot))
    for region in regions:
        page.blocks += _region_blocks(page, region, len(regions) > 1, running, h, p)
    page.blocks += [_furniture_block(band, "foot", "furniture: band at the foot", h, p) for band in foot]
    return page


def _furniture_block(band: list[TextLine], where: str, why: str, h: float, p: LayoutParams) -> Block:
    block = Block([Row(list(band))], why=why, column=(where,))
    block.kind = "furniture" if says_furniture(band, h, p) else "text"
    return block


def _region_blocks(page: PageLayout, region: list[TextLine], several: bool, running, h: float,
                   p: LayoutParams) -> list[Block]:
    """One region's blocks in reading order, with its own page's head and foot when the image holds
    several pages of prose."""
    out_head: list[Block] = []
    out_foot: list[Block] = []
    if several and is_prose_page(region, h, p):
        head, foot = page_furniture(region, h, p, running)
        if head or foot:
            taken = {id(l) for band in (head or [], foot or []) for l in band}
            region = [l for l in region if id(l) not in taken]
            out_head = [_furniture_block(head, "head", "furniture: a page's top band", h, p)] if head else []
            out_foot = [_furniture_block(foot, "foot", "furniture: a page's foot band", h, p)] if foot else []
    grid = grid_separators(region, h, p)
    weighed: list[str] = []
    found = find_separators(region, h, p, weighed)
    page.verdicts.append(_verdict(len(page.regions), found, grid, weighed))
    seps = extend_separators(region, found + grid, h, p)
    region, seps = cut_merged(region, seps, h, p)
    region = drop_ornaments(region, seps, h, p)
    page.separators += seps
    tag = len(page.regions)
    page.regions.append(_box(region))
    blocks = build_blocks(rows_of(region, seps, p, h), seps, h, p)
    for block in blocks:
        block.column = (tag, sum(1 for s in seps if s.x1 <= block.box[0] + h and s.between(
            (s.x0 - 1, block.box[1], s.x0, block.box[3]), block.box)))
        block.why = block.why or f"blocks: region {tag}, column {block.column[1]}"
    return out_head + order_blocks(blocks, seps, h, p) + out_foot


def _verdict(tag: int, found: Sequence[Separator], grid: Sequence[Separator], weighed: Sequence[str]) -> str:
    """One line for `--debug-layout`: whether region `tag` is read as flow (columns one after the
    other) or records (row by row, its gaps cell borders), and why (`evidence.py`)."""
    reasons: dict[str, list[str]] = {}  # each reason with the strips it was given for
    for w in weighed:
        where, _, why = w.partition(": ")
        reasons.setdefault(why or where, []).append(where if why else "")
    strips = "; ".join(f"{why} ({len(at)} strips, first {at[0]})" if len(at) > 1 else
                       f"{why} ({at[0]})" if at[0] else why for why, at in reasons.items()) \
        or "no white strip down it beside a tab stop"
    if found:
        kind = f"flow in {len(found) + 1} columns" + (f", {len(grid) + 1} centred stacks or cards read one by one"
                                                      if grid else "")
    elif grid:
        kind = f"flow, {len(grid) + 1} blocks side by side read one by one (centred stacks, cards)"
    elif any(" cells, " in w for w in weighed):
        kind = "records, read row by row (its gaps are cell borders)"
    else:
        kind = "flow in one column"
    return f"region {tag}: {kind} [{strips}]"


def _box(lines: Sequence[TextLine]) -> tuple:
    return (min(l.box[0] for l in lines), min(l.box[1] for l in lines),
            max(l.box[2] for l in lines), max(l.box[3] for l in lines))
