"""Records read row by row, flows read column by column (ocrbatch/layout/evidence.py): made-up pages of
the kinds the column finder used to split (a monospace record log, a statement whose long names wrap
under themselves, a label/value form with empty values, stat cards side by side, a list beside a text
box), as the detector boxes them. Synthetic boxes, milliseconds each; each rule's mutation in
scripts/mutations_layout.py fails one of these."""

from __future__ import annotations

from ocrbatch.layout import lines_to_markdown
from ocrbatch.layout.debug import describe
from ocrbatch.layout.evidence import monospaced, rows_apart
from ocrbatch.layout.page import layout_page
from ocrbatch.layout.params import PARAMS
from ocrbatch.records import TextLine

P = PARAMS
H = 22
_NARROW, _WIDE = set("iljtfrI1.,:;'!|()[] "), set("mwMW@%")


def fixed(text: str, col: int, row: float, char: float = 11.0, x0: float = 80, y0: float = 240) -> TextLine:
    """A piece of monospaced type: every character `char` wide, starting at character column `col`."""
    x = x0 + col * char
    return TextLine(text, (x, y0 + row * 29, x + char * len(text), y0 + row * 29 + H))


def prop(text: str, x: float, y: float, size: float = 20.0, h: float = H) -> TextLine:
    """A piece of proportional type: narrow, wide and other glyphs of their own widths."""
    w = sum(0.3 if c in _NARROW else 0.85 if c in _WIDE else 0.62 if c.isupper() or c.isdigit() else 0.52
            for c in text) * size
    return TextLine(text, (x, y, x + w, y + h))


def in_order(md: str, marks: list[str]) -> bool:
    at = [md.index(m) for m in marks]
    return at == sorted(at)


# -- a monospace record log --------------------------------------------------------------------------

COLUMNS = (0, 9, 19, 31, 41, 51)
RECORDS = [("03/01/88", "TOOLBOX", "Z5841861", "CRAFTSMN", "9-6500", "412 ELM ST"),
           ("03/02/88", "RADIO", "M7970831", "SONY", "TR-1000", "BUS DEPOT"),
           ("03/04/88", "TYPEWRTR", "K8040002", "SMITH C", "CORONA3", "77 OAK AVE"),
           ("03/06/88", "CAMERA", "Z8087209", "CANON", "AE-1", "PARK LOT B"),
           ("03/07/88", "WATCH", "M8927176", "TIMEX", "IRONMAN", "RIVER PATH"),
           ("03/09/88", "BICYCLE", "B4681718", "SCHWINN", "TRAVELER", "5 MAIN ST"),
           ("03/10/88", "STEREO", "A7674984", "PIONEER", "SX-780", "18 MILL RD"),
           ("03/11/88", "TV", "K3333909", "ZENITH", "SYSTEM3", "PARK LOT B")]


def log_page() -> list[TextLine]:
    lines = [fixed(name, col, 0) for name, col in zip(("DATE", "TYPE", "SERIAL NO", "MAKE", "MODEL", "LOCATION"),
                                                       COLUMNS)]
    for r, record in enumerate(RECORDS, 1):
        lines += [fixed(text, col, r) for text, col in zip(record, COLUMNS)]
    return lines


def test_a_monospace_record_log_reads_record_by_record_not_field_by_field():
    lines = log_page()
    assert monospaced(lines, H, P)
    md = lines_to_markdown(lines, 1275, 1651)
    said = [" ".join(l.replace("|", " ").split()) for l in md.splitlines()]
    for record in RECORDS:  # every record's fields on one line, in order
        assert any(" ".join(record) in line for line in said), md
    assert in_order(md, [r[0] for r in RECORDS]), md


def test_proportional_prose_is_not_taken_for_monospace_however_long_its_lines():
    # Long lines of prose average their glyphs out: their advance per character hardly varies, yet a
    # proportional face's widths fit them better still.
    words = ("the council met on the first of the month to weigh every program and its cost while members "
             "of staff reviewed a long list of water road and school projects for the year").split()
    lines = [prop(" ".join(words[(7 * k + j) % len(words)] for j in range(12)), 100, 200 + 30 * k) for k in range(20)]
    assert not monospaced(lines, H, P)


