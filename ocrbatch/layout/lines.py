"""The lines stage: the detector's boxes made into the text lines the later stages expect.

- boxes with no text, and stamps running up a side margin (unless furniture is kept), go;
- a line the detector ran across a narrow gutter is cut back into its two (or three) columns' lines,
  where the lines around it stop and start again at the gutter (`split_merged`);
- pieces of one line of widely set type, boxed apart at its wide word spaces, are joined again
  (`spaced.join_spaced`).
"""

from __future__ import annotations

from ..records import TextLine
from .furniture import is_margin_stamp
from .geometry import body_height, run_on
from .params import LayoutParams
from .spaced import join_spaced


def clean_lines(lines: list[TextLine], width: float, keep_furniture: bool, p: LayoutParams) -> list[TextLine]:
    """The page's lines ready for layout: text only, margin stamps out (unless kept), merged lines cut
    back at their gutters, widely set lines joined."""
    lines = [l for l in lines if l.text.strip()]
    if not keep_furniture:
        lines = [l for l in lines if not is_margin_stamp(l, width, p)]
    if not lines:
        return []
    lines = split_merged(lines, body_height(lines), p)
    return join_spaced(lines, body_height(lines), p)


def split_merged(lines: list[TextLine], h: float, p: LayoutParams) -> list[TextLine]:
    """Lines the detector ran across a narrow gutter, cut back into their two columns' lines.

    Such a box starts where the left column's lines start and ends where the right column's lines
    end, and the lines just above and below it stop short of a narrow strip and start again after it,
    at the same places. A title or a wide equation across the gutter is centred, or has no
    column lines around it at both sides, and stays whole; so do the lines of a paragraph set across
    both columns right under or over them, which end on a short last line with nothing beside it."""
    # A line cut apart gives its neighbours' test two more column lines at once, so a stack of
    # merged lines is cut from its clean end inwards: top down, then bottom up, and again.
    lines = list(lines)
    for rnd in range(p.merged_rounds):
        before = len(lines)
        for line in sorted(lines, key=lambda l: l.box[1], reverse=rnd % 2 == 1):
            parts = _split_one(line, lines, h, p)
            if len(parts) > 1:
                i = next(i for i, l in enumerate(lines) if l is line)
                lines[i:i + 1] = parts
        if len(lines) == before and rnd >= 1:
            break
    return lines


def _split_one(line: TextLine, lines: list[TextLine], h: float, p: LayoutParams) -> list[TextLine]:
    parts = _split_two(line, lines, h, p)
    return parts if len(parts) > 1 else _split_columns(line, lines, h, p)


def _lines_near(line: TextLine, lines: list[TextLine], h: float, left: float, p: LayoutParams) -> list[TextLine]:
    """Other lines within `merged_near` above or below `line`, inside its span (from `left` before its
    start to `merged_edge` past its end) and clearly narrower than it (`merged_narrower`)."""
    x0, y0, x1, y1 = line.box
    cy = (y0 + y1) / 2
    return [l for l in lines if l is not line and abs((l.box[1] + l.box[3]) / 2 - cy) <= p.merged_near * h
            and l.box[0] >= x0 - left * h and l.box[2] <= x1 + p.merged_edge * h
            and l.box[2] - l.box[0] < p.merged_narrower * (x1 - x0)]


def _cut_text(line: TextLine, a: float, b: float) -> tuple[str, str]:
    """The line's text cut at the word boundary nearest the gutter between a and b, placing characters
    evenly in the box."""
    x0, x1 = line.box[0], line.box[2]
    at = len(line.text) * ((a + b) / 2 - x0) / (x1 - x0)
    spaces = [i for i, ch in enumerate(line.text) if ch == " "]
    cut = min(spaces, key=lambda i: abs(i - at))
    return line.text[:cut].strip(), line.text[cut:].strip()


