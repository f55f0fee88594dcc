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


def test_columns_stage_never_parts_amounts_set_half_a_row_below_their_items():
    # The amounts set a little under their items, at a tight leading: rows off each other, as two flows'
    # are, yet a column of amounts is a receipt's, read with its items.
    lines = []
    for i, name in enumerate(("Teh Tarik", "Roti Canai", "Nasi Lemak", "Take Away", "Milo Ais")):
        lines += [line(name, 60, 300 + 36 * i, w=160), line(f"{i + 1}.{i}0 SR", 300, 314 + 36 * i, w=120)]
    md = lines_to_markdown(lines, 932, 1742)
    assert in_order(md, ["Teh Tarik", "1.00", "Roti Canai", "2.10", "Nasi Lemak", "3.20", "Take Away", "4.30"]), md


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
    lines = [line(f"left{i} line of a ragged column of prose", 150, 250 + i * 29, w=320 + 5 * i) for i in range(4)]
    lines += [line(f"right{i} line of a ragged column of prose", 667, 250 + i * 29, w=320 - 5 * i) for i in range(4)]
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


# Label ... value pages (receipts, invoices, forms) as either detector boxes them: the small one often
# takes the colon into the value's box (": USER", so the values start at staggered places), the tiny one
# boxes the values alone, flush at one left edge, a tab stop down the page. Rows that pair one to one
# are a key-value list however their values line up: never two columns.
KEY_VALUES = {
    "invoice": [("Doc No.", "CS00010344"), ("Cashier", "USER"), ("Salesperson", ""), ("Ref.", ""), ("Item", "Qty"),
                ("Customer", "SUCI ALAM JAYA TRANSPORT"), ("Terms", ""), ("Currency", "RM")],
    "form": [("Full name", "Mara Linden"), ("Date of birth", "3 May 1988"), ("Street and number", "12 Long Street"),
             ("Town", "Riverside"), ("Telephone", ""), ("Email", "mara@example.org")],
    "receipt": [("Total Sales (Excluding GST)", "96.00"), ("Discount", "0.00"), ("Total GST", "5.76"),
                ("Rounding", "0.00"), ("Total Sales (Inclusive of GST)", "101.76"), ("Cash", "150.00"),
                ("Change", "48.24")],
}


def key_value_page(rows, h: float, gap: float, colon: bool, labels_right: bool, values_right: bool) -> list[TextLine]:
    """Labels from x=40 (or flush right against their values), values `gap` body heights after the
    longest label (flush left, or flush right after the longest value), a row every 1.08 heights, the
    values a little off their labels' rows as on a scan."""
    char, lead = 0.42 * h, 1.08 * h
    label_end = 40 + char * max(len(label) for label, _ in rows)
    value_x = label_end + gap * h
    value_end = value_x + char * max(len(value) + 2 for _, value in rows)
    out = []
    for i, (label, value) in enumerate(rows):
        y = 300 + i * lead
        x0 = label_end - char * len(label) if labels_right else 40
        out.append(TextLine(label, (x0, y, x0 + char * len(label), y + h)))
        if value:
            text = f": {value}" if colon else value
            w = char * len(text)
            x0 = value_end - w if values_right else value_x - (2 * char if colon else 0)
            dy = 0.03 * h * (i % 3)
            out.append(TextLine(text, (x0, y + dy, x0 + w, y + h + dy)))
    return out


def test_label_value_rows_are_read_row_by_row_whatever_the_widths_alignments_and_boxes():
    for kind, rows in KEY_VALUES.items():
        for h in (26, 47):  # a page at 150 dpi, a receipt scanned at 300
            for colon in (False, True):
                for gap, labels_right, values_right in ((1.5, False, False), (6, False, False), (6, False, True),
                                                        (1.0, True, False)):
                    lines = key_value_page(rows, h, gap, colon, labels_right, values_right)
                    md = lines_to_markdown(lines, int(36 * h), int(40 * h))
                    said = [l for l in md.splitlines() if l.strip()]
                    for label, value in rows:
                        line_ = next((l for l in said if label in l), "")
                        assert value in line_, (kind, h, colon, gap, labels_right, values_right, md)
                    assert in_order(md, [label for label, _ in rows]), md


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


# -- what makes a column, and what reads across one (issue 20, second round) -----------------------

def test_a_list_half_a_line_off_the_rows_of_the_column_beside_it_is_a_flow_of_its_own():
    # Short items at the column's own leading, each half a line lower than the column's rows: no prose on
    # the left, no other leading; only rows that do not align one to one tell two flows.
    items = [line(f"item{i}", 100, 214 + i * LEAD, w=120) for i in range(8)]
    md = lines_to_markdown(items + column("b", 300, 200, 8, width=700), 1240, 1750)
    assert in_order(md, ["item0", "item7", "b0 ", "b7 "]), md


