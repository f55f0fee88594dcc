"""Layout: text lines with boxes → Markdown. Synthetic boxes, so these run in milliseconds."""

from __future__ import annotations

import math

import pytest

from ocrbatch.layout import lines_to_markdown
from ocrbatch.layout.skew import lines_from_quads
from ocrbatch.records import TextLine

H = 26  # a body line's box height in pixels, about 10 pt text at 150 dpi
LEAD = 28


def line(text: str, x: float, y: float, w: float | None = None, h: float = H) -> TextLine:
    w = w if w is not None else 11 * len(text)
    return TextLine(text, (x, y, x + w, y + h))


def column(texts: list[str], x: float, y: float, width: float) -> list[TextLine]:
    """Justified lines filling `width`, except a paragraph's last line."""
    out = []
    for i, t in enumerate(texts):
        last = i == len(texts) - 1
        out.append(line(t, x, y + i * LEAD, w=min(width, 11 * len(t)) if last else width))
    return out


LEFT = ["Alpha one begins the left column and", "alpha two carries on with more words",
        "alpha three keeps going to the end of", "alpha four, which closes the column."]
RIGHT = ["Beta one opens the right column with", "beta two that follows it closely and",
         "beta three that also fills its line", "beta four ends the right column."]


def test_two_columns_are_read_column_by_column_under_a_full_width_title():
    title = [line("A Study of Two Columns", 300, 60, h=52)]
    lines = title + column(LEFT, 100, 200, 480) + column(RIGHT, 640, 200, 480)
    md = lines_to_markdown(lines, 1240, 1750)
    assert md.startswith("# A Study of Two Columns\n")
    order = [md.index(t.split()[1] if i == 0 else t) for i, t in enumerate(LEFT + RIGHT)]
    assert order == sorted(order), md
    assert md.index("alpha four") < md.index("Beta one")


def test_columns_with_aligned_paragraph_breaks_are_not_interleaved():
    # Both columns break their paragraphs at the same height: still left column first.
    left = column(LEFT[:2], 100, 200, 480) + column(LEFT[2:], 100, 300, 480)
    right = column(RIGHT[:2], 640, 200, 480) + column(RIGHT[2:], 640, 300, 480)
    md = lines_to_markdown(left + right, 1240, 1750)
    assert md.index("alpha four") < md.index("Beta one"), md


def test_wide_element_between_column_sections_keeps_its_place():
    top = column(LEFT[:2], 100, 200, 480) + column(RIGHT[:2], 640, 200, 480)
    wide = [line("E = m c squared, a wide equation across both columns (1)", 200, 300, w=840)]
    bottom = column(LEFT[2:], 100, 380, 480) + column(RIGHT[2:], 640, 380, 480)
    md = lines_to_markdown(top + wide + bottom, 1240, 1750)
    marks = ["alpha two", "beta two", "wide equation", "alpha three", "beta three"]
    positions = [md.index(m) for m in marks]
    assert positions == sorted(positions), md


def test_paragraph_lines_are_joined_and_dehyphenated():
    lines = column(["The quick brown fox jumps over the lazy", "dog and then it runs into the dis-",
                    "tance without looking back."], 100, 200, 900)
    md = lines_to_markdown(lines, 1240, 1750)
    assert md.strip() == ("The quick brown fox jumps over the lazy dog and then it runs into the "
                          "distance without looking back.")


def test_heading_by_height_and_numbered_section_heading():
    lines = [line("Big Title", 100, 100, h=60)]
    lines += column(["Some body text that fills the whole width of the", "page and ends here."], 100, 200, 900)
    lines += [line("2.1 Method", 100, 320)]
    lines += column(["More body text that fills the whole width of the", "page and ends there."], 100, 380, 900)
    md = lines_to_markdown(lines, 1240, 1750)
    assert md.splitlines()[0] == "# Big Title"
    assert "### 2.1 Method" in md.splitlines()


def test_bullet_and_numbered_lists():
    lines = [line("Things to bring:", 100, 100)]
    lines += [line("• a towel", 130, 140), line("• a guide that is long enough to wrap onto a", 130, 168, w=900),
              line("second line", 160, 196), line("• tea", 130, 224)]
    lines += [line("1. first step", 130, 300), line("2. second step", 130, 328)]
    md = lines_to_markdown(lines, 1240, 1750)
    assert "- a towel\n- a guide that is long enough to wrap onto a second line\n- tea" in md
    assert "1. first step\n2. second step" in md


def test_aligned_cells_become_a_pipe_table():
    lines = column(["A paragraph before the table, long enough to fill", "the line."], 100, 100, 900)
    rows = [("Animal", "Description", "Price"), ("Gnat", "per gram", "13.65"), ("Gnu", "stuffed", "92.50"),
            ("Emu", "stuffed", "33.33")]
    for r, cells in enumerate(rows):
        for c, text in enumerate(cells):
            lines.append(line(text, 300 + 200 * c, 240 + r * LEAD, w=11 * len(text)))
    lines += column(["A paragraph after the table, long enough to fill", "the line."], 100, 400, 900)
    md = lines_to_markdown(lines, 1240, 1750)
    assert "| Animal | Description | Price |\n|---|---|---|\n| Gnat | per gram | 13.65 |" in md
    assert "| Emu | stuffed | 33.33 |" in md
    assert md.index("before the table") < md.index("| Animal") < md.index("after the table")


