"""The order stage: blocks in reading order, from a partial order and a topological sort.

Breuel ("High performance document layout analysis", 2003; OCRopus implements it) orders text lines by
a partial order: a comes before b when they overlap horizontally and a is above, or when a lies wholly
left of b with nothing between them. Here the units are blocks (`blocks.py`), and "nothing between"
is told by the column separators (`columns.py`), so that columns are read one after the other only
where the page shows a gutter:

- blocks overlapping horizontally: the upper one first;
- blocks side by side (sharing some rows): the left one first;
- a block left of another across a separator that runs beside both: the left one first;
- otherwise (a grid of short blocks, centred author blocks, no gutter down the page): the upper first.

The relation is turned into a sequence by a topological sort that, among the blocks free to come next,
takes the top-most, left-most one (and breaks a cycle, should one occur, the same way).

Before that, the page is cut into *regions* at wide white space only: pages set side by side on one
image (a white strip down the whole region, `page_gutter` wide), and rows of pages or stories under
each other (a white band `blank_band` tall across the region, when each part is a page of prose).
Regions are read one after the other.
"""

from __future__ import annotations

import heapq
from typing import Sequence

from ..records import TextLine
from .blocks import Block
from .columns import Separator
from .geometry import core, gaps, ink
from .params import LayoutParams


def page_regions(lines: Sequence[TextLine], h: float, p: LayoutParams) -> list[list[TextLine]]:
    """`lines` cut at wide white space into regions read one after the other (see the module)."""
    lines = list(lines)
    if len(lines) < 2 * p.page_min_lines:
        return [lines]
    rows = _cut_rows(lines, h, p)
    if len(rows) > 1:
        return [r for part in rows for r in page_regions(part, h, p)]
    sides = _cut_sides(lines, h, p)
    if len(sides) > 1:
        return [r for part in sides for r in page_regions(part, h, p)]
    return [lines]


def _cut_rows(lines: list[TextLine], h: float, p: LayoutParams) -> list[list[TextLine]]:
    bands = gaps((core(l) for l in lines), p.blank_band * h)
    if not bands:
        return [lines]
    cuts = [(a + b) / 2 for a, b in bands]
    parts: list[list[TextLine]] = [[] for _ in range(len(cuts) + 1)]
    for l in lines:
        parts[sum(1 for c in cuts if sum(core(l)) / 2 > c)].append(l)
    return parts if all(is_prose_page(part, h, p) for part in parts) else [lines]


def _cut_sides(lines: list[TextLine], h: float, p: LayoutParams) -> list[list[TextLine]]:
    strips = gaps(((ink(l).box[0], ink(l).box[2]) for l in lines), p.page_gutter * h)
    for a, b in sorted(strips, key=lambda s: s[0] - s[1]):  # the widest first
        left = [l for l in lines if (l.box[0] + l.box[2]) / 2 < (a + b) / 2]
        right = [l for l in lines if (l.box[0] + l.box[2]) / 2 >= (a + b) / 2]
        if is_prose_page(left, h, p) and is_prose_page(right, h, p):  # (a folio out in the margin is no page)
            return [left, right]
    return [lines]


def is_prose_page(lines: Sequence[TextLine], h: float, p: LayoutParams) -> bool:
    """Running text, however set inside: many lines, most of them several words long and wide."""
    if len(lines) < p.page_min_lines:
        return False
    prose = sum(1 for l in lines if len(l.text.split()) >= p.prose_words and l.box[2] - l.box[0] >= p.prose_width * h)
    return prose >= p.prose_share * len(lines)


def precedes(a: Block, b: Block, seps: Sequence[Separator], h: float, p: LayoutParams) -> bool:
    """Whether block `a` is read before block `b` (see the module docstring)."""
    (ax0, ay0, ax1, ay1), (bx0, by0, bx1, by1) = a.box, b.box
    if min(ax1, bx1) - max(ax0, bx0) > p.x_overlap * h:
        return (ay0, ax0) < (by0, bx0)
    left, right = (a, b) if ax0 + ax1 < bx0 + bx1 else (b, a)
    trim = p.core_margins / 2 * min(a.size, b.size)  # boxes of consecutive rows touch: compare their middles
    shared = min(ay1, by1) - max(ay0, by0) - 2 * trim
    if shared > p.y_overlap * min(a.size, b.size) or any(s.between(left.box, right.box) for s in seps):
        return left is a
    return (ay0, ax0) < (by0, bx0)