def test_a_wide_equation_in_pieces_across_the_gutter_is_read_as_one_row_between_the_columns():
    # A piece of the equation starts a little before the right column's edge: it is no line of that
    # column, and the separator stops above and below the equation instead of running through it.
    lines = column("a", 100, 200, 6) + column("b", 620, 200, 6)
    eq = [("(a+b)", 260, 120), ("[xy]", 440, 160), ("+ yz", 613, 90), ("[wq]", 712, 120), ("(7)", 1030, 40)]
    lines += [line(t, x, 200 + 6 * LEAD + 20, w=w) for t, x, w in eq]
    lines += column("c", 100, 200 + 8 * LEAD, 6) + column("d", 620, 200 + 8 * LEAD, 6)
    md = lines_to_markdown(lines, 1240, 1750)
    assert "(a+b) [xy] + yz [wq] (7)" in md.replace("\n", " "), md
    assert in_order(md, ["a0 ", "a5 ", "b0 ", "b5 ", "(a+b)", "c0 ", "c5 ", "d0 ", "d5 "]), md


def test_a_column_line_whose_box_starts_inside_the_gutter_does_not_break_the_columns():
    # The right column's first line took a dot of a rule down the gutter into its box (it starts between
    # the columns); it stays a line of that column, the columns are read in turn.
    left, right = column("l", 100, 200, 8), column("r", 620, 200, 8)
    right[0] = line(right[0].text, 585, 200, w=495)
    md = lines_to_markdown(left + right, 1240, 1750)
    assert in_order(md, ["l0 ", "l7 ", "r0 ", "r7 "]), md


def test_balanced_sections_are_cut_at_their_title_when_a_right_line_starts_inside_the_gutter():
    lines = column("a", 100, 200, 6) + column("b", 620, 200, 6) + [line("Second section", 130, 200 + 6 * LEAD + 20)]
    below = column("c", 100, 200 + 8 * LEAD, 6) + column("d", 620, 200 + 8 * LEAD, 6)
    below[6] = line(below[6].text, 585, below[6].box[1], w=495)  # (d0: a dot in its box)
    md = lines_to_markdown(lines + below, 1240, 1750)
    assert in_order(md, ["a0 ", "a5 ", "b0 ", "b5 ", "c0 ", "c5 ", "d0 ", "d5 "]) and in_order(md, ["Second", "c0 "]), md


def test_a_line_over_a_wide_gap_beside_short_formulas_is_not_cut_back():
    # Short formulas on the left, lines of code on the right, far apart at other rows than theirs; the
    # sentence over them ends where the code ends: the detector does not run lines across so wide a gap.
    lines = [line("By using dollars you can escape to font corrected math mode here.", 180, 927, w=640)]
    lines += [line(f"NaOH{i}", 180, 980 + 60 * i, w=150, h=34) for i in range(4)]
    lines += [line(f"code line {i} of it", 445, 968 + 30 * i, w=380) for i in range(7)]
    md = lines_to_markdown(lines, 1241, 1754)
    assert "By using dollars you can escape to font corrected math mode here." in md, md


def test_a_title_across_four_columns_under_them_is_not_cut_back_at_a_gutter():
    # Four narrow columns end where a boxed title across the whole page starts; the title starts at the
    # first column's edge, so it is no row of the last two columns run together.
    cols = [column(f"k{c}", 100 + 270 * c, 200, 10, width=240) for c in range(4)]
    title = TextLine("An expanded title which breaks the text within a piece of news here",
                     (100, 200 + 10 * LEAD + 4, 1150, 200 + 10 * LEAD + 36))
    md = lines_to_markdown([l for c in cols for l in c] + [title], 1240, 1750)
    assert title.text in md.replace("\n", " "), md


def test_the_lines_stage_cuts_no_line_at_a_river_of_word_spaces():
    # Justified type whose word spaces line up down the column: the detector boxed some lines in two
    # pieces there, their ends and starts overlapping; a whole line of the column is no merged line.
    lines = []
    for i in range(8):
        y = 200 + i * LEAD
        if i % 2:
            lines += [line(f"p{i} first half of a line", 100, y, w=262), line(f"second half {i} here", 356, y, w=204)]
        else:
            lines.append(line(f"w{i} a whole line of the justified column goes on", 100, y, w=460))
    out = clean_lines(lines, 1240, False, P)
    assert all(any(l.text == w.text for l in out) for w in lines if w.text.startswith("w")), [l.text for l in out]