def test_receipt_label_value_rows_stay_lines_in_top_to_bottom_order():
    rows = [("TOTAL SALES", "37.50"), ("DISCOUNT", "0.00"), ("TOTAL GST", "2.25"), ("CASH", "39.75")]
    lines = [line("SHOP NAME SDN BHD", 250, 50)]
    for r, (label, value) in enumerate(rows):
        lines += [line(label, 40, 120 + r * 44, h=40), line(value, 700, 122 + r * 44, h=40)]
    md = lines_to_markdown(lines, 932, 1400)
    assert "|" not in md
    got = [l.strip() for l in md.replace("  \n", "\n").splitlines() if l.strip()]
    assert got[-4:] == ["TOTAL SALES 37.50", "DISCOUNT 0.00", "TOTAL GST 2.25", "CASH 39.75"]


def test_running_head_and_page_number_are_dropped_unless_kept():
    lines = [line("Journal of Tests", 100, 40), line("7", 1100, 40, w=14)]
    lines += column(["Body text " * 5, "more body text " * 3], 100, 200, 1000)
    lines += [line("Page 7", 600, 1650), line("Downloaded from example.org on 1 May 2024", 30, 500, w=20, h=400)]
    kept = lines_to_markdown(lines, 1240, 1750, keep_furniture=True)
    assert kept.startswith("Journal of Tests 7")
    assert kept.rstrip().endswith("Page 7")
    md = lines_to_markdown(lines, 1240, 1750)
    assert md.startswith("Body text") and md.rstrip().endswith("body text")
    assert "Journal" not in md and "Page 7" not in md and "Downloaded" not in md


def test_a_title_or_closing_line_at_the_page_edge_is_not_furniture():
    lines = [line("SHOP NAME SDN BHD", 250, 40, h=40)]
    lines += column(["Body text " * 5, "more body text " * 3], 100, 200, 1000)
    lines += [line("THANK YOU, PLEASE COME AGAIN", 300, 1650)]
    md = lines_to_markdown(lines, 1240, 1750)
    assert md.lstrip("# ").startswith("SHOP NAME") and md.rstrip().endswith("PLEASE COME AGAIN")


def test_skewed_scan_quads_are_straightened_before_layout():
    """A page turned by 1.2 degrees: columns drift by more than their gutter from top to bottom."""
    angle = math.radians(1.2)

    def quad(t: TextLine):
        x0, y0, x1, y1 = t.box
        cx, cy = 620, 875
        rot = lambda x, y: (cx + (x - cx) * math.cos(angle) - (y - cy) * math.sin(angle),  # noqa: E731
                            cy + (x - cx) * math.sin(angle) + (y - cy) * math.cos(angle))
        return [rot(x0, y0), rot(x1, y0), rot(x1, y1), rot(x0, y1)]

    left = column(LEFT * 6, 100, 100, 480)
    right = column(RIGHT * 6, 620, 100, 480)  # a 40 px gutter
    straight = left + right
    lines = lines_from_quads([quad(t) for t in straight], [t.text for t in straight], [1.0] * len(straight),
                             1240, 1750)
    md = lines_to_markdown(lines, 1240, 1750)
    assert md.rindex("alpha four") < md.index("Beta one"), md


def test_empty_page_gives_empty_markdown():
    assert lines_to_markdown([], 100, 100) == ""
    assert lines_to_markdown([TextLine("   ", (0, 0, 10, 10))], 100, 100) == ""


def test_hanging_indent_keeps_a_description_item_in_one_paragraph():
    lines = [line("r Given as r(token), this denotes a required delimited ar-", 100, 200, w=900),
             line("gument that is read up to the closing token, and that", 130, 228, w=870),
             line("gives an error when it is missing.", 130, 256, w=400),
             line("o A standard optional argument, in square brackets, which", 100, 300, w=900),
             line("may be left out.", 130, 328, w=200)]
    md = lines_to_markdown(lines, 1240, 1750)
    paras = md.strip().split("\n\n")
    assert len(paras) == 2, md
    assert "delimited argument that is read" in paras[0]


def test_header_box_run_across_two_columns_is_split_into_its_words():
    lines = [line("Dept", 100, 100), line("Mon", 300, 100), line("Tue Wed", 500, 100, w=260)]
    for r, cells in enumerate([("Legal", "412", "390", "455"), ("Audit", "120", "130", "140")]):
        lines += [line(t, 100 + 200 * c, 140 + 40 * r) for c, t in enumerate(cells)]
    md = lines_to_markdown(lines, 1240, 1750)
    assert "| Dept | Mon | Tue | Wed |" in md, md
    assert "| Legal | 412 | 390 | 455 |" in md


