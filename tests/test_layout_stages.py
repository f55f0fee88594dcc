"""The layout's stages one by one (ocrbatch/layout/page.py: lines → furniture → regions → columns → blocks →
order → markdown), and made-up pages of the kinds that broke the reading order on unseen documents: a
sidebar beside columns of other type size, a reference card in three columns, a chart beside a table,
a transcript with numbered lines, a flowchart, a two-column paper, a form, a slide. Synthetic boxes,
milliseconds each. Each stage's test fails when the stage is switched off (scripts/mutation_check.py)."""

from __future__ import annotations

import re

from ocrbatch.layout import lines_to_markdown
from ocrbatch.layout.blocks import build_blocks, rows_of
from ocrbatch.layout.columns import cut_merged, drop_ornaments, find_separators
from ocrbatch.layout.furniture import margin_bands
from ocrbatch.layout.grids import grid_separators
from ocrbatch.layout.lines import clean_lines
from ocrbatch.layout.order import order_blocks, page_regions
from ocrbatch.layout.page import layout_page
from ocrbatch.layout.params import PARAMS
from ocrbatch.records import TextLine

H = 26  # a body line's box, about 10 pt at 150 dpi
LEAD = 28
P = PARAMS


def line(text: str, x: float, y: float, w: float | None = None, h: float = H) -> TextLine:
    return TextLine(text, (x, y, x + (w if w is not None else 11 * len(text)), y + h))


def column(tag: str, x: float, y: float, n: int, width: float = 460, lead: float = LEAD, h: float = H) -> list[TextLine]:
    """n justified lines of prose, TAG0 ... TAGn-1, the last one short."""
    return [line(f"{tag}{i} words of running prose set in this column go on", x, y + i * lead,
                 w=width if i < n - 1 else width / 2, h=h) for i in range(n)]


def in_order(md: str, marks: list[str]) -> bool:
    at = [md.index(m) for m in marks]
    return at == sorted(at)


# -- stages ----------------------------------------------------------------------------------------

def test_lines_stage_drops_a_margin_stamp_and_cuts_a_line_run_across_a_gutter():
    stamp = TextLine("Downloaded from somewhere on 1 May", (10, 400, 36, 900))
    left, right = column("l", 100, 200, 8), column("r", 600, 200, 8)
    merged = TextLine(left[4].text + " " + right[4].text, (100, left[4].box[1], 1060, left[4].box[3]))
    lines = [stamp, merged] + [l for l in left + right if l.box[1] != merged.box[1]]
    out = clean_lines(lines, 1240, False, P)
    assert stamp not in out and stamp in clean_lines(lines, 1240, True, P)
    assert merged not in out and any(l.text.startswith("l4 ") and l.box[2] <= 570 for l in out)


def test_furniture_stage_finds_the_running_head_and_folio():
    body = column("b", 100, 300, 12, width=1000)
    head, foot = line("Journal of Layout 12 (2024)", 100, 60), line("7", 600, 1650, w=14)
    found_head, found_foot = margin_bands(body + [head, foot], H, 1750, P)
    assert found_head == [[head]] and found_foot == [[foot]]