def test_stacked_rows_run_across_the_gutter_at_the_foot_of_two_columns_are_cut_back():
    # The last three rows of two columns boxed across the gutter, the middle one in two pieces (its second
    # piece a word space after the first, inside the right column): all three are cut back.
    left, right = column("l", 100, 200, 9), column("r", 600, 200, 9)
    top = left[:6] + right[:6]
    rows = [(left[6], right[6]), (left[7], right[7]), (left[8], right[8])]
    merged = [TextLine(f"{a.text} {b.text}", (100, a.box[1], 1060, a.box[3])) for a, b in rows[0:1] + rows[2:3]]
    a, b = rows[1]
    merged += [TextLine(f"{a.text} r7 words of", (100, a.box[1], 760, a.box[3])),
               TextLine("running prose set in this column go on", (766, a.box[1], 1060, a.box[3]))]
    md = lines_to_markdown(top + merged, 1240, 1750)
    assert in_order(md, ["l0 ", "l6 ", "l8 ", "r0 ", "r6 ", "r8 "]), md


def test_a_table_atop_the_right_column_beside_a_figures_labels_is_read_in_its_column():
    # A figure at the top of the left column (only its short labels are text), a table at the top of the
    # right column beside it: the gutter runs on up beside them, so the table is read after the left column.
    labels = [line("↑y", 300, 72, w=30), line("r0 = 1", 370, 118, w=70), line("φ0", 350, 244, w=40),
              line("R", 240, 322, w=25), line("C", 414, 373, w=25)]
    table = [line(t, x, 74 + r * 36) for r, cells in enumerate([("Run", "Speed", "Heat"), ("r11", "12.5", "103.4"),
                                                               ("r12", "24", "68.3")]) for t, x in zip(cells, (790, 910, 1010))]
    lines = labels + table + column("L", 70, 460, 20, width=540) + column("R", 662, 460, 20, width=540)
    md = lines_to_markdown(lines, 1275, 1651)
    assert in_order(md, ["L0 ", "L19 ", "Run", "R0 ", "R19 "]), md


def test_a_table_set_across_the_columns_over_them_is_not_cut_by_their_gutter():
    # The table's cells leave the gutter white under its head: its rows read across, so the separator of
    # the columns below does not run on up through them.
    head = line("Command Number Comments", 457, 205, w=318)
    cells = [(t, x) for t in ()]
    rows = [[("\\author", 463), ("100", 600), ("Author", 672)], [("\\table", 463), ("300", 600), ("For tables", 672)],
            [("\\tablex", 463), ("400", 600), ("For wider tables", 672)]]
    table = [line(t, x, 239 + 26 * r) for r, row in enumerate(rows) for t, x in row]
    lines = [head] + table + column("L", 107, 355, 20, width=510) + column("R", 660, 355, 20, width=510)
    md = lines_to_markdown(lines, 1275, 1651)
    assert "| \\author | 100 | Author |" in md, md


def test_a_figures_label_far_left_of_a_tables_row_stays_out_of_it():
    labels = [line("r0 = 1", 370, 118, w=70), line("↑y", 317, 72, w=30), line("x", 500, 255, w=24)]
    table = [line(t, x, 114 + r * 36) for r, cells in enumerate([("Experiment", "Speed", "Heat"), ("Run 11", "12.5", "103.4"),
                                                                ("Run 12", "24", "68.3")]) for t, x in zip(cells, (794, 915, 998))]
    md = lines_to_markdown(labels + table, 1275, 1651)
    assert "| Experiment | Speed | Heat |" in md and "r0 = 1 Experiment" not in md, md


def test_a_formulas_short_piece_far_left_of_its_row_across_other_pieces_stays_on_the_row():
    # "i=0" under a sum sign, the rest of the formula far right of it on its row, the formula's other
    # pieces between them a little higher (boxes as the detector gave them on a two-column paper): no
    # white space between, so no figure's label.
    boxes = [("Here we introduced the initial state of the system, which trans-", (636, 1542, 1166, 1567)),
             ("(5)", (1133, 1516, 1169, 1543)),
             ("tum origin and is due to tunneling through the potential caused", (74, 1505, 605, 1530)),
             ("i=0", (641, 1499, 670, 1521)), ("Anx + Bny - Anx + Bny", (983, 1488, 1184, 1516)),
             ("An + Bn", (743, 1486, 821, 1518)),
             ("evanescent field. This evanescent field essentially has a quan-", (74, 1478, 605, 1506)),
             ("An", (669, 1474, 702, 1500)), ("dx", (716, 1471, 752, 1501)), ("= BnCn dx dy", (812, 1458, 998, 1514)),
             ("Gn(x, y)", (1096, 1459, 1176, 1488)), ("Gn(x, y)", (993, 1459, 1072, 1488)), ("Fn(x)", (754, 1456, 813, 1491)),
             ("volume V is small. Consequently, it can escape through the", (75, 1455, 605, 1479))]
    md = lines_to_markdown([TextLine(t, b) for t, b in boxes], 1241, 1754)
    assert "i=0 Anx + Bny" in md, md