def test_tall_display_equation_and_a_wrapped_line_are_not_headings():
    body = column(["The field is expanded in modes, so that the", "translational coefficients follow from"],
                  100, 100, 900)
    equation = [line("E = mc2 + A1,39 (r0 + dr)", 300, 190, h=56)]
    more = column(["where each term is defined below and the", "sum runs over every mode of the guide."],
                  100, 280, 900)
    wrapped = [line("Here the coefficients and their ex-", 100, 380, w=600, h=56)]
    md = lines_to_markdown(body + equation + more + wrapped, 1240, 1750)
    assert "#" not in md
    assert "E = mc2 + A1,39 (r0 + dr)" in md


def test_short_set_apart_line_in_slightly_larger_type_is_a_section_title():
    intro = column(["A batch closes when it is full or when its", "oldest page has waited long enough."],
                   100, 100, 900)
    title = [line("Resuming work", 100, 200, h=31)]
    after = column(["Every page is written atomically and the", "manifest records each one of them."],
                   100, 262, 900)
    md = lines_to_markdown(intro + title + after, 1240, 1750)
    assert "\n### Resuming work\n" in md


def test_widely_spaced_full_lines_stay_apart_from_a_running_head_and_each_other():
    # A form or fax: equal lines far apart. The first one, alone at the top, looks like a running
    # head; it must not be joined to the next line as if the text flowed on from another column.
    texts = [f"Entry {n}: the quick brown fox jumps" for n in range(1, 9)]
    lines = [line(t, 150, 200 + 120 * n, w=700) for n, t in enumerate(texts)]
    md = lines_to_markdown(lines, 1700, 2200)
    assert md.strip().split("\n\n") == texts


def test_contents_entries_with_dot_leaders_keep_their_own_lines():
    entries = ["1.1 Scope . . . . . . . . . . . . . . . . . . 3", "1.2 Terms . . . . . . . . . . . . . . . . . . 4",
               "1.3 Symbols . . . . . . . . . . . . . . . . . 6"]
    md = lines_to_markdown([line(t, 100, 200 + LEAD * n, w=1000) for n, t in enumerate(entries)], 1240, 1750)
    assert [l.rstrip() for l in md.splitlines()] == entries


def test_paragraph_set_with_generous_leading_is_still_one_paragraph():
    # Line pitch 1.45 box heights (loose font boxes from a text layer): wide, but every line the same,
    # so only the bigger gap before the second paragraph breaks it.
    first = ["This paragraph is set with generous leading and its", "lines are far apart but all equally so, and",
             "it ends here."]
    second = ["A second paragraph follows after a bigger gap", "and ends as well."]
    pitch = int(1.45 * H)
    lines = [line(t, 100, 200 + pitch * n, w=1000 if n < 2 else 300) for n, t in enumerate(first)]
    lines += [line(t, 100, 200 + pitch * 3 + 30 + pitch * n, w=1000 if n < 1 else 300) for n, t in enumerate(second)]
    md = lines_to_markdown(lines, 1240, 1750)
    assert md.strip().split("\n\n") == [" ".join(first), " ".join(second)]


def _page_of_two_columns(tag: str, x: float, y: float, lines: int = 8) -> list[TextLine]:
    """A small page at (x, y): two columns of prose whose lines start 'TAG-L1'..., 'TAG-R1'...."""
    left = [f"{tag}l{i} words of running prose in the left column go on" for i in range(lines)]
    right = [f"{tag}r{i} words of running prose in the right column go on" for i in range(lines)]
    return column(left, x, y, 300) + column(right, x + 330, y, 300)