def test_a_table_of_words_keeps_its_first_rows_apart():
    # No figures under them: nothing tells a head by its type, so two close rows of words stay two rows.
    rows = [("<i>italic</i>", "italic", "textit{italic}"), ("<b>bold</b>", "bold", "textbf{bold}"),
            ("[[link]]", "link", "href{link}"), ("{{nowiki}}", "nowiki", "verb{nowiki}")]
    lines = [prop(t, x, 300 + 27 * k) for k, row in enumerate(rows) for t, x in zip(row, (100, 500, 900))]
    md = lines_to_markdown(lines, 1275, 1651)
    assert "| <i>italic</i> | italic | textit{italic} |" in md and "| <b>bold</b> | bold | textbf{bold} |" in md, md


# -- a statement: a wide first column of names, figures beside ---------------------------------------

def statement_page() -> tuple[list[TextLine], list[tuple[str, list[str]]]]:
    """Names in the first column, the long ones wrapped under themselves (the figures on the first
    line), a head of two lines over the figures, a group title with no figures."""
    xs = [560 + 130 * k for k in range(6)]
    lines = [prop(t, x - 60, 150) for t, x in zip(("Staff", "Goods and", "Grants", "Capital", "Debt", "Total"), xs)]
    lines += [prop("Ministry", 80, 173)] + [prop(t, x - 60, 173) for t, x in
                                            zip(("costs", "services", "", "works", "service", ""), xs) if t]
    lines += [prop("GENERAL GOVERNMENT", 80, 222)]
    rows = [("Ministry of Finance and Economic", "Planning"), ("Office of the Prime Minister", ""),
            ("Ministry of Foreign Affairs and", "International Cooperation"), ("Ministry of Health", ""),
            ("Ministry of Education, Science and", "Technology"), ("Ministry of Youth", "")]
    y, out = 252, []
    for k, (name, wrap) in enumerate(rows):
        figures = [f"{(k + 3) * (j + 7) * 37 % 9000 + 100:,}" for j in range(6)]
        lines.append(prop(name, 80, y))
        lines += [prop(f, x - 10 * len(f), y) for f, x in zip(figures, xs)]
        if wrap:
            lines.append(prop(wrap, 96, y + 23))
        out.append((f"{name} {wrap}".strip(), figures))
        y += 29 + (23 if wrap else 0)
    return lines, out


def test_a_statement_reads_row_by_row_with_its_wrapped_names_in_their_cells_and_its_head_joined():
    lines, rows = statement_page()
    md = lines_to_markdown(lines, 1755, 1240)
    table = [l for l in md.splitlines() if l.startswith("|")]
    assert table and table[0].startswith("| Ministry | Staff costs | Goods and services |"), md
    for name, figures in rows:  # each name whole in its row's first cell, its figures beside it
        assert f"| {name} | {' | '.join(figures)} |" in md, md
    assert "| GENERAL GOVERNMENT |" in md, md


def test_rows_level_across_a_strip_are_records_rows_off_each_other_are_flows():
    left = [prop(f"left line {k} of a column", 100, 200 + 30 * k) for k in range(8)]
    level = [prop(f"right {k}", 600, 200 + 30 * k) for k in range(8)]
    off = [prop(f"right {k}", 600, 214 + 37 * k) for k in range(7)]
    assert rows_apart(left, level, P) == ""
    assert "rows off each other" in rows_apart(left, off, P)


# -- a label/value form with empty values -------------------------------------------------------------