def test_long_labels_with_short_values_over_prose_set_at_the_values_edge_stay_rows():
    # A form's labels of several words, short values at one edge; far down the page an indented note in
    # prose starts at that same edge. What lies beside the values is no prose: the rows stay rows.
    labels = ["Name of the applicant in full", "Date and place of birth", "Name of the school attended",
              "Number of years in the town", "Name of the person to ask"]
    lines = [line(t, 100, 300 + 40 * i) for i, t in enumerate(labels)]
    lines += [line(f"value {i}", 520, 300 + 40 * i) for i in range(len(labels))]
    lines += [line(f"n{i} the note below the form runs on in prose for several lines", 520, 900 + LEAD * i, w=600)
              for i in range(6)]
    md = lines_to_markdown(lines, 1240, 1750)
    assert all(f"{t} value {i}" in md for i, t in enumerate(labels)), md


def test_the_first_rows_of_two_columns_run_together_under_a_title_across_them_are_cut_back_by_the_columns():
    # A subtitle centred across the gutter right over the columns keeps the lines stage from cutting the
    # two rows under it that the detector ran across the gutter (a line across on a neighbouring row); the
    # columns stage cuts them where its separator stops.
    lines = [line("Two Columns Below: a subtitle centred over both", 320, 196, w=520)]
    left, right = column("l", 100, 230, 12), column("r", 600, 230, 12)
    lines += [TextLine(f"{a.text} {b.text}", (100, a.box[1], 1060, a.box[3])) for a, b in zip(left[:2], right[:2])]
    lines += left[2:] + right[2:]
    md = lines_to_markdown(lines, 1240, 1750)
    assert in_order(md, ["Two Columns", "l0 ", "l1 ", "l11 ", "r0 ", "r1 ", "r11 "]), md


def test_a_cards_columns_go_on_under_a_white_band_across_them():
    # Two sections down each of three columns, a white band across the card between them: the columns go
    # on under it on both sides of each gutter, so each is read top to bottom, section after section.
    sections = [("Files", ["open", "save", "close"]), ("Editing", ["copy", "paste", "undo"]),
                ("Search", ["find", "replace", "next"]), ("Windows", ["split", "zoom", "tile"]),
                ("Help", ["manual", "about", "keys"]), ("Exit", ["quit", "abort", "suspend"])]
    lines = []
    for k, (title, commands) in enumerate(sections):
        x, y = 70 + 570 * (k // 2), 90 + 330 * (k % 2)
        lines.append(line(title, x, y, h=50))
        for i, cmd in enumerate(commands):
            lines += [line(f"\\{cmd}", x, y + 70 + 44 * i, w=120, h=36),
                      line(f"does {cmd} now", x + 190, y + 70 + 44 * i, w=200, h=36)]
    md = lines_to_markdown(lines, 1754, 800)
    assert in_order(md, [title for title, _ in sections]), md


def test_a_large_title_close_beside_body_text_is_still_off_its_row():
    # Closer than the widest word gap, so only the jump in type size parts them.
    lines = [line("Big Title", 100, 200, w=300, h=60), line("a caption in body type beside it", 440, 216, w=360)]
    lines += column("b", 100, 320, 4, width=900)
    rows = rows_of(lines, [], P)
    assert not any("Big Title" in r.text and "caption" in r.text for r in rows), [r.text for r in rows]


def test_a_figures_label_far_left_of_a_row_of_figures_stays_out_of_it():
    # The row beside the label holds no word, so no wide word gap parts them: the label rule does.
    table = [line(t, x, 300 + r * 36) for r, cells in enumerate([("12.5", "103.4", "7.7"), ("24.0", "68.3", "9.1"),
                                                                ("31.2", "55.0", "4.4")]) for t, x in zip(cells, (794, 915, 998))]
    md = lines_to_markdown([line("r0 = 1", 100, 300, w=70)] + table, 1275, 1651)
    assert not any("r0 = 1" in l and "12.5" in l for l in md.splitlines()), md
