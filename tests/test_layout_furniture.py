"""Layout: page furniture (running heads and feet), on a page and where several pages are set on one
image (an open book scanned flat, a sheet of pages in rows), each with its own running head and foot
in the middle of the image. Synthetic boxes (milliseconds), and one rendered page read by the engine."""

from __future__ import annotations

from ocrbatch.layout import lines_to_markdown
from ocrbatch.records import TextLine

H = 26  # a body line's box height in pixels, about 10 pt text at 150 dpi
LEAD = 28


def line(text: str, x: float, y: float, w: float | None = None, h: float = H) -> TextLine:
    w = w if w is not None else 11 * len(text)
    return TextLine(text, (x, y, x + w, y + h))


def prose(tag: str, x: float, y: float, rows: int, width: float = 520) -> list[TextLine]:
    """`rows` full lines of running text, each marked "{tag}{i}"."""
    return [line(f"{tag}{i} words of running prose on this page go on", x, y + i * LEAD, w=width)
            for i in range(rows)]


def book_page(tag: str, x: float, y: float, chapter: int, folio: int, rows: int = 20) -> list[TextLine]:
    """A page of a book: the running head ("Chapter 3: The Sea" at the left margin, the page number
    at the right), the text, a centred folio ("- 12 -") under it."""
    lines = [line(f"Chapter {chapter}: The Sea", x, y, w=200), line(str(folio), x + 520 - 24, y, w=24)]
    lines += prose(tag, x, y + 2 * LEAD, rows)
    lines.append(line(f"- {folio} -", x + 230, y + (rows + 3) * LEAD, w=60))
    return lines


def test_running_head_whose_logo_is_boxed_taller_is_still_dropped():
    # A newspaper's running head in three pieces: its name set as a logo (boxed taller than body
    # type), the section, the edition and page number. Most of it is body type: furniture.
    lines = [line("paperTeX , 6 June", 100, 40, w=200, h=36), line("SECTION B", 560, 44, w=110),
             line("my edition 5 / 5", 980, 44, w=160)]
    lines += prose("b", 100, 120, 10, width=1040)
    md = lines_to_markdown(lines, 1240, 1750)
    assert md.startswith("b0 ") and "SECTION" not in md and "5 / 5" not in md, md
    assert lines_to_markdown(lines, 1240, 1750, keep_furniture=True).startswith("paperTeX , 6 June SECTION B"), md


def test_heads_and_feet_of_two_pages_side_by_side_are_dropped_unless_kept():
    # An open book scanned flat, the right page set a few lines lower than the left: its running
    # head faces the left page's text and the left page's folio faces the right page's text.
    lines = book_page("ve", 80, 100, 3, 12) + book_page("re", 700, 100 + 5 * LEAD, 3, 13)
    md = lines_to_markdown(lines, 1300, 1000)
    assert "Chapter 3" not in md and "- 12 -" not in md and "- 13 -" not in md, md
    assert not any(l.strip() in ("12", "13") for l in md.splitlines()), md
    markers = [f"ve{i} " for i in range(20)] + [f"re{i} " for i in range(20)]
    pos = [md.index(m) for m in markers]
    assert pos == sorted(pos), md
    kept = lines_to_markdown(lines, 1300, 1000, keep_furniture=True)
    assert kept.count("Chapter 3: The Sea") == 2 and "- 12 -" in kept and "- 13 -" in kept, kept
    # each kept in its page's place: the left page's foot before the right page's head
    assert kept.index("ve19 ") < kept.index("- 12 -") < kept.index("re0 "), kept


def sheet_page(tag: str, x: float, y: float, n: int) -> list[TextLine]:
    """A newspaper page on a sheet: the running head in three pieces (paper and date, section, edition
    and page), two columns of text, a foot line at the left margin (its © read as "c", as OCR often
    does)."""
    lines = [line("The Daily Test, 6 June", x, y, w=200), line("SECTION B", x + 270, y, w=100),
             line(f"edition {n} / 4", x + 640 - 130, y, w=130)]
    for c in range(2):
        lines += prose(f"{tag}{'lr'[c]}", x + 330 * c, y + 2 * LEAD, 14, width=310)
    lines.append(line("c Test Press - Created using TestTeX", x, y + 18 * LEAD, w=330))
    return lines


