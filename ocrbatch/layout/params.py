"""Every threshold of the layout stages, in one place.

Lengths are in body-line heights (`h`: the height of an ordinary text line's box on the page, see
`geometry.body_height`), or in the local line height where a field says so, so the rules hold at any
resolution and for any type size (poppler's TextOutputDev measures its gaps in the local font size the
same way). Shares are fractions in 0..1.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LayoutParams:
    # -- lines: what the detector handed over, cleaned ------------------------------------------------
    stamp_aspect: float = 4.0  # a box this many times taller than wide runs up the page: a margin stamp ...
    stamp_margin: float = 0.12  # ... when it lies in the outer share of the page's width at either side

    # -- columns: separators from whitespace and tab stops (Breuel 2002; Smith 2009) -------------------
    tab_tolerance: float = 0.35  # pieces whose left ink edges agree within this start at one tab stop
    tab_min_lines: int = 3  # a tab stop needs this many pieces starting at it, one under the other
    tab_clearance: float = 0.05  # a piece starting this far left of a tab stop runs across it
    edge_quantile: float = 0.8  # the share of a column's line ends (widths) that tell its edge (width)
    gutter_min: float = 0.25  # narrowest white strip left of a tab stop that can part two columns
    seam_overlap: float = 0.5  # a left column's piece may end this far past the tab stop (padded boxes touching)
    hug: float = 3.0  # lines ending this near a separator's left edge, or starting this near its tab stop, hug it
    merged_words: int = 6  # a line run across a gutter holds at least this many words
    next_row: float = 1.6  # the next row of text lies this near (centre to centre)
    merged_reach: float = 1.6  # a line run across a gutter this near (centre to edge) where its separator stops is cut
    gutter_reach: float = 8.0  # a piece ending within this of the strip borders it on the left ...
    gap_reach: float = 1.25  # ... (that gap, this many times the median gap left of the stop's lines) ...
    gutter_reach_max: float = 20.0  # ... or within the usual gap left of the tab stop's lines, up to this
    gutter_min_left: int = 2  # pieces that must border a separator on its left
    section_break: float = 2.0  # a white stretch this tall down one side of a separator breaks its column ...
    section_level: float = 0.6  # ... and level with one on the other side (within this), around a title, ends a section
    title_apart: float = 0.8  # ... a title standing this far (core to core) from the lines above and below it
    row_centre: float = 0.3  # pieces whose centres are this near (in the taller's height) lie on one row
    cell_pairing: float = 0.7  # a strip whose bordering pieces pair up row by row on both sides this often ...
    cell_short: float = 12.0  # ... and whose left pieces are nearly all narrower than this (in their own line height) ...
    cell_words: int = 4  # ... and hold fewer words than this: a gap between a table's cells
    marker_chars: int = 2  # pieces left of a strip mostly this short are markers (bullets, line numbers) ...
    marker_size_ratio: float = 2.5  # ... and may be this much smaller than the line they stand on
    gutter_ratio: float = 1.25  # ... unless the strip is this many times wider than the rows' other gaps (a card's gutter)
    cell_numeric: float = 0.6  # a strip left of pieces this often with no word (amounts, figures, codes) parts cells

    # -- grids: separators of centred alignment (a paper's author blocks) -------------------------------
    stack_width: float = 16.0  # the lines of a grid's blocks are at most this wide
    stack_axis: float = 0.5  # lines of one centred block have centres this close
    stack_leading: float = 1.2  # ... and follow each other this closely (core to core)
    stack_ragged: float = 0.3  # both edges of a centred block vary by at least this
    stack_min_lines: int = 6  # a grid holds at least this many lines ...
    stack_max_lines: int = 80  # ... and at most this many

    # -- blocks: rows joined into blocks by type size, leading and alignment (poppler) ------------------
    row_size_ratio: float = 1.6  # pieces on one row whose heights differ more are apart (a title beside body text;
    # figures and capitals lack the descenders of words, so their boxes are lower)
    row_touch: float = 0.25  # a block's last row may reach this far (in the row's height) into the next one
    row_level: float = 0.5  # rows whose tops are this near (in the row's height) are level
    block_leading: float = 1.0  # largest white space between two rows of a block, in the local line height
    block_size_ratio: float = 1.3  # rows of one block differ in line height by at most this factor
    block_indent: float = 2.5  # a row may start this far left or right of its block's edge (indents, lists)
    block_overhang: float = 1.0  # a row under a block of two rows or more may reach past its sides this far

    # -- order: a partial order of blocks, then a topological sort (Breuel 2003) ------------------------
    x_overlap: float = 1.0  # blocks overlapping horizontally by more than this are one above the other
    y_overlap: float = 0.3  # blocks sharing this share of the smaller height are side by side
    blank_band: float = 3.0  # a white band this tall across a region parts what lies above and below
    page_gutter: float = 3.0  # a white strip this wide down a whole region parts pages set side by side
    page_min_lines: int = 8  # a page of a sheet holds at least this many lines, mostly of prose
    prose_words: int = 4  # a line of prose has at least this many words ...
    prose_width: float = 6.0  # ... and is at least this wide
    prose_share: float = 0.5  # running text has at least this share of such lines

    # -- furniture: running heads and feet, page numbers ------------------------------------------------
    margin_share: float = 0.15  # a running head (foot) lies in this top (bottom) share of the page
    margin_apart: float = 1.5  # ... set apart from the text by at least this
    margin_apart_spread: float = 0.8  # ... or this, when set at both margins with a page number
    page_apart: float = 1.2  # the head or foot of one page of several on a sheet stands this far from its text
    band_thin: float = 2.5  # a band of furniture is at most this tall
    stamp_lines: int = 4  # a notice at the top or foot has at most this many close-set lines
    stamp_leading: float = 0.8  # ... spaced less than this apart
    title_type: float = 1.3  # furniture is in body type: its median piece at most this tall ...
    title_type_max: float = 1.5  # ... and none taller than this

    # -- tables and figures -----------------------------------------------------------------------------
    label_gap: float = 10.0  # a lone number this far (in its line height) left of the rest of its row is a tick label
    figure_label_chars: int = 6  # a chart's tick or legend label is at most this long ...
    figure_share: float = 0.6  # ... and a block whose rows are mostly such labels is a figure's text


PARAMS = LayoutParams()