def test_pages_set_together_on_one_sheet_are_read_page_by_page():
    # Four pages of two columns each, 2x2 on one sheet, wide white bands between them: each page is
    # read whole (left column, then right), top-left, top-right, bottom-left, bottom-right. Reading
    # the sheet's left half first would put the bottom-left page before the top-right one.
    tags = ["pa", "pb", "pc", "pd"]
    lines = []
    for k, tag in enumerate(tags):
        lines += _page_of_two_columns(tag, 80 + 800 * (k % 2), 100 + 500 * (k // 2))
    md = lines_to_markdown(lines, 1700, 1100)
    assert "|" not in md, md
    markers = [f"{tag}{side}{i}" for tag in tags for side in "lr" for i in range(8)]
    pos = [md.index(m) for m in markers]
    assert pos == sorted(pos), md


def test_padded_boxes_reaching_into_a_narrow_gutter_do_not_bridge_the_columns():
    # A newsletter's gutters are narrow (half a line's height) and the detector pads boxes by a few
    # pixels more on some lines than on others: a line of the right column may start a little inside
    # the gutter. That is still the column's line, not a wide line across the gutter.
    cols = []
    for c, x in enumerate((100, 452, 804)):
        for i in range(10):
            early = 8 if c and i % 4 == 1 else 0
            cols.append(line(f"c{c}n{i} a line of newsletter prose set in three columns", x - early,
                             200 + i * LEAD, w=340 + early))
    md = lines_to_markdown(cols, 1240, 1750)
    assert "|" not in md, md
    pos = [md.index(f"c{c}n{i} ") for c in range(3) for i in range(10)]
    assert pos == sorted(pos), md


def test_narrow_columns_of_small_type_are_read_column_by_column():
    # A newspaper page set in four narrow columns of small type: a column is only 7.5 times as wide
    # as its (padded, overlapping) line boxes are tall, yet it is a column of prose, not a table.
    cols = []
    for c in range(4):
        for i in range(14):
            cols.append(line(f"k{c}w{i} runs on in type", 80 + 275 * c, 200 + 25 * i, w=255, h=34))
    md = lines_to_markdown(cols, 1240, 1750)
    assert "|" not in md, md
    pos = [md.index(f"k{c}w{i} ") for c in range(4) for i in range(14)]
    assert pos == sorted(pos), md


def test_sections_of_two_columns_under_titles_in_one_column_with_a_decorated_rule():
    # Balanced two-column sections, each title set in the left column only, and a rule of small
    # circles down the gutter (read as "o" and "0"): each section is read left then right, the
    # circles are no text, and a column's last line sitting a few pixels lower than its
    # neighbour's does not hide the break.
    lines = []
    y = 150
    for k in range(2):
        if k:
            lines.append(line(f"Title {k}", 130, y, h=26))
            y += 50
        for i in range(6):
            lines.append(line(f"s{k}l{i} runs along the left column of the section", 100, y + i * 25, w=470))
            lines.append(line(f"s{k}r{i} runs along the right column of the section", 610, y + i * 25 - 2, w=470))
        for i in range(3):
            lines.append(line("o" if i % 2 else "0", 582, y + 20 + 50 * i, w=16, h=18))
        y += 6 * 25 + 20
    md = lines_to_markdown(lines, 1240, 1750)
    markers = [f"s{k}{side}{i}" for k in range(2) for side in "lr" for i in range(6)]
    pos = [md.index(m) for m in markers]
    assert pos == sorted(pos), md
    assert md.index("s0r5") < md.index("Title 1") < md.index("s1l0"), md
    assert not any(w in ("o", "0") for w in md.split()), md


def test_a_short_word_in_a_gutter_is_text_not_an_ornament():
    # A rule of circles down the gutter is read as "o" and "0" and left out; a short word lying there
    # ("or", boxed apart from its line by the detector) is text, and stays.
    lines = []
    for i in range(8):
        lines.append(line(f"l{i} runs along the left column of the page", 100, 150 + i * 25, w=470))
        lines.append(line(f"r{i} runs along the right column of the page", 610, 150 + i * 25, w=470))
    lines += [line("o" if i % 2 else "0", 582, 170 + 50 * i, w=16, h=18) for i in range(3)]
    lines.append(line("or", 579, 150 + 7 * 25, w=22))
    md = lines_to_markdown(lines, 1240, 1750)
    words = md.split()
    assert "or" in words and not any(w in ("o", "0") for w in words), md


def test_lines_the_detector_ran_across_a_narrow_gutter_are_cut_back_into_their_columns():
    # The first five rows of a two-column story came out as one box each across the 8 px gutter;
    # the rows below were found column by column. The story is read left column, then right.
    lines = []
    for i in range(10):
        left = f"left{i} words of the story in its left column"
        right = f"right{i} words of the story in the right column"
        y = 200 + 27 * i
        if i < 5:
            lines.append(line(f"{left} {right}", 100, y, w=1008))
        else:
            lines += [line(left, 100, y, w=500), line(right, 608, y, w=500)]
    md = lines_to_markdown(lines, 1240, 1750)
    pos = [md.index(f"{side}{i} ") for side in ("left", "right") for i in range(10)]
    assert pos == sorted(pos), md


def test_a_two_column_story_under_a_three_column_one_is_read_in_its_own_columns():
    # Three columns of one story, then straight below (no title across) a story in two wider
    # columns whose lines cross the first story's gutters: each story is read column by column.
    lines = []
    for c in range(3):
        lines += column([f"top{c}x{i} of the first story here" for i in range(12)], 100 + 340 * c, 150, 320)
    for c in range(2):
        lines += column([f"low{c}x{i} and the second story runs on in wide columns" for i in range(8)],
                        100 + 510 * c, 150 + 12 * LEAD + 14, 490)
    md = lines_to_markdown(lines, 1240, 1750)
    markers = [f"top{c}x{i}" for c in range(3) for i in range(12)] + [f"low{c}x{i}" for c in range(2) for i in range(8)]
    pos = [md.index(m + " ") for m in markers]
    assert pos == sorted(pos), md


def test_a_stretch_of_lines_run_across_three_columns_is_cut_back_into_its_columns():
    # Small type in three columns with narrow gutters (an A2 sheet of newspaper pages): the detector
    # ran six rows of all three columns together, one box per row across the page. The clean rows
    # above and below show both gutters; every merged row is cut at both, and the story is read
    # column by column.
    def text(c: int, i: int) -> str:
        return f"c{c}r{i:02d} words in the column"  # 26 characters for 340 px

    lines = []
    for i in range(14):
        y = 200 + 27 * i
        if 4 <= i < 10:
            lines.append(line(" ".join(text(c, i) for c in range(3)), 100, y, w=1060))
        else:
            lines += [line(text(c, i), 100 + 360 * c, y, w=340) for c in range(3)]
    md = lines_to_markdown(lines, 1240, 1750)
    assert "|" not in md, md
    pos = [md.index(f"c{c}r{i:02d} ") for c in range(3) for i in range(14)]
    assert pos == sorted(pos), md


def test_a_title_across_the_columns_is_not_cut_at_their_gutters():
    # A boxed title in larger type set across three columns of a story: the columns' lines stop and
    # start around it at the gutters, yet the title stays whole, above the columns' text below it.
    def text(c: int, i: int) -> str:
        return f"c{c}r{i:02d} words in the column"

    lines = [line(text(c, i), 100 + 360 * c, 200 + 27 * i, w=340) for c in range(3) for i in range(5)]
    lines.append(line("An expanded boxed title that breaks the text within the news story", 100, 345, w=1000, h=34))
    lines += [line(text(c, i), 100 + 360 * c, 390 + 27 * (i - 5), w=340) for c in range(3) for i in range(5, 10)]
    md = lines_to_markdown(lines, 1240, 1750)
    assert "An expanded boxed title that breaks the text within the news story" in md, md


@pytest.mark.parametrize("over", [25, 35])
@pytest.mark.parametrize("number_x", [480, 490, 500])
def test_a_left_line_running_into_the_gutter_beside_a_hanging_number_does_not_bridge(over, number_x):
    # A line of the left column runs a little way into the gutter (a long word, a wider box from a
    # smaller detector), and on the same row the right column's item number hangs out into the gutter.
    # Together they cover most of the gutter, but nothing runs across it: the columns are read in turn.
    lines = [line(f"left{i} a line of a justified column of prose", 100, 200 + i * LEAD, w=360 + (over if i == 5 else 0))
             for i in range(12)]
    lines += [line(f"right{i} a line of the second column, items", 520, 200 + i * LEAD, w=360) for i in range(12)]
    lines.append(line("3.", number_x, 200 + 5 * LEAD, w=20))
    md = lines_to_markdown(lines, 1240, 1750)
    pos = [md.index(f"left{i} ") for i in range(12)] + [md.index(f"right{i} ") for i in range(12)]
    assert pos == sorted(pos), md


def _two_columns_over(bottom: list[TextLine]) -> list[TextLine]:
    lines = []
    for c in range(2):
        lines += column([f"col{c} line {i} of the paper's body text" for i in range(30)], 100 + 530 * c, 200, 500)
    return lines + bottom


def test_a_stamp_of_several_lines_at_the_foot_of_the_page_is_furniture():
    # An "author's version" notice of three close-set lines across the foot of a two-column page
    # is dropped like a running foot (and kept with keep_furniture).
    stamp = ["This is the author's version of the work. It is posted at https://example.org/paper.pdf",
             "for your personal use. Not for redistribution. The definitive version was published in",
             "Proceedings of the Conference on Examples. Some Publisher, pp. 42-43, 2016."]
    lines = _two_columns_over([line(t, 130, 1560 + 18 * i, w=1000, h=22) for i, t in enumerate(stamp)])
    md = lines_to_markdown(lines, 1240, 1750)
    assert md.rstrip().endswith("col1 line 29 of the paper's body text"), md
    assert "author's version" not in md and "personal use" not in md and "Proceedings" not in md, md
    kept = lines_to_markdown(lines, 1240, 1750, keep_furniture=True)
    assert "personal use" in kept and "Proceedings" in kept, kept


def test_a_closing_paragraph_at_the_foot_of_the_page_is_not_furniture():
    # Three close-set lines at the foot that carry no stamp (a note, the end of the text) stay.
    note = ["The authors thank the reviewers for their careful reading and comments on the draft",
            "of this paper, and the workshop organisers for the discussion in 2016 that started",
            "it. All remaining errors are ours."]
    lines = _two_columns_over([line(t, 130, 1560 + 18 * i, w=1000, h=22) for i, t in enumerate(note)])
    md = lines_to_markdown(lines, 1240, 1750)
    assert "thank the reviewers" in md and "2016 that started" in md and "remaining errors" in md, md


def test_a_full_width_paragraph_straight_under_two_columns_is_not_cut_at_their_gutter():
    # Text flows out of two columns into a full-width frame right below them, with no space between:
    # the frame's lines end where the right column's lines end, yet its last line runs on past the
    # gutter, so they are whole lines of one paragraph, not lines of the two columns run together.
    lines = column([f"left{i} line of the left column here" for i in range(6)], 57, 400, 384)
    lines += column([f"right{i} line of the right column" for i in range(6)], 455, 400, 362)
    wide = ["Full one runs across the whole width of the frame below the columns and on to its end",
            "full two runs across the whole width of the frame below the columns and on to its end",
            "full three ends past the gutter."]
    lines += [line(t, 57, 400 + 6 * 25 + 25 * i, w=760 if i < 2 else 428, h=23) for i, t in enumerate(wide)]
    md = lines_to_markdown(lines, 1240, 1750)
    for t in wide[:2]:
        assert t in md, md


WIDE = ["Wide one opens the paragraph set across both columns with an indent and runs to the edge",
        "wide two carries the same paragraph on across the whole measure of the page to its edge",
        "wide three goes on across the whole measure of the page, past the gutter, to the edge",
        "wide four ends it short."]


def _full_width(y: float, rows: int) -> list[TextLine]:
    """A justified paragraph of `rows` lines across both columns' measure (100 to 1130), its first
    line indented and its last line short."""
    texts = WIDE[:rows - 1] + WIDE[-1:]
    return [line(t, 140 if i == 0 else 100, y + i * LEAD, w=None if i == rows - 1 else 990 if i == 0 else 1030)
            for i, t in enumerate(texts)]


def _narrow_columns(y: float) -> list[TextLine]:
    """Two columns of six lines each with a gutter of about one line height (100-580, 610-1130)."""
    return (column([f"left{i} line of the story in the left column" for i in range(6)], 100, y, 480)
            + column([f"right{i} line of the story in the right column" for i in range(6)], 610, y, 520))


@pytest.mark.parametrize("rows", [2, 4])
def test_an_indented_full_width_paragraph_under_two_columns_stays_whole_after_them(rows):
    # The paragraph starts on the row right under the columns' last lines, at the same leading, its
    # lines ending where the right column's lines end: its short last line, with no right-column
    # line beside it, shows these are lines of one paragraph, not the two columns run together.
    wide = _full_width(300 + 6 * LEAD, rows)
    md = lines_to_markdown(_narrow_columns(300) + wide, 1240, 1750)
    for l in wide:
        assert l.text in md, md
    at = [md.index(m) for m in ("left0 ", "left5 ", "right0 ", "right5 ", "Wide one", "wide four")]
    assert at == sorted(at), md


@pytest.mark.parametrize("rows", [2, 4])
def test_an_indented_full_width_paragraph_over_two_columns_stays_whole_before_them(rows):
    wide = _full_width(300, rows)
    md = lines_to_markdown(wide + _narrow_columns(300 + rows * LEAD), 1240, 1750)
    for l in wide:
        assert l.text in md, md
    at = [md.index(m) for m in ("Wide one", "wide four", "left0 ", "left5 ", "right0 ", "right5 ")]
    assert at == sorted(at), md


def test_last_rows_of_two_columns_run_together_over_the_left_columns_short_last_line_are_cut():
    # The left column ends a line after the right one, on a short line; the detector ran the two rows
    # above it across the gutter. They look like a paragraph set across the columns, but the columns
    # run full into them from the row above, so they are cut back into their columns.
    lines = []
    for i in range(8):
        left, right = f"left{i} line of the story in the left column", f"right{i} line of the story in the right column"
        y = 300 + i * LEAD
        lines += [line(f"{left} {right}", 100, y, w=1030)] if i >= 6 else [line(left, 100, y, w=480),
                                                                           line(right, 610, y, w=520)]
    lines.append(line("left8 ends.", 100, 300 + 8 * LEAD))
    md = lines_to_markdown(lines, 1240, 1750)
    at = [md.index(f"{side}{i} ") for side in ("left", "right") for i in range(8)]
    assert at == sorted(at) and at[7] < md.index("left8 ends.") < at[8], md


def _centred(text: str, mid: float, y: float) -> TextLine:
    w = 11 * len(text)
    return line(text, mid - w / 2, y, w=w)


def test_grid_of_centred_author_blocks_is_read_author_by_author():
    """A paper's authors: blocks of name / affiliation / place / email, each centred on its own axis,
    three across and two below, with different numbers of lines. Each author is read whole, not
    row by row across the grid (which mixes one author's email with another's affiliation)."""
    lines = [_centred("On the Reading Order of Author Blocks", 620, 60)]
    top = [["Ann Ash*", "Bo Birch*", "ann@ash.example.org", "Institute of Clear Layout", "Dublin, Ohio"],
           ["Cy Cedar", "The Cedar Group", "Hekla, Iceland", "cy@cedar.example"],
           ["Di Dogwood", "Inria Paris", "Rocquencourt"]]
    below = [["Ed Elm", "Elm Research Laboratory", "San Antonio, Texas", "ed@elm.example"],
             ["Flo Fir", "Fir University", "Haidian, China"], ["Gus Gum", "Gum College", "Leeds"]]
    for tier, y0 in ((top, 140), (below, 320)):
        for k, block in enumerate(tier):
            for i, text in enumerate(block):
                lines.append(_centred(text, 240 + 380 * k, y0 + i * LEAD))
    lines += column(LEFT, 100, 520, 480) + column(RIGHT, 660, 520, 480)
    md = lines_to_markdown(lines, 1240, 1750)
    assert "|" not in md
    order = [text for tier in (top, below) for block in tier for text in block]
    at = [md.index(text) for text in order]
    assert at == sorted(at), md
    assert md.index("Gum College") < md.index("Alpha one") < md.index("Beta one")


def test_table_of_centred_cells_stays_a_table():
    """Centred columns of equal length side by side are a table's columns, not blocks to read one by one."""
    lines = column(["A paragraph before the table, long enough to fill", "the line."], 100, 100, 900)
    rows = [("Animal", "Description", "Price"), ("Gnat", "per gram", "13.65"), ("Gnu", "stuffed whole", "92.5"),
            ("Emu", "stuffed", "133.33")]
    for r, cells in enumerate(rows):
        for c, text in enumerate(cells):
            lines.append(_centred(text, 350 + 250 * c, 240 + r * LEAD))
    lines += column(["A paragraph after the table, long enough to fill", "the line."], 100, 400, 900)
    md = lines_to_markdown(lines, 1240, 1750)
    assert "| Animal | Description | Price |" in md and "| Emu | stuffed | 133.33 |" in md


def test_foot_line_at_both_margins_close_under_a_footnote_is_dropped():
    """A journal's foot line ("Journal of X" at the left margin, "PREPRINT / 3" at the right) set
    only a line's height under the last footnote is still page furniture, not the end of each column."""
    lines = column(LEFT * 2, 100, 1200, 480) + column(RIGHT * 2, 660, 1200, 480)
    lines += [line("5For sans-serif math, the class provides a switch. These", 660, 1200 + 9 * LEAD, w=480, h=22),
              line("fonts can act as engineering gothic.", 660, 1200 + 10 * LEAD, w=380, h=22),
              line("Journal of Layout Tests", 100, 1200 + 11 * LEAD + 10, w=240, h=24),
              line("PREPRINT FOR REVIEW / 3", 870, 1200 + 11 * LEAD + 10, w=270, h=24)]
    md = lines_to_markdown(lines, 1240, 1650)
    assert "Journal of Layout" not in md and "PREPRINT" not in md, md
    assert md.rstrip().endswith("engineering gothic.")
    kept = lines_to_markdown(lines, 1240, 1650, keep_furniture=True)
    assert "Journal of Layout Tests" in kept and "PREPRINT FOR REVIEW / 3" in kept


def test_two_columns_whose_padded_boxes_overlap_are_read_column_by_column():
    """A short two-column stretch of a newspaper story set with a gutter so narrow that the
    detector's padded boxes of the two columns overlap (no white strip runs down between them):
    still read left column, then right column, between the full-width text above and below."""
    above = ["A story opens across the whole block with a long line of running text that",
             "fills the width, and a second full line follows it here before the columns."]
    lines = column(above, 100, 200, 900)
    left = ["Left one starts the narrow left", "left two carries the story on and",
            "left three keeps going down the", "left four nearly ends the column", "left five, the end."]
    right = ["Right one starts the right side", "right two follows in its column",
             "right three keeps going down it", "right four closes the right side", "right five, the end."]
    for i, (a, b) in enumerate(zip(left, right)):
        last = i == len(left) - 1
        lines.append(line(a, 100, 300 + i * LEAD, w=200 if last else 458))
        lines.append(line(b, 550, 300 + i * LEAD, w=200 if last else 450))
    lines += column(["Below the columns the story goes on across the whole width in one more long",
                     "line of running text."], 100, 500, 900)
    md = lines_to_markdown(lines, 1240, 1750)
    order = [md.index(t) for t in (above[0], "Left one", "left five", "Right one", "right five", "Below the")]
    assert order == sorted(order), md


def test_stretch_of_lines_run_across_the_gutter_ending_on_a_short_right_line_is_cut():
    """The detector ran most of the first rows of two narrow columns together, one box per row across
    the gutter; the last such box ends where the right column's paragraph ends, short of the
    column's edge. All of them are cut back into their columns, which are then read one after the
    other."""
    def words(tag: str, n: int) -> str:
        return " ".join(f"{tag}w{k}" for k in range(n))[:41].rsplit(" ", 1)[0].ljust(41)

    left = [words(f"left{i}", 9) for i in range(10)]
    right = [words(f"right{i}", 9) for i in range(10)]
    right[4] = "right4w0 right4w1 right4w2 ends."
    lines = []
    for i in range(10):
        y = 300 + i * LEAD
        if i < 5 and i != 3:
            text = f"{left[i].strip()} {right[i]}"
            x1 = 580 + 11 * len(right[i]) if i == 4 else 1040
            lines.append(TextLine(text, (132 if i == 0 else 100, y, x1, y + H)))  # row 0: a paragraph indent
        else:
            lines.append(line(left[i].strip(), 100, y, w=460))
            lines.append(line(right[i].strip(), 580 if i != 5 else 600, y, w=460 if i != 5 else 440))
    md = lines_to_markdown(lines, 1240, 1750)
    at = [md.index(f"{tag}{i}w0") for tag in ("left", "right") for i in range(10)]
    assert at == sorted(at), md
    # a title in larger type and a byline centred over the columns, a few lines above them, do not
    # keep the lines whole
    lines.append(line("This is an example of an editorial story", 570 - 350, 300 - 5 * LEAD, w=700, h=48))
    lines.append(line("NAME SURNAME", 570 - 66, 300 - 1.5 * LEAD, w=132))
    md = lines_to_markdown(lines, 1240, 1750)
    at = [md.index(f"{tag}{i}w0") for tag in ("left", "right") for i in range(10)]
    assert md.index("editorial story") < md.index("NAME SURNAME") < at[0] and at == sorted(at), md


def test_last_row_of_three_columns_run_together_ending_early_is_cut_into_its_columns():
    """A story in three columns ends with its last row boxed as one line across all three gutters,
    ending two words into the third column; the rows above are clean. The last row's pieces end
    their own columns (no row of its own under the story)."""
    def words(tag: str) -> str:
        return " ".join(f"{tag}w{k}" for k in range(6))[:30].rsplit(" ", 1)[0]

    lines = []
    for i in range(8):
        for k, x in enumerate((100, 450, 800)):
            lines.append(line(words(f"c{k}r{i}"), x, 300 + i * LEAD, w=340))
    y = 300 + 8 * LEAD
    last = f"{words('c0r8')} {words('c1r8')} c2r8w0 ends."
    lines.append(TextLine(last, (100, y, 800 + 11 * len("c2r8w0 ends."), y + H)))
    lines.append(line("The next story begins here under a heading", 100, y + 4 * LEAD, w=600, h=40))
    md = lines_to_markdown(lines, 1240, 1750)
    at = [md.index(f"c{k}r{i}w0") for k in range(3) for i in range(9)]
    assert at == sorted(at), md


def _typed(texts: list[str], breaks: list[list[int]], pitch: int = 13, lead: int = 44, h: int = 23) -> list[TextLine]:
    """Lines of typewriter type (one character every `pitch` px), boxed in pieces at the spaces at
    the given character positions, as the detector boxes widely set type at its wide word spaces."""
    out = []
    for i, (text, at) in enumerate(zip(texts, breaks)):
        cuts = [0] + [k + 1 for k in at] + [len(text) + 1]
        for a, b in zip(cuts, cuts[1:]):
            x = 60 + pitch * a
            out.append(TextLine(text[a:b - 1], (x - 3, 40 + lead * i, x + pitch * (b - 1 - a) + 3, 40 + lead * i + h)))
    return out


def test_lines_of_widely_set_type_are_read_whole_though_their_word_spaces_line_up():
    # A typewritten paragraph: every line is boxed in pieces at word spaces, and one of those spaces
    # falls at the same character in all four lines, leaving a white strip down the block that looks
    # like the gutter of two columns. A gutter runs white down the height of its columns; word
    # spaces line up over a few lines by chance: each sentence is read in one piece.
    texts = ["The tenant shall pay the rent on the first day,", "and he must keep all rooms in a good state of",
             "repair. The landlord may enter at any reasonable", "hour to see to them, on giving one day of notice."]
    md = lines_to_markdown(_typed(texts, [[10, 20, 36], [6, 20, 31], [11, 20, 33], [7, 20, 34]]), 800, 260)
    assert " ".join(md.split()) == " ".join(texts), md


def test_pieces_of_typewriter_lines_with_short_words_in_the_strip_are_read_in_order():
    # The pieces the embedded engine finds on three lines in a fixed-pitch font: two strips line up
    # down the block, one with "to", "or", "and" on its left.
    pieces = [("Copy", 57, 111), ("llncs.cls and sample.bib", 120, 411), ("to", 419, 448),
              ("your texmf tree,", 452, 647),
              ("then", 60, 111), ("see www.example.com/docs", 118, 411), ("or", 417, 445),
              ("mail info@example.org", 451, 709),
              ("for", 60, 97), ("the setup of version 2.4", 107, 399), ("and", 405, 447),
              ("main.tex files.", 451, 635)]
    lines = [TextLine(t, (x0, 41 + 48 * (i // 4), x1, 64 + 48 * (i // 4))) for i, (t, x0, x1) in enumerate(pieces)]
    md = lines_to_markdown(lines, 790, 224)
    assert " ".join(md.split()) == " ".join(t for t, _, _ in pieces), md


def test_two_columns_a_word_space_apart_stay_apart_though_the_detector_broke_some_of_their_lines():
    # Justified columns 14 px apart (about a word space) down eight lines, three lines of each broken
    # in two at a wide space: the strip between the columns runs white down every line, so no piece
    # is joined across it and the columns are read one after the other.
    lines = []
    for k, x in enumerate((100, 514)):
        for i in range(8):
            y = 300 + i * LEAD
            words = [f"c{k}r{i}w{j}" for j in range(5)]
            if i in (1, 2, 5):
                lines += [TextLine(" ".join(words[:3]), (x, y, x + 240, y + H)),
                          TextLine(" ".join(words[3:]), (x + 250, y, x + 400, y + H))]
            else:
                lines.append(TextLine(" ".join(words), (x, y, x + 400, y + H)))
    md = lines_to_markdown(lines, 1240, 1750)
    at = [md.index(f"c{k}r{i}w0") for k in range(2) for i in range(8)]
    assert at == sorted(at), md


def test_a_short_block_of_columns_a_word_space_apart_is_still_read_column_by_column():
    # Three columns of three lines, 20 px apart (less than a line height, like a word space) and
    # nothing above or below: too short for the strips to run white down many lines, but each
    # column's lines start and end at the same places, line after line, as pieces of typewriter
    # lines do not.
    lines = [line(f"c{k}r{i}w0 words in the column", 100 + 360 * k, 300 + i * LEAD, w=340)
             for k in range(3) for i in range(3)]
    md = lines_to_markdown(lines, 1240, 1750)
    at = [md.index(f"c{k}r{i}w0") for k in range(3) for i in range(3)]
    assert at == sorted(at), md
