"""Separators of centred alignment: a grid of short centred blocks (a paper's authors: name,
affiliation, place, email stacked under each other, three across, a second row of them below).

Tab stops (`columns.py`) are left edges; lines centred on one axis have none, and both their edges are
ragged (tesseract's tab finder knows centred alignment as a kind of its own). A *stack* is a run of
lines one under the next whose centres agree while both edges are ragged. Stacks side by side in a
*tier* (overlapping vertically) are parted by a separator each, so each is read whole, tier by tier.

A table whose columns are centred does not pass: its cells line up in rows of equal count across
three or more columns, where the stacks of a grid's tier hold different numbers of lines (one author
has two affiliations, another no email). Stat cards side by side hold equal counts too (a number, its
unit, two lines of caption each), but each stack's type shrinks down it, `card_size_ratio` from its
first line to its smallest: they are read one card at a time. A stack's lines follow each other at
`stack_leading` of the body height, or of the first line's height in a stack headed by a big number.
"""

from __future__ import annotations

from typing import Sequence

from ..records import TextLine
from .columns import Separator
from .furniture import bands
from .geometry import core
from .params import LayoutParams

Stack = list[TextLine]


def grid_separators(lines: Sequence[TextLine], h: float, p: LayoutParams) -> list[Separator]:
    """Separators between the stacks of each tier of a grid of centred blocks among `lines` (a run of
    whole bands of short lines), or none."""
    bs = bands(lines)
    short = [all(l.box[2] - l.box[0] <= p.stack_width * h for l in band) for band in bs]
    i = 0
    while i < len(bs):
        if not short[i]:
            i += 1
            continue
        j = i
        while j < len(bs) and short[j]:
            j += 1
        for a in range(i, min(i + 3, j)):  # (a title or a byline may open or close the run)
            for b in range(j, max(a, j - 3), -1):
                tiers = _tiers([l for band in bs[a:b] for l in band], h, p)
                if tiers is not None:
                    return [sep for tier in tiers for sep in _parting(tier)]
        i = j
    return []


def _stacks(lines: Sequence[TextLine], h: float, p: LayoutParams) -> list[Stack]:
    stacks: list[Stack] = []
    for line in sorted(lines, key=lambda l: l.box[1]):
        mid = (line.box[0] + line.box[2]) / 2
        home = next((s for s in stacks if abs((s[-1].box[0] + s[-1].box[2]) / 2 - mid) <= p.stack_axis * h
                     and core(s[-1])[0] < core(line)[0] <= core(s[-1])[1] + p.stack_leading * _lead(s, h, p)), None)
        if home is None:
            stacks.append([line])
        else:
            home.append(line)
    return stacks


def _lead(stack: Stack, h: float, p: LayoutParams) -> float:
    """The line height a stack's leading is measured in: the body height, or its first line's where
    that is `card_size_ratio` times taller (a card's big number: its unit and caption follow it at its
    own leading)."""
    return stack[0].height if stack[0].height >= p.card_size_ratio * h else h


def _tiers(lines: Sequence[TextLine], h: float, p: LayoutParams) -> list[list[Stack]] | None:
    """The grid's tiers of stacks, each left to right, or None if `lines` are no such grid."""
    if not p.stack_min_lines <= len(lines) <= p.stack_max_lines:
        return None
    stacks = _stacks(lines, h, p)
    if len(stacks) < 2 or any(len(s) < 2 for s in stacks):
        return None
    for s in stacks:
        lefts, rights = [l.box[0] for l in s], [l.box[2] for l in s]
        if max(lefts) - min(lefts) < p.stack_ragged * h or max(rights) - min(rights) < p.stack_ragged * h:
            return None  # lines aligned at one edge: a column of text, a table's column of numbers

    def span(s: Stack) -> tuple[float, float]:
        return core(s[0])[0], core(s[-1])[1]

    tiers: list[list[Stack]] = []
    for s in sorted(stacks, key=lambda s: span(s)[0]):
        if tiers and span(s)[0] < max(span(t)[1] for t in tiers[-1]):
            tiers[-1].append(s)
        else:
            tiers.append([s])
    for tier in tiers:
        tier.sort(key=lambda s: s[0].box[0])
        if any(max(l.box[2] for l in a) > min(l.box[0] for l in b) for a, b in zip(tier, tier[1:])):
            return None  # stacks side by side do not overlap
        if len(tier) >= 3 and len({len(s) for s in tier}) == 1 and not all(_card(s, p) for s in tier):
            return None  # rows of equal count across three or more columns: a table (not cards)
    return tiers if max(len(t) for t in tiers) >= 2 else None


def _card(stack: Stack, p: LayoutParams) -> bool:
    """A card: a small stack whose type shrinks down it (a big number over its unit over a caption);
    a table's column keeps one type size below its head."""
    return stack[0].height >= p.card_size_ratio * min(l.height for l in stack[1:])


def _parting(tier: list[Stack]) -> list[Separator]:
    y0 = min(l.box[1] for s in tier for l in s)
    y1 = max(l.box[3] for s in tier for l in s)
    return [Separator(max(l.box[2] for l in a), min(l.box[0] for l in b), y0, y1, 0.0, "grid of centred blocks", True)
            for a, b in zip(tier, tier[1:])]