def _split_two(line: TextLine, lines: list[TextLine], h: float, p: LayoutParams) -> list[TextLine]:
    """A line run across the gutter of two columns whose lines stop and start at its ends."""
    x0, y0, x1, y1 = line.box
    if not _mergeable(line, h, p):
        return [line]
    edge, column = p.merged_edge * h, p.merged_column * h
    near = _lines_near(line, lines, h, p.merged_edge, p)
    left = [l for l in near if abs(l.box[0] - x0) <= edge and l.box[2] <= x1 - column]
    right = [l for l in near if l.box[0] >= x0 + column and abs(l.box[2] - x1) <= p.merged_ragged * h]
    if len(left) < p.merged_lines or len(right) < p.merged_lines \
            or not (_touching(left, line, h, p) and _touching(right, line, h, p)):
        return [line]
    b = _quantile([l.box[0] for l in right], p.merged_quantile)
    # (the left column's lines end before the right one's start: a line below run across the gutter too
    # is none of them)
    a = _quantile([l.box[2] for l in left if l.box[2] <= b + edge] or [x1], 1 - p.merged_quantile)
    # padded boxes of the two columns may overlap a little across a narrow gutter
    cy = (y0 + y1) / 2
    # a line across the strip on a neighbouring row (a title, a wide equation, a paragraph across the
    # columns; not another line merged the same way, boxed whole or in pieces) keeps it whole
    if not 0 <= b - a <= p.merged_gutter * h or any(
            l.box[0] < min(a, b) - p.across_reach * h and l.box[2] > max(a, b) + edge
            and abs((l.box[1] + l.box[3]) / 2 - cy) <= p.across_rows * h
            and not (abs(l.box[0] - x0) <= edge
                     and abs(run_on(l, lines, p.word_gap * h, p.row_centre, x1 + edge) - x1) <= edge)
            for l in lines if l is not line):
        return [line]
    if _paragraph_across(line, lines, h, a, p):
        return [line]
    head, tail = _cut_text(line, a, b)
    if len(head.split()) < p.merged_part_words or len(tail.split()) < p.merged_part_words:
        return [line]
    return [TextLine(head, (x0, y0, a, y1), line.score), TextLine(tail, (b, y0, x1, y1), line.score)]



def _split_columns(line: TextLine, lines: list[TextLine], h: float, p: LayoutParams) -> list[TextLine]:
    """A line run across two or three columns inside a stretch of such lines, cut at every gutter
    that the lines around it show."""
    x0, y0, x1, y1 = line.box
    if not _mergeable(line, h, p):
        return [line]
    cy = (y0 + y1) / 2
    edge, indent, ragged = p.merged_edge * h, p.paragraph_indent * h, p.merged_ragged * h
    near = _lines_near(line, lines, h, p.paragraph_indent, p)
    # a line of body type that ends where several lines around it end, at a column's right edge (a
    # title across the columns is set larger, or stops short of that edge)
    # (or a column's paragraph ending short in the right column, run together with the left
    # column's line: it starts at the left column's edge, and the columns are seen both above and
    # below it, so it is no full-width paragraph's last line under or over the columns)
    ends_at_edge = sum(1 for l in near if abs(l.box[2] - x1) <= edge) >= p.merged_lines
    if y1 - y0 > p.merged_height * h \
            or not (ends_at_edge or sum(1 for l in near if abs(l.box[0] - x0) <= edge) >= p.merged_lines):
        return [line]
    if not ends_at_edge:  # the right column's lines reach past this line's end
        near = [l for l in lines if l is not line and abs((l.box[1] + l.box[3]) / 2 - cy) <= p.merged_near * h
                and x0 - indent <= l.box[0] <= x1 - ragged and l.box[2] - l.box[0] < p.merged_narrower * (x1 - x0)]
    # A gutter inside the line: several lines nearby start at one place b (the next column's edge)
    # and several end just before it (the column's right edge). With three columns run together,
    # the leftmost gutter is cut first and the rest of the line is looked at again.
    # (a paragraph's last line may end a word or two into the last column)
    column = p.merged_column * h
    starts = sorted(l.box[0] for l in near if x0 + column <= l.box[0] <= x1 - (column if ends_at_edge else ragged))
    for s0 in starts:
        cut = _gutter_at(line, s0, near, lines, ends_at_edge, h, p)
        if cut is None:
            continue
        a, b = cut
        head, tail = _cut_text(line, a, b)
        if len(head.split()) < p.merged_part_words \
                or len(tail.split()) < (p.merged_part_words if ends_at_edge else p.merged_tail_words):
            continue
        return [TextLine(head, (x0, y0, a, y1), line.score)] + \
            _split_columns(TextLine(tail, (b, y0, x1, y1), line.score), lines, h, p)
    return [line]