def axis_chains(blocks: Sequence[Block], h: float, p: LayoutParams) -> list[int]:
    """For each block, the number of the chain it belongs to, or -1: a chain is `chain_blocks` or more
    narrow blocks (at most `stack_width` wide) one under the next, `chain_gap` apart at most, centred
    on one axis (within `stack_axis`): a flowchart's boxes, read top to bottom before a note beside them."""
    chain = [-1] * len(blocks)
    narrow = sorted((i for i, b in enumerate(blocks) if b.box[2] - b.box[0] <= p.stack_width * h),
                    key=lambda i: blocks[i].box[1])
    runs: list[list[int]] = []
    for i in narrow:
        mid = (blocks[i].box[0] + blocks[i].box[2]) / 2
        home = next((r for r in runs if abs((blocks[r[-1]].box[0] + blocks[r[-1]].box[2]) / 2 - mid) <= p.stack_axis * h
                     and 0 <= blocks[i].box[1] - blocks[r[-1]].box[3] <= p.chain_gap * h), None)
        if home is None:
            runs.append([i])
        else:
            home.append(i)
    for k, run in enumerate(r for r in runs if len(r) >= p.chain_blocks):
        for i in run:
            chain[i] = k
    return chain


def _beside_chain(members: Sequence[Block], b: Block, h: float, p: LayoutParams) -> int:
    """1 when block `b`, a note (rows starting at one edge, within `tab_tolerance`), lies right of the
    chain `members` level with one of them, -1 left of it, else 0 (a centred block beside is another
    author's, read by the grid's separators)."""
    starts = [r.x0 for r in b.rows]
    if len(starts) < 2 or max(starts) - min(starts) > p.tab_tolerance * h:
        return 0
    x0, x1 = min(m.box[0] for m in members), max(m.box[2] for m in members)
    level = any(min(m.box[3], b.box[3]) - max(m.box[1], b.box[1]) > p.y_overlap * min(m.size, b.size) for m in members)
    return 0 if not level else 1 if b.box[0] >= x1 else -1 if b.box[2] <= x0 else 0


def order_blocks(blocks: Sequence[Block], seps: Sequence[Separator], h: float, p: LayoutParams) -> list[Block]:
    """`blocks` in reading order: the partial order of `precedes`, topologically sorted; a chain of
    blocks on one axis (`axis_chains`) is read whole before (after) a block beside it on its right (left)."""
    n = len(blocks)
    after: list[list[int]] = [[] for _ in range(n)]
    needs = [0] * n
    chain = axis_chains(blocks, h, p)
    members: dict[int, list[Block]] = {}
    for i, c in enumerate(chain):
        if c >= 0:
            members.setdefault(c, []).append(blocks[i])
    for i in range(n):
        for j in range(i + 1, n):
            side = 0
            if (chain[i] >= 0) != (chain[j] >= 0):
                c, other = (chain[i], blocks[j]) if chain[i] >= 0 else (chain[j], blocks[i])
                side = _beside_chain(members[c], other, h, p) * (1 if chain[i] >= 0 else -1)
            if side:
                first, then = (i, j) if side > 0 else (j, i)
            else:
                first, then = (i, j) if precedes(blocks[i], blocks[j], seps, h, p) else (j, i)
            after[first].append(then)
            needs[then] += 1

    def key(i: int) -> tuple:
        return blocks[i].box[1], blocks[i].box[0], i

    free = [key(i) for i in range(n) if needs[i] == 0]
    heapq.heapify(free)
    done: list[int] = []
    taken = [False] * n
    while len(done) < n:
        if free:
            i = heapq.heappop(free)[2]
        else:  # a cycle: go on from the top-most, left-most block left
            i = min((k for k in range(n) if not taken[k]), key=key)
        if taken[i]:
            continue
        taken[i] = True
        done.append(i)
        for j in after[i]:
            needs[j] -= 1
            if needs[j] == 0 and not taken[j]:
                heapq.heappush(free, key(j))
    return [blocks[i] for i in done]