def test_heads_and_feet_of_pages_in_rows_on_one_sheet_are_dropped_unless_kept():
    # Four pages, 2x2: the bottom pages' heads and the top pages' feet lie mid-sheet.
    tags = ["pa", "pb", "pc", "pd"]
    lines = []
    for k, tag in enumerate(tags):
        lines += sheet_page(tag, 80 + 760 * (k % 2), 60 + 640 * (k // 2), k + 1)
    md = lines_to_markdown(lines, 1600, 1320)
    assert "SECTION B" not in md and "edition" not in md and "Created using" not in md, md
    markers = [f"{tag}{side}{i} " for tag in tags for side in "lr" for i in range(14)]
    pos = [md.index(m) for m in markers]
    assert pos == sorted(pos), md
    kept = lines_to_markdown(lines, 1600, 1320, keep_furniture=True)
    assert all(f"edition {n} / 4" in kept for n in range(1, 5)) and kept.count("Created using") == 4, kept
    # the mid-sheet ones each in its page's place
    assert kept.index("par13 ") < kept.index("Created using") < kept.index("pbl0 "), kept
    assert kept.index("pbr13 ") < kept.index("edition 3 / 4") < kept.index("pcl0 "), kept


def test_story_headings_and_closing_lines_inside_a_newspaper_page_stay():
    # Stories in rows on one page (wide white bands between them): a heading in body type set apart
    # at a story's top, ending in a year; a story ending on a short line that ends in a number. At
    # the top and bottom of a page these could pass for furniture; inside a page they are text.
    lines = []
    y = 100
    for k, (title, close) in enumerate([("Results of 2007", "Continued on page 4"),
                                        ("Council budget 2008", "See also page 12")]):
        lines.append(line(title, 100, y, w=180))
        lines += prose(f"s{k}x", 100, y + 2 * LEAD, 12, width=1000)
        lines.append(line(close, 100, y + 15 * LEAD, w=200))
        y += 15 * LEAD + 6 * H
    lines.insert(0, line("Front matter of the page, long enough to be one full line of text", 100, 40, w=1000))
    md = lines_to_markdown(lines, 1240, 1400)
    for text in ("Results of 2007", "Continued on page 4", "Council budget 2008", "See also page 12"):
        assert text in md, md
    assert md.index("Results of 2007") < md.index("s0x0 ") < md.index("Continued on page 4") \
        < md.index("Council budget 2008") < md.index("s1x0 "), md


def test_a_page_of_one_column_with_a_wide_white_band_loses_nothing():
    # One page of running text, a wide white band after its first part (a section break), whose next
    # part starts with a short numbered line: no page set among others, nothing is furniture.
    lines = prose("a", 100, 100, 12, width=1000)
    lines.append(line("2", 100, 100 + 17 * LEAD, w=14))
    lines += prose("b", 100, 100 + 19 * LEAD, 12, width=1000)
    lines.append(line("- 3 -", 600, 100 + 40 * LEAD, w=50))  # the page's own folio, at its foot
    md = lines_to_markdown(lines, 1240, 1400)
    assert any(l.strip() == "2" for l in md.splitlines()), md
    assert "- 3 -" not in md


def test_a_scanned_book_spread_reads_without_its_running_heads_and_folios(rapid):
    # Real OCR of a rendered open book (landscape, two pages, the right one set lower as on a scan
    # laid a little askew): each page's running head and folio are left out, its text read page by
    # page; kept with keep_furniture.
    from PIL import Image, ImageDraw, ImageFont

    from ocrbatch.config import EngineOptions
    from ocrbatch.engines.rapid import RapidOcrEngine
    from ocrbatch.records import PageImage

    words = ("river garden window silver market winter harbor candle meadow pocket orange forest ladder "
             "bridge summer castle basket button carpet dinner engine farmer finger flower").split()
    im = Image.new("RGB", (1754, 1240), "white")
    d = ImageDraw.Draw(im)
    font = ImageFont.load_default(size=24)
    for p, (x, y, folio) in enumerate(((110, 90, 12), (960, 230, 13))):
        d.text((x, y), "Chapter 3: The Sea", font=font, fill="black")
        d.text((x + 680 - d.textlength(str(folio), font=font), y), str(folio), font=font, fill="black")
        for i in range(12):
            d.text((x, y + 80 + 38 * i), f"{words[12 * p + i]} and then the rest of the line runs on here",
                   font=font, fill="black")
        d.text((x + 310, y + 80 + 38 * 12 + 50), f"- {folio} -", font=font, fill="black")

    def read(engine) -> str:
        out = engine.infer([PageImage(ref=None, image=im)])[0]  # type: ignore[arg-type]
        assert not isinstance(out, Exception), out
        return out.markdown

    md = read(rapid)
    assert "chapter" not in md.lower() and "- 12 -" not in md and "- 13 -" not in md, md
    assert not any(l.strip() in ("12", "13") for l in md.splitlines()), md
    pos = [md.find(w + " ") for w in words]
    assert all(p >= 0 for p in pos) and pos == sorted(pos), md
    keep = RapidOcrEngine(EngineOptions(keep_furniture=True))
    keep.load("cpu")
    try:
        kept = read(keep)
    finally:
        keep.close()
    assert kept.count("Chapter 3") == 2 and "12" in kept and "13" in kept, kept


def test_head_of_a_page_below_another_repeating_the_first_ones_is_dropped():
    # Two pages of two columns each, one above the other (a 2-up print turned, a long screenshot):
    # the lower page's running head, mid-image, carries no page number, only the conference's
    # date, but repeats the upper page's head (the image's own): furniture, like it.
    lines = []
    for k, (left, right) in enumerate([("Conference acronym 'XX, June 2018, Woodstock", "The Name of the Title"),
                                       ("Trovato and Tobin", "Conference acronym 'XX, June 2018, Woodstock")]):
        y = 60 + 760 * k
        lines += [line(left, 100, y, w=400, h=22), line(right, 1140 - 400, y, w=400, h=22)]
        lines += prose(f"k{k}l", 100, y + 2 * LEAD, 20, width=490)
        lines += prose(f"k{k}r", 650, y + 2 * LEAD, 20, width=490)
    md = lines_to_markdown(lines, 1240, 1560)
    assert "Conference" not in md and "Trovato" not in md and "Title" not in md, md
    for k in range(2):
        for side in "lr":
            assert all(f"k{k}{side}{i} " in md for i in range(20)), md
    kept = lines_to_markdown(lines, 1240, 1560, keep_furniture=True)
    assert kept.count("Conference acronym") == 2 and "Trovato and Tobin" in kept, kept


def test_a_masthead_title_between_small_pieces_at_the_top_stays():
    # A newsletter's first band: its title in title type between the volume and the date, which
    # carries a year: not a running head, whatever its small pieces say.
    lines = [line("Vol. 3", 100, 50, w=70), line("THE GARDEN LETTER", 420, 40, w=400, h=46),
             line("June 2007", 1040, 50, w=100)]
    lines += prose("b", 100, 140, 10, width=1040)
    md = lines_to_markdown(lines, 1240, 1750)
    assert "THE GARDEN LETTER" in md and md.index("THE GARDEN LETTER") < md.index("b0 "), md