def form_page() -> list[TextLine]:
    labels = [("SOURCE OF INFORMATION:", "Telephone complaint"), ("MANUFACTURER:", "Hartwell Appliance Company"),
              ("MODEL NUMBER:", ""), ("RETAILER:", ""), ("RETAILER ADDRESS:", "1200 Industrial Parkway"),
              ("SERIAL NUMBER:", ""), ("INJURY REPORTED:", "Minor burn")]
    lines, y = [], 220
    for label, value in labels:
        lines.append(prop(label, 100, y))
        if value:
            lines.append(prop(value, 420, y + 1))
        if label == "RETAILER ADDRESS:":  # its value wraps under itself
            lines.append(prop("Springfield, OH 45501", 420, y + 26))
            y += 26
        y += 44
    lines += [prop("DATE RECEIVED:", 100, y), prop("04/12/1991", 420, y), prop("CASE NO.:", 690, y)]
    lines += [prop("RECEIVED BY:", 100, y + 44), prop("M. Ortega", 420, y + 44), prop("REFERRED TO:", 690, y + 44),
              prop("Trading Standards", 930, y + 44)]  # (a value far off its label, at no other row's place)
    return lines


def test_a_form_keeps_each_label_with_its_value_when_other_labels_have_none_or_wrap_under_themselves():
    md = lines_to_markdown(form_page(), 1275, 1651)
    said = [" ".join(l.split()) for l in md.splitlines()]
    for pair in ("SOURCE OF INFORMATION: Telephone complaint", "MANUFACTURER: Hartwell Appliance Company",
                 "RETAILER ADDRESS: 1200 Industrial Parkway Springfield, OH 45501", "INJURY REPORTED: Minor burn",
                 "DATE RECEIVED: 04/12/1991 CASE NO.:", "RECEIVED BY: M. Ortega REFERRED TO: Trading Standards"):
        assert any(pair in line for line in said), md
    assert in_order(md, ["SOURCE", "MANUFACTURER", "MODEL NUMBER", "RETAILER:", "RETAILER ADDRESS", "SERIAL",
                         "INJURY", "DATE RECEIVED", "RECEIVED BY"]), md


# -- stat cards, a list beside a text box -------------------------------------------------------------

CARDS = [("4,812", "visitors", "up 12 percent on the", "same quarter last year"),
         ("37", "new members", "most of them joined", "after the open day"),
         ("96%", "satisfied", "of those who answered", "the spring survey")]


def cards_page() -> list[TextLine]:
    lines = [prop("The Quarter in Numbers", 100, 80, size=40, h=50)]
    for k, (num, unit, a, b) in enumerate(CARDS):
        mid = 300 + 450 * k
        for text, y, size, h in ((num, 268, 60, 82), (unit, 364, 28, 36), (a, 441, 22, 29), (b, 474, 22, 29)):
            piece = prop(text, 0, y, size=size, h=h)
            w = piece.box[2] - piece.box[0]
            lines.append(TextLine(text, (mid - w / 2, y, mid + w / 2, y + h)))
    return lines


def test_stat_cards_side_by_side_are_read_one_card_at_a_time_never_as_a_table():
    md = lines_to_markdown(cards_page(), 1500, 844)
    assert "|" not in md, md
    flat = " ".join(md.split())
    for card in CARDS:
        assert " ".join(card) in flat, md


def test_a_list_beside_a_text_box_reads_the_list_then_the_box():
    lines = [prop("Planning the Move", 100, 80, size=44, h=58)]
    items = ["Budget", "Timeline and milestones", "Staffing", "Risks we accept", "Review"]  # (ragged: no chain)
    lines += [prop(f"• {t}", 120, 218 + 75 * k, size=32, h=42) for k, t in enumerate(items)]
    box = ["The new office opens in", "spring and every team", "moves within two weeks", "of the opening."]
    lines += [prop(t, 725, 346 + 41 * k, size=28, h=36) for k, t in enumerate(box)]
    md = lines_to_markdown(lines, 1500, 844)
    assert in_order(md, items + box[:1]), md
    assert not any("Staffing" in l and "spring" in l for l in md.splitlines()), md
    assert " ".join(box) in " ".join(md.split()), md


def test_a_wordy_piece_far_right_of_its_row_is_a_line_of_its_own_unless_rows_line_up_there():
    lone = [prop("A short note on its own row", 100, 400), prop("far words beside it", 900, 402)]
    lone += [prop(f"line {k} of running prose under it, set across the page", 100, 440 + 30 * k) for k in range(4)]
    md = lines_to_markdown(lone, 1275, 1651)
    assert not any("own row" in l and "far words" in l for l in md.splitlines()), md
    rows = [prop(f"Item number {k}", 100, 400 + 30 * k) for k in range(4)] + \
        [prop(f"delivered by van {k}", 900, 400 + 30 * k) for k in range(4)]
    md = lines_to_markdown(rows, 1275, 1651)
    assert all(any(f"Item number {k}" in l and f"van {k}" in l for l in md.splitlines()) for k in range(4)), md