def test_regions_stage_cuts_a_sheet_of_four_pages_into_pages():
    pages = [column(f"p{k}c", 80 + 800 * (k % 2), 100 + 600 * (k // 2), 10, width=600) for k in range(4)]
    regions = page_regions([l for p in pages for l in p], H, P)
    assert [sorted(l.text for l in r) for r in regions] == [sorted(l.text for l in p) for p in pages]


def test_columns_stage_finds_the_gutter_of_two_columns_and_not_the_gaps_of_a_table():
    seps = find_separators(column("l", 100, 200, 8) + column("r", 600, 200, 8), H, P)
    assert len(seps) == 1 and 540 <= seps[0].x0 <= seps[0].x1 <= 602
    table = [line(t, x, 200 + r * LEAD) for r in range(5) for t, x in ((f"item {r}", 100), ("red", 400), ("3.50", 700))]
    assert find_separators(table, H, P) == []


def test_columns_stage_never_parts_numbers_or_bullets_from_their_lines():
    numbered = [line(str(i + 1), 100, 200 + i * LEAD, w=20) for i in range(8)] + column("t", 150, 200, 8)
    bullets = [line("•", 100, 200 + i * LEAD + 6, w=10, h=14) for i in range(6)] + column("b", 130, 200, 6)
    raised = [line(f"{i})", 100, 200 + i * LEAD - 2, w=14, h=10) for i in range(6)] + column("s", 130, 200, 6)
    assert find_separators(numbered, H, P) == [] and find_separators(bullets, H, P) == []
    assert find_separators(raised, H, P) == []  # (markers set high, off their lines' middles)


def test_columns_stage_never_parts_a_column_of_amounts_from_its_items():
    # A receipt: each item's name on one line, its quantity and amounts on the next, to the right.
    lines = []
    for i, name in enumerate(("Teh Tarik", "Roti Canai", "Nasi Lemak", "Take Away")):
        lines += [line(name, 60, 300 + 44 * i, w=160), line(f"{i + 1} x 2.10 2.10 SR", 400, 322 + 44 * i, w=300)]
    md = lines_to_markdown(lines, 932, 1742)
    assert in_order(md, ["Teh Tarik", "1 x", "Roti Canai", "2 x", "Nasi Lemak", "3 x", "Take Away", "4 x"]), md


def test_columns_stage_ends_a_separator_at_a_title_between_balanced_sections():
    lines = column("a", 100, 200, 6) + column("b", 600, 200, 6)
    lines += [line("Second section", 130, 200 + 6 * LEAD + 20)]
    lines += column("c", 100, 200 + 8 * LEAD, 6) + column("d", 600, 200 + 8 * LEAD, 6)
    seps = find_separators(lines, H, P)
    assert len(seps) == 2 and all(s.sections for s in seps)
    assert seps[0].y1 < 200 + 6 * LEAD + 20 < seps[1].y0


def test_columns_stage_cuts_lines_run_across_the_gutter_where_the_separator_stops():
    left, right = column("l", 100, 200, 8), column("r", 600, 200, 8)
    top = [TextLine(f"{a.text} {b.text}", (100, a.box[1], 1060, a.box[3])) for a, b in zip(left[:2], right[:2])]
    lines = top + left[2:] + right[2:]
    seps = find_separators(lines, H, P)
    cut, seps = cut_merged(lines, seps, H, P)
    assert not any(l.box[2] - l.box[0] > 600 for l in cut) and seps[0].y0 <= 200


def test_columns_stage_parts_a_cards_columns_of_short_pairs_at_their_wider_gutter():
    # Pairs of a term and a two-word description, three columns of them: the gaps within the pairs
    # are narrower than the gutters between the columns.
    lines = []
    for c in range(3):
        for r in range(6):
            term = ("open", "save", "close", "print", "undo", "find")[r]
            lines += [line(f"{term}{c}", 60 + 560 * c, 200 + r * 44, w=80),
                      line(f"does {term}{c}", 60 + 560 * c + 200, 200 + r * 44, w=130)]
    md = lines_to_markdown(lines, 1754, 1240)
    assert "|" not in md and in_order(md, ["open0", "find0", "open1", "find1", "open2"]), md


def test_columns_stage_runs_a_separator_up_beside_a_columns_indented_first_lines():
    # The right column opens with two lines indented (an item carried over from the column before):
    # they start after its tab stop, yet lie beside the left column's first lines, apart from them.
    lines = column("l", 100, 200, 10)
    lines += [line(f"r{i} carried over item of the right column goes on", 660, 200 + i * LEAD, w=400) for i in range(2)]
    lines += [line(f"r{i} words of running prose set in this column go on", 600, 200 + i * LEAD, w=460)
              for i in range(2, 10)]
    md = lines_to_markdown(lines, 1240, 1750)
    assert in_order(md, ["l0 ", "l9 ", "r0 ", "r1 ", "r9 "]), md


def test_columns_stage_lets_no_line_cross_a_wide_gutter():
    # Two ragged columns a wide gutter apart, then a sentence that ends a little past where the right
    # column starts, then a table: the sentence ends the columns, the table stays whole.
    lines = [line(f"left{i} column line", 150, 250 + i * 29, w=320 + 5 * i) for i in range(4)]
    lines += [line(f"right{i} column line", 667, 250 + i * 29, w=320 - 5 * i) for i in range(4)]
    lines.append(line("The table below lists the animals we counted on the farm.", 150, 464, w=530))
    cells = [("Animal", "Description", "Price"), ("Gnat", "per gram", "13.65"), ("Gnu", "stuffed", "92.50")]
    lines += [line(t, x, 526 + 29 * r) for r, row in enumerate(cells) for t, x in zip(row, (312, 542, 771))]
    md = lines_to_markdown(lines, 1275, 1650)
    assert "| Gnat | per gram | 13.65 |" in md and in_order(md, ["left3", "right0", "The table"]), md


def test_columns_stage_finds_a_short_column_of_two_lines_beside_a_long_one():
    lines = column("l", 100, 200, 12) + column("r", 620, 200, 2)
    md = lines_to_markdown(lines, 1240, 1750)
    assert in_order(md, ["l0 ", "l11 ", "r0 ", "r1 "]), md


def test_columns_stage_drops_a_rule_of_circles_down_the_gutter():
    lines = column("l", 100, 200, 8) + column("r", 610, 200, 8)
    circles = [line("o", 582, 210 + 50 * i, w=14, h=16) for i in range(4)]
    seps = find_separators(lines + circles, H, P)
    assert drop_ornaments(lines + circles, seps, H, P) == lines


def test_grids_stage_parts_centred_author_blocks():
    blocks = [["Ann Ash", "Inst. of Clear Layout", "ann@ash.example"], ["Bo Birch", "Birch Lab", "Oslo", "bo@b.example"],
              ["Cy Cedar", "Cedar University", "Leeds"]]
    lines = [line(t, 240 + 380 * k - 5.5 * len(t), 140 + i * LEAD) for k, b in enumerate(blocks) for i, t in enumerate(b)]
    seps = grid_separators(lines, H, P)
    assert len(seps) == 2 and seps[0].x1 < seps[1].x0


def test_blocks_stage_joins_a_paragraph_and_parts_a_title_and_a_sidebar():
    title = line("A Title in Large Type", 300, 100, h=48)
    para = column("p", 300, 170, 6, width=700)
    side = [line(f"side {i}", 60, 170 + 24 * i, w=150, h=16) for i in range(5)]
    lines = [title] + para + side
    seps = find_separators(lines, H, P)
    blocks = build_blocks(rows_of(lines, seps, P), seps, H, P)
    assert sorted(len(b.rows) for b in blocks) == [1, 5, 6]


def test_blocks_stage_keeps_a_large_title_off_the_row_of_body_text_beside_it():
    lines = [line("Big Title", 100, 200, w=300, h=60), line("a caption in body type beside it", 700, 216, w=360)]
    md = lines_to_markdown(lines, 1240, 1750)
    assert not any("Big Title" in l and "caption" in l for l in md.splitlines()), md


def test_blocks_stage_starts_no_column_under_a_banner_across_the_columns():
    banner = [line("A boxed banner across them", 110, 176, w=1000)]
    lines = banner + column("a", 100, 206, 8, width=320) + column("b", 460, 206, 8, width=320) \
        + column("c", 820, 206, 8, width=320)
    page = layout_page(lines, 1240, 1750)
    assert [b.rows[0].text[:2] for b in page.blocks] == ["A ", "a0", "b0", "c0"]


def test_blocks_stage_marks_a_charts_labels_as_a_figure():
    labels = [line(str(v), 100, 200 + 30 * i, w=30) for i, v in enumerate((80, 60, 40, 20, 0))]
    blocks = build_blocks(rows_of(labels, [], P), [], H, P)
    assert [b.kind for b in blocks] == ["figure"]


def test_order_stage_reads_columns_in_turn_and_a_grid_row_by_row():
    lines = column("l", 100, 200, 3) + column("l", 100, 320, 3) + column("r", 600, 200, 3) + column("r", 600, 320, 3)
    seps = find_separators(lines, H, P)
    blocks = order_blocks(build_blocks(rows_of(lines, seps, P), seps, H, P), seps, H, P)
    assert [b.box[0] for b in blocks] == [100, 100, 600, 600]
    grid = [line(f"g{r}{c}", 100 + 300 * c, 200 + 90 * r, w=120) for r in range(2) for c in range(3)]
    ordered = order_blocks(build_blocks(rows_of(grid, [], P), [], H, P), [], H, P)
    assert [b.rows[0].text for b in ordered] == ["g00 g01 g02", "g10 g11 g12"]


def test_order_stage_reads_blocks_side_by_side_left_first_without_a_separator():
    side = [line(f"note {i}", 100, 212 + 20 * i, w=150, h=14) for i in range(3)]
    body = column("b", 400, 210, 5)
    blocks = build_blocks(rows_of(side + body, [], P), [], H, P)
    assert [b.rows[0].text[:4] for b in order_blocks(blocks, [], H, P)] == ["note", "b0 w"]


def test_tables_stage_needs_evidence_beyond_aligned_columns_of_prose():
    from ocrbatch.layout.geometry import Row
    from ocrbatch.layout.tables import find_tables

    rows = [Row([line(f"c{k} line {r} of running prose in three columns", 100 + 380 * k, 200 + r * LEAD, w=340)
                 for k in range(3)]) for r in range(6)]
    table = [Row([line(t, 100 + 380 * k, 500 + r * LEAD, w=60) for k, t in enumerate((f"r{r}", "yes", "3.50"))])
             for r in range(4)]
    assert find_tables(rows, H) == [] and len(find_tables(table, H)) == 1


def test_layout_page_gives_blocks_in_reading_order_with_what_set_them_apart():
    page = layout_page(column("l", 100, 200, 8) + column("r", 600, 200, 8), 1240, 1750)
    assert [b.rows[0].text[:2] for b in page.blocks] == ["l0", "r0"]
    assert len(page.separators) == 1 and all(b.why for b in page.blocks)


# -- kinds of page ---------------------------------------------------------------------------------

def test_sidebar_in_small_type_beside_a_title_panel_and_two_columns_is_read_whole_first():
    side = [line(f"nav{i} item", 60, 120 + 34 * i, w=140, h=18) for i in range(10)]
    title = [line("Annual Report of the River Council", 300, 110, w=800, h=48)]
    lines = side + title + column("L", 300, 220, 14, width=380) + column("R", 720, 220, 14, width=380)
    md = lines_to_markdown(lines, 1240, 1750)
    assert in_order(md, ["nav0", "nav9", "Annual Report", "L0 ", "L13 ", "R0 ", "R13 "]), md
    assert not any(re.search(r"L\d+ [^\n]*R\d+ ", l) for l in md.splitlines()), md


def test_landscape_reference_card_in_three_columns_reads_column_by_column_with_no_table():
    lines = []
    for c in range(3):
        x, y = 60 + 560 * c, 100
        for s in range(3):
            lines.append(line(f"Section{c}{s}", x, y, h=32))
            y += 44
            for e in range(5):
                term = ("open", "save", "close", "print", "undo")[e] + f"{c}{s}"
                lines += [line(term, x, y, w=90), line(f"d{c}{s}{e} does this thing here", x + 130, y, w=360)]
                y += LEAD
            y += 30
    md = lines_to_markdown(lines, 1754, 1240)
    marks = [f"Section{c}{s}" for c in range(3) for s in range(3)]
    assert "|" not in md and in_order(md, marks), md
    assert "open00 d000 does" in md.replace("\n", " "), md


def test_a_charts_labels_beside_a_table_stay_out_of_its_rows():
    chart = [line(str(v), 100, 200 + 50 * i, w=30) for i, v in enumerate((80, 60, 40, 20))]
    chart += [line(str(y), 160 + 90 * i, 420, w=50) for i, y in enumerate((2015, 2017, 2019))]
    table = [line(t, x, 200 + r * LEAD) for r, cells in enumerate([("Year", "Visits", "Trend")] +
                                                                  [(str(2015 + r), str(30 + r), "up") for r in range(6)])
             for t, x in zip(cells, (700, 850, 1000))]
    md = lines_to_markdown(chart + table, 1240, 1750)
    assert "| 2015 | 30 | up |" in md, md
    assert not any(re.search(r"\| (80|60|40|20) ", l) for l in md.splitlines()), md


def test_transcript_with_numbered_lines_keeps_each_number_with_its_line_and_no_table():
    lines = []
    for i in range(12):
        lines += [line(str(i + 1), 110, 250 + 32 * i + 4, w=12 * len(str(i + 1)), h=20),
                  line(f"speaker line {i} says something long enough to be prose here", 160, 250 + 32 * i, w=900)]
    md = lines_to_markdown(lines, 1275, 1651)
    assert "|" not in md, md
    assert all(f"{i + 1} speaker line {i} " in md.replace("\n", " ") for i in range(12)), md


def test_flowchart_boxes_are_read_top_to_bottom_with_no_table():
    boxes = ["Request arrives", "Is it complete?", "Check the budget", "Approve and file", "Tell the applicant"]
    lines = [line(t, 500 - 5.5 * len(t), 300 + 90 * i) for i, t in enumerate(boxes)]
    lines += [line("The office answers", 800, 425, w=220), line("within a week.", 800, 453, w=160)]
    md = lines_to_markdown(lines, 1275, 1651)
    assert "|" not in md and in_order(md, boxes), md
    assert "The office answers within a week." in md, md


def test_two_column_paper_reads_title_abstract_then_each_column():
    lines = [line("Reading Order on Pages of Two Columns", 300, 120, w=640, h=40)]
    lines += [line(f"Abstract{i} of the paper runs across the whole width of the page", 200, 190 + i * LEAD, w=860)
              for i in range(3)]
    lines += column("L", 100, 320, 20) + column("R", 620, 320, 20)
    md = lines_to_markdown(lines, 1275, 1651)
    assert in_order(md, ["Reading Order", "Abstract0", "Abstract2", "L0 ", "L19 ", "R0 ", "R19 "]), md


def test_form_labels_are_read_top_to_bottom_with_their_values():
    labels = ["Full name", "Street and number", "Town", "Postcode", "Telephone"]
    lines = [line(t, 150, 300 + 50 * i) for i, t in enumerate(labels)]
    lines += [line(f"value {i}", 520, 300 + 50 * i) for i in range(len(labels))]
    md = lines_to_markdown(lines, 1275, 1651)
    assert in_order(md, [f"{t} value {i}" for i, t in enumerate(labels)]), md


def test_slide_bullets_stay_with_their_items():
    lines = [line("Why we meet", 20, 20, h=34)]
    for i in range(4):
        lines += [line("•", 75, 190 + 60 * i + 6, w=14, h=14), line(f"item {i} of the slide", 100, 184 + 60 * i, w=500)]
    md = lines_to_markdown(lines, 756, 567)
    assert all(f"item {i} of the slide" in md for i in range(4)) and in_order(md, [f"item {i}" for i in range(4)]), md


def test_the_first_rows_of_two_columns_run_together_under_a_full_width_paragraph_are_cut_back():
    # A report page: an introduction across the page, the columns' headings, then two columns whose
    # first two rows the detector boxed as one line each. The introduction keeps the lines stage from
    # cutting them (a line across the strip nearby); the columns stage cuts them where its separator
    # stops, so each column is read whole.
    lines = [line(f"Intro{i} runs across the whole page as one paragraph of the report here", 100, 100 + i * LEAD,
                  w=960 if i == 0 else 620) for i in range(2)]
    lines += [line("Summary", 100, 180, w=110, h=30), line("Next steps", 600, 180, w=140, h=30)]
    left, right = column("l", 100, 230, 12), column("r", 600, 230, 12)
    lines += [TextLine(f"{a.text} {b.text}", (100, a.box[1], 1060, a.box[3])) for a, b in zip(left[:2], right[:2])]
    lines += left[2:] + right[2:]
    md = lines_to_markdown(lines, 1240, 1750)
    assert in_order(md, ["l0 ", "l1 ", "l11 ", "r0 ", "r1 ", "r11 "]), md