def _gutter_at(line: TextLine, s0: float, near: list[TextLine], lines: list[TextLine], ends_at_edge: bool,
               h: float, p: LayoutParams) -> tuple[float, float] | None:
    """(a, b): the gutter inside `line` before a column starting at s0, shown by the lines around it,
    or None."""
    x0, y0, x1, y1 = line.box
    cy = (y0 + y1) / 2

    def c(l: TextLine) -> float:
        return (l.box[1] + l.box[3]) / 2

    # column lines on both sides, wide (not a word the detector boxed apart); the left ones start at
    # the line's left edge or a paragraph indent past it
    edge, indent, column = p.merged_edge * h, p.paragraph_indent * h, p.merged_column * h
    right = [l for l in near if abs(l.box[0] - s0) <= edge and l.box[2] - l.box[0] >= column]
    left = [l for l in near if s0 - p.merged_gutter * h <= l.box[2] <= s0 + edge and -indent <= l.box[0] - x0 <= indent
            and l.box[2] - l.box[0] >= column]
    if len(right) < p.merged_lines or len(left) < p.merged_lines \
            or not (_touching(left, line, h, p) and _touching(right, line, h, p)):
        return None
    # (seen above and below it, or in the row just above it at the usual leading: the columns'
    # last row, not a full-width paragraph's last line, which follows a full-width line)
    if not ends_at_edge and not all(any(c(l) < cy for l in side) and any(c(l) > cy for l in side)
                                    for side in (left, right)) \
            and not all(any(0 < cy - c(l) <= p.next_row * h for l in side) for side in (left, right)):
        return None
    a = _quantile([l.box[2] for l in left], 1 - p.merged_quantile)
    b = _quantile([l.box[0] for l in right], p.merged_quantile)
    # padded boxes of the two columns may overlap a little across a narrow gutter; a line across
    # the strip (a title, a wide equation) keeps it whole, unless it is another line merged the
    # same way (the detector often runs a whole stretch of both columns' lines together)
    # (the last line of a full-width paragraph reaching past the gutter shows there is none)
    # (a short byline, or a title in larger type, centred over the columns a few lines off is
    # no such line)
    if not 0 <= b - a <= p.merged_gutter * h or any(
            l.box[0] < min(a, b) - edge and l.box[2] > max(a, b) + edge
            and not (abs(l.box[0] - x0) <= edge and abs(l.box[2] - x1) <= edge)
            and (l.box[2] - l.box[0] >= p.across_share * (x1 - x0) and l.height <= p.title_type * h
                 or abs(c(l) - cy) <= edge)
            for l in near) or _paragraph_across(line, lines, h, a, p):
        return None
    return a, b


def _paragraph_across(line: TextLine, lines: list[TextLine], h: float, a: float, p: LayoutParams) -> bool:
    """Whether `line` is a line of a paragraph set across the gutter at `a`, not lines of two columns
    run together: the lines of its extent around it, one per row at the usual leading, end on the
    paragraph's last line, a short line from the left edge that stops well before the gutter with
    nothing level with it further right. Where the columns run together, the right column goes on
    beside such a short line (or the detector runs it in too, and the row is of the same extent),
    unless the columns end there, the left one a line after the right: then both columns run full
    into the first of those lines from the row above, where a paragraph under the columns follows
    the end of at least one of them (a short line) and one over them follows no columns."""
    x0, x1 = line.box[0], line.box[2]
    tol, indent, lead, body = p.merged_edge * h, p.paragraph_indent * h, p.next_row * h, p.title_type * h

    def c(l: TextLine) -> float:
        return (l.box[1] + l.box[3]) / 2

    def row(l: TextLine, step: float) -> list[TextLine]:  # the lines of the row above (-1) or below (1)
        return [k for k in lines if 0 < step * (c(k) - c(l)) <= lead and k.height <= body]

    # (the first line of a paragraph may be indented, so the left edges agree within an indent)
    same = [l for l in lines if abs(l.box[2] - x1) <= tol and abs(l.box[0] - x0) <= indent and l.height <= body]
    first = last = line
    while above := [l for l in same if 0 < c(first) - c(l) <= lead]:
        first = max(above, key=c)
    while below := [l for l in same if 0 < c(l) - c(last) <= lead]:
        last = min(below, key=c)
    edge = min(x0, last.box[0])  # (or the indent, when the paragraph has only this line and its last)
    ends = [l for l in row(last, 1) if edge - indent <= l.box[0] <= edge + tol and l.box[2] < a - p.short_line * h]
    if not any(not any(abs(c(l) - c(end)) <= p.row_level * h and end.box[2] < l.box[0] < x1 for l in lines)
               for end in ends):
        return False
    over = row(first, -1)
    return not (any(abs(l.box[0] - edge) <= indent and a - tol <= l.box[2] <= a + tol for l in over)
                and any(l.box[0] >= a and l.box[2] >= x1 - tol for l in over))


def _touching(side: list[TextLine], line: TextLine, h: float, p: LayoutParams) -> bool:
    """Whether a column's line in `side` lies on the rows right above or below `line` (within
    `merged_touch`: a merged line sits inside its columns; a paragraph across them stands apart, a
    paragraph's space away)."""
    cy = (line.box[1] + line.box[3]) / 2
    return any(abs((l.box[1] + l.box[3]) / 2 - cy) <= p.merged_touch * h for l in side)


def _mergeable(line: TextLine, h: float, p: LayoutParams) -> bool:
    """A line wide and wordy enough to be two columns' lines run together (`merged_width`, `merged_words`)."""
    return line.box[2] - line.box[0] >= p.merged_width * h and len(line.text.split()) >= p.merged_words


def _quantile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]