# -- what --debug-layout says --------------------------------------------------------------------------

def test_debug_layout_says_for_each_region_whether_it_was_read_as_flow_or_records_and_why():
    text = describe(layout_page(log_page(), 1275, 1651))
    assert "region 0: records, read row by row" in text and "monospaced" in text, text
    two = [prop(f"left column line {k} of running prose here", 100, 200 + 30 * k) for k in range(8)]
    two += [prop(f"right column line {k} of other prose", 760, 214 + 37 * k) for k in range(7)]
    text = describe(layout_page(two, 1275, 1651))
    assert "region 0: flow in 2 columns" in text and "rows off each other" in text, text


def test_a_flowcharts_boxes_are_read_top_to_bottom_before_the_note_beside_them():
    boxes = ["Request arrives", "Is it complete?", "Check the budget", "Approve and file", "Tell the applicant"]
    lines = [prop("How a request is handled", 126, 127, size=30, h=33)]
    lines += [prop(f"line {k} of the prose over the chart, set across the page to its edge", 126, 182 + 28 * k)
              for k in range(2)]
    for text, y in zip(boxes, (266, 377, 491, 562, 631)):
        piece = prop(text, 0, y, h=29)
        w = piece.box[2] - piece.box[0]
        lines.append(TextLine(text, (497 - w / 2, y, 497 + w / 2, y + 29)))
    note = ["The harbour office wel-", "comed a longer opening", "season at very little cost."]
    lines += [prop(t, 680, 467 + 26 * k, h=27) for k, t in enumerate(note)]
    md = lines_to_markdown(lines, 1275, 1651)
    assert in_order(md, boxes + ["The harbour office"]), md


def test_a_form_with_two_label_value_pairs_a_row_reads_row_by_row():
    pairs = [(("Name:", "Mara Linden"), ("Phone:", "Office line")), (("Street:", "Long Street"), ("Town:", "Riverside")),
             (("Employer:", "Harbour Board"), ("Position:", "Senior clerk")), (("Manager:", "Ivo Stone"), ("Team:", "Accounts"))]
    lines = []
    for k, ((l1, v1), (l2, v2)) in enumerate(pairs):
        y = 300 + 40 * k
        lines += [prop(l1, 100, y), prop(v1, 260, y), prop(l2, 640, y), prop(v2, 800, y)]
    md = lines_to_markdown(lines, 1275, 1651)
    said = [" ".join(l.split()) for l in md.splitlines()]
    for (l1, v1), (l2, v2) in pairs:
        assert any(f"{l1} {v1} {l2} {v2}" in line for line in said), md


def test_a_scanned_forms_typed_values_off_their_labels_rows_stay_with_their_labels():
    # Values typed in after printing sit a good part of a line off their labels' rows, all the same way:
    # rows off each other, as two flows' are, but labels ending in a colon left of the strip are a form's.
    labels = ["SOURCE OF INFORMATION:", "MANUFACTURER:", "BRAND NAME:", "MODEL NUMBER:", "RETAILER:",
              "DATE OF PURCHASE:", "SERIAL NUMBER:", "INJURY REPORTED:"]
    values = ["Telephone call", "Hartwell Appliance", "KitchenPro", "", "Corner Store", "June 1990", "", "Minor burn"]
    lines = []
    for k, (label, value) in enumerate(zip(labels, values)):
        lines.append(prop(label, 100, 300 + 44 * k))
        if value:
            lines.append(prop(value, 460, 300 + 44 * k - 12))
    md = lines_to_markdown(lines, 1275, 1651)
    said = [" ".join(l.split()) for l in md.splitlines()]
    for label, value in zip(labels, values):
        assert any(f"{label} {value}".strip() in line for line in said), md
