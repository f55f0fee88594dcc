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

    # -- lines: a line the detector ran across a narrow gutter, cut back (`lines.split_merged`) --------
    merged_width: float = 10.0  # such a line is at least this wide (and holds `merged_words`) ...
    merged_height: float = 1.2  # ... in body type, at most this tall (a title across the columns is larger)
    merged_near: float = 6.0  # the columns' lines that show its gutter lie this near above or below it ...
    merged_touch: float = 3.2  # ... some on the rows right next to it (a paragraph across stands a space apart) ...
    merged_narrower: float = 0.8  # ... each narrower than this share of it ...
    merged_column: float = 6.0  # ... at least this wide, ending (starting) at least this far inside its ends ...
    merged_lines: int = 3  # ... and at least this many on each side of the gutter
    merged_edge: float = 1.0  # lines start (end) at one edge within this
    merged_ragged: float = 2.0  # ... a ragged right edge within this
    paragraph_indent: float = 2.0  # a paragraph's first line is indented at most this
    merged_quantile: float = 0.1  # the gutter runs from where all but this share of the left column's lines end
    # to where this share of the right column's lines start; white (no wider than `merged_gutter`)
    merged_part_words: int = 3  # each part of a line cut back holds at least this many words ...
    merged_tail_words: int = 2  # ... the last column's at least this many (a paragraph's last line ending in it)
    merged_rounds: int = 4  # stacks of such lines are cut from their clean ends inwards: passes at most
    across_reach: float = 2.0  # a line across the gutter on a row this near (`across_rows`) reaching this far
    across_rows: float = 2.5  # left of it keeps the line whole (a title, a paragraph across the columns) ...
    across_share: float = 0.5  # ... or, among three columns, at least this share of the line's width, in body type
    word_gap: float = 1.0  # pieces of one line the detector boxed apart lie at most this far apart
    word_gap_max: float = 2.0  # the page's widest word gap (`evidence.widest_word_gap`): among gaps between
    word_gap_quantile: float = 0.9  # pieces of a row under this, this quantile, and at least `word_gap_floor`;
    word_gap_floor: float = 3.0  # a row is cut across a wider
    wide_gap_rows: int = 2  # gap unless it is a cell border: level pieces, their white lined up on this many rows
    short_line: float = 2.0  # a paragraph's short last line stops this far before the gutter

    # -- columns: separators from whitespace and tab stops (Breuel 2002; Smith 2009) -------------------
    tab_tolerance: float = 0.35  # pieces whose left ink edges agree within this start at one tab stop
    tab_min_lines: int = 3  # a tab stop needs this many pieces starting at it, one under the other
    tab_clearance: float = 0.05  # a piece starting this far left of a tab stop runs across it ...
    tab_lead: float = 0.2  # ... unless one of its lines (x is its lines of prose's leftmost start; a short
    # piece starting more than this before them is no line of it: an equation's piece set across the columns)
    edge_quantile: float = 0.8  # the share of a column's line ends (widths) that tell its edge (width)
    gutter_min: float = 0.25  # narrowest white strip left of a tab stop that can part two columns
    seam_overlap: float = 0.5  # a left column's piece may end this far past the tab stop (padded boxes touching)
    hug: float = 3.0  # lines ending this near a separator's left edge, or starting this near its tab stop, hug it
    merged_words: int = 6  # a line run across a gutter holds at least this many words
    merged_gutter: float = 3.0  # ... across a gutter at most this wide (the detector joins no wider white)
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
    # a strip parts two flows of text only on evidence (`columns.flows_apart`); else it parts cells:
    flow_offsets: float = 0.25  # rows off each other (`evidence.rows_apart`): this share of a side's pieces that
    flow_offset_min: int = 2  # have pieces beside them, and at least this many, share no row with those pieces
    mono_chars: int = 6  # monospaced type (`evidence.monospaced`): pieces of this many characters or more ...
    mono_pieces: int = 8  # ... at least this many of them ...
    mono_quantile: float = 0.8  # ... all but the rest of this share ...
    mono_spread: float = 0.06  # ... with advances per character within this of their median ...
    mono_margin: float = 0.7  # ... and their median spread under this share of a proportional face's
    flow_width: float = 12.0  # prose on a side: its lines nearly all this wide (in their own line height) ...
    flow_words: int = 4  # ... or most of them this many words long
    across_ratio: float = 1.0  # cells side by side a gap apart at most this many times their row's other gaps
    # read across: no separator runs on past its lines through them (a table set across the columns)
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
    card_size_ratio: float = 1.5  # stacks of equal count whose first line is this many times taller than their
    # smallest are cards (a number over its unit and caption), read one by one; else a centred table

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
    chain_blocks: int = 3  # narrow blocks centred on one axis one under the next, at least this many ...
    chain_gap: float = 5.0  # ... at most this far apart: a chain (a flowchart's boxes), read whole beside a note
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

    # -- paragraphs, headings and lists in the ordered rows (`paragraphs.build_blocks`) -------------------
    edge_share: float = 0.1  # a column's text edges: where all but this share of its rows start (end) ...
    edge_rows: int = 3  # ... of at least this many rows (a running head, a lone title: the page's edges)
    full_row: float = 2.0  # a row ending this near its column's right edge is full (its text wrapped) ...
    full_share: float = 0.06  # ... or within this share of the column's width
    lead_max: float = 2.0  # the page's leading: the median space under this between rows of a column ...
    lead_none: float = 0.5  # ... (this when no two rows tell it) ...
    break_extra: float = 0.35  # ... a paragraph breaks at a space wider by this ...
    break_min: float = 0.9  # ... and at least this
    form_gap: float = 1.5  # text this far apart on a row is in cells (label, value): a line of its own
    heading_words: int = 14  # a heading: at most this many words ...
    heading_chars: int = 2  # ... at least this many characters, in one cell (`table_cell_gap`) ...
    heading_tall: float = 1.25  # ... in type this tall, set apart (or `heading_big` tall anywhere)
    heading_big: float = 1.5  # (a row under this tall across `heading_width` of its column is prose)
    heading_width: float = 0.8
    heading_1: float = 1.6  # type this tall: a heading of level 1; `heading_2` tall: level 2; else 3
    heading_2: float = 1.35
    heading_depth: int = 4  # numbered sections ("2.1.3") give levels this deep at most
    heading_space: float = 0.6  # set apart: a paragraph's break above it and this below
    heading_far: float = 9.0  # (the space above or below a row with no row there in its column)
    heading_wrap: float = 0.8  # a heading wrapped over two rows: its rows this near
    runin_tall: float = 1.12  # a capitalised line set apart in type this tall, of at most `runin_words`:
    runin_words: int = 8  # a run-in section title (level 3)
    para_shrink: float = 0.7  # rows of one paragraph: the type size of one row to the last's within these
    para_grow: float = 1.45
    para_indent: float = 0.8  # a row starting this far right of its paragraph's start begins a new one ...
    para_outdent: float = 1.0  # ... or this far left of it
    item_indent: float = 0.5  # rows indented under a list item from this ...
    item_indent_max: float = 6.0  # ... to this carry it on

    # -- tables (`tables.find_tables`): rows aligned in columns, with table evidence ----------------------
    table_rows: int = 3  # a table: at least this many rows ...
    table_columns: int = 3  # ... in at least this many columns (two, label and value, are a form) ...
    table_column_rows: int = 2  # ... each used by at least this many rows
    table_cell_gap: float = 1.0  # text this far apart on a row is in two cells
    table_column_gap: float = 0.3  # a table's columns are parted by white at least this wide
    table_break: float = 1.5  # a white space this tall ends a table ...
    table_lone_rows: int = 1  # ... and so does a run of more single-cell rows than this
    table_filled: float = 0.5  # table evidence: at least this share of its cells filled ...
    table_wordy: float = 0.5  # ... and at most this share of them ...
    table_cell_words: int = 4  # ... of this many words or more (prose in columns fills them with lines)
    label_reach: float = 0.6  # a form's value typed in this near (middle to middle) a label's row, right of it, is on it
    form_labels: float = 0.6  # rows this often starting with a label ("NAME:") are a form's, lines, never a table;
    # a strip with pieces this often labels right of it parts a form's pairs, never columns (`columns.flows_apart`)
    head_leading: float = 1.3  # a table's first rows with no figure in them, this near (centre to centre), are its head ...
    head_figures: float = 0.5  # ... where at least this share of its rows hold a figure
    wrap_pitch: float = 0.9  # a one-cell row closer than this share of the rows' median pitch under a row: a wrapped cell

    # -- lines: widely set type (a typewriter, a monospaced font) boxed in pieces, joined (`spaced.py`) ------
    spaced_rows: int = 5  # a strip under a line height wide, white down this many rows, is a gutter (not word spaces by chance)
    spaced_pair: float = 0.25  # pieces of one row have centres this near (in the smaller height) ...
    spaced_size_lo: float = 0.7  # ... and heights in this ratio, from ...
    spaced_size_hi: float = 1.4  # ... to this; they are a word space apart: under a line height
    spaced_tall: float = 1.5  # a piece taller than this is a title, never widely set body type
    spaced_next: float = 2.5  # the next row above or below lies this near (centre to centre)
    spaced_level: float = 0.3  # pieces of that row have centres this near
    spaced_align: float = 0.3  # lines of columns start and end within this of each other, row after row ...
    spaced_wide: float = 4.0  # ... and are at least this wide
    spaced_reach: float = 0.5  # a row's piece ends (starts) at most this far inside the strip to be its side

    # -- boxes and words, as every stage sees them ------------------------------------------------------
    box_pad: float = 0.06  # a detector box is padded a side by this share of its height (`geometry.ink`)
    core_margins: float = 0.5  # gaps between rows are measured between boxes' cores (middle halves): this
    # much of a box's height (a quarter each side) is added back where a gap is compared with a leading
    word_letters: int = 3  # a word has at least this many letters ...
    wordy_share: float = 0.5  # ... and a piece of words is at least this share letters (amounts, dates, codes are not)

    # -- tables and figures -----------------------------------------------------------------------------
    label_gap: float = 10.0  # a lone number this far (in its line height) left of the rest of its row is a tick label
    figure_label_chars: int = 6  # a chart's tick or legend label is at most this long ...
    figure_share: float = 0.6  # ... and a block whose rows are mostly such labels is a figure's text


PARAMS = LayoutParams()
