"""The embedded engine on generated pages of the layouts that broke it on unseen documents: three
columns of prose, a reference card, a plot inside one column, page furniture, a broadsheet of small
type. Real OCR with the default (small) models; a few seconds each."""

from __future__ import annotations

import re

import pytest
from PIL import Image, ImageDraw, ImageFont

from ocrbatch.config import EngineOptions
from ocrbatch.engines.rapid import RapidOcrEngine
from ocrbatch.records import PageImage

WORDS = ("river garden window silver market winter harbor candle meadow pocket orange forest ladder bridge "
         "summer castle basket button carpet dinner engine farmer finger flower hammer island jacket kettle "
         "lemon mirror monkey needle number pencil pepper planet rabbit saddle school shadow spider stable "
         "stomach sugar table ticket tongue turkey valley wagon walnut").split()


def _font(size: int):
    return ImageFont.load_default(size=size)


def _read(rapid, im: Image.Image) -> str:
    out = rapid.infer([PageImage(ref=None, image=im)])[0]  # type: ignore[arg-type]
    assert not isinstance(out, Exception), out
    return out.markdown


def _flat(md: str) -> str:
    return " ".join(re.sub(r"[|#*_-]", " ", md).split()).lower()


def _prose(first: int, n: int) -> list[str]:
    """n lines of prose; line i starts with its own marker word, WORDS[first + i]."""
    return [f"{WORDS[first + i]} and then the rest" for i in range(n)]


def _positions(text: str, markers: list[str]) -> list[int]:
    pos = []
    for m in markers:
        found = re.search(rf"\b{m}\b", text)
        pos.append(found.start() if found else -1)
    return pos


def test_three_columns_of_prose_read_column_by_column_with_no_table(rapid):
    # Narrow gutters (24 px at 150 dpi) like a newsletter's: the detector tends to run lines across them.
    im = Image.new("RGB", (1240, 900), "white")
    d = ImageDraw.Draw(im)
    for c, x in enumerate((80, 464, 848)):
        for i, text in enumerate(_prose(12 * c, 12)):
            d.text((x, 120 + 40 * i), text, font=_font(26), fill="black")
    md = _read(rapid, im)
    assert "|" not in md, md
    text = _flat(md)
    pos = _positions(text, WORDS[:36])
    found = [p for p in pos if p >= 0]
    assert len(found) >= 32, md  # the words are read...
    assert found == sorted(found), md  # ...and column after column, top to bottom in each


def test_reference_card_comes_out_section_by_section(rapid):
    # Three columns of "command  description" pairs under section headings, landscape.
    sections = [("Files", ["open", "save", "close"]), ("Editing", ["copy", "paste", "undo"]),
                ("Search", ["find", "replace", "next"]), ("Windows", ["split", "zoom", "tile"]),
                ("Help", ["manual", "about", "keys"]), ("Exit", ["quit", "abort", "suspend"])]
    im = Image.new("RGB", (1754, 800), "white")
    d = ImageDraw.Draw(im)
    for k, (title, commands) in enumerate(sections):
        x, y = 70 + 570 * (k // 2), 90 + 330 * (k % 2)
        d.text((x, y), title, font=_font(40), fill="black")
        for i, cmd in enumerate(commands):
            d.text((x, y + 70 + 44 * i), f"\\{cmd}", font=_font(26), fill="black")
            d.text((x + 190, y + 70 + 44 * i), f"does {cmd} now", font=_font(26), fill="black")
    md = _read(rapid, im)
    assert "|---" not in md, md  # not one table across the card
    text = _flat(md)
    order = []
    for title, commands in sections:
        order += [title.lower()] + [f"does {c} now" for c in commands]
    pos = [text.find(o) for o in order]
    found = [p for p in pos if p >= 0]
    assert len(found) >= len(order) - 2, md
    assert found == sorted(found), md  # each heading, then its own entries, section after section


def test_a_plot_in_one_column_leaves_the_other_column_whole(rapid):
    im = Image.new("RGB", (1240, 1100), "white")
    d = ImageDraw.Draw(im)
    left = _prose(0, 18)
    for i, text in enumerate(left):
        d.text((80, 100 + 44 * i), text, font=_font(26), fill="black")
    # the right column: a plot with tick labels and an axis title, its caption, then text
    x0, y0, x1, y1 = 720, 110, 1140, 480
    d.line([(x0, y0), (x0, y1), (x1, y1)], fill="black", width=3)
    d.line([(x0, y1 - 20), (860, 300), (1000, 350), (x1, 150)], fill="black", width=3)
    for k, tick in enumerate(["0", "10", "20", "30"]):
        d.text((x0 - 8 + 135 * k, y1 + 12), tick, font=_font(22), fill="black")
        d.text((x0 - 40, y1 - 12 - 115 * k), str(k * 5), font=_font(22), fill="black")
    d.text((860, y1 + 50), "Time (s)", font=_font(24), fill="black")
    d.text((660, 600), "Figure 1: Growth over time", font=_font(26), fill="black")
    for i, text in enumerate(_prose(30, 8)):
        d.text((660, 680 + 44 * i), text, font=_font(26), fill="black")
    md = _read(rapid, im)
    text = _flat(md)
    pos = _positions(text, WORDS[:18])
    found = [p for p in pos if p >= 0]
    assert len(found) >= 16, md
    assert found == sorted(found), md
    span = text[found[0]:found[-1]]
    intruders = ["figure", "growth", "time", *WORDS[30:38]]
    assert not [w for w in intruders if re.search(rf"\b{w}\b", span)], md  # nothing cuts into the column


def _article_with_furniture() -> Image.Image:
    im = Image.new("RGB", (1240, 1754), "white")
    d = ImageDraw.Draw(im)
    d.text((100, 60), "Journal of Garden Studies 2024", font=_font(22), fill="black")
    d.text((1100, 60), "17", font=_font(22), fill="black")
    for i, text in enumerate(_prose(0, 20)):
        d.text((100, 250 + 44 * i), text, font=_font(28), fill="black")
    d.text((600, 1660), "17", font=_font(22), fill="black")
    stamp = Image.new("RGB", (900, 36), "white")
    ImageDraw.Draw(stamp).text((4, 4), "Downloaded from example.org on 1 May 2024", font=_font(24), fill="black")
    im.paste(stamp.rotate(90, expand=True), (1180, 500))
    return im


def test_page_furniture_is_left_out_by_default_and_kept_on_request(rapid):
    page = _article_with_furniture()
    md = _flat(_read(rapid, page))
    assert md.startswith(WORDS[0]) and WORDS[19] in md
    assert "journal" not in md and "17" not in md.split() and "downloaded" not in md
    keep = RapidOcrEngine(EngineOptions(keep_furniture=True))
    keep.load("cpu")
    try:
        kept = _flat(_read(keep, page))
    finally:
        keep.close()
    assert kept.startswith("journal of garden studies") and kept.endswith("17")
    # a rerun never mixes pages made both ways: the run records the choice beside the engine's identity
    # (test_rapid.py, test_layout_textlayer.py)


def test_a_broadsheet_of_small_type_is_read_at_a_readable_scale(rapid):
    # 3300 x 4800 px (an A2 sheet at 150 dpi) set in 8-point type: shrunk to 1280 px for the
    # detector, its lines would be 4 px tall.
    im = Image.new("RGB", (3300, 4800), "white")
    d = ImageDraw.Draw(im)
    for c in range(4):
        for r in range(12):
            d.text((150 + 800 * c, 300 + 350 * r), f"the {WORDS[12 * c + r]} road", font=_font(20), fill="black")
    text = _flat(_read(rapid, im))
    found = [w for w in WORDS[:48] if re.search(rf"\b{w}\b", text)]
    assert len(found) >= 0.8 * 48, text


def test_a_sheet_of_small_type_in_narrow_columns_is_read_column_by_column(rapid):
    # An A2 sheet at 150 dpi (2480 x 3508 px) in small type: shrunk to 1280 px for the detector the
    # lines are still found, but their boxes swell over the 30 px gutters and the columns run
    # together; detected again at an A4 page's scale, the columns stay apart.
    im = Image.new("RGB", (2480, 3508), "white")
    d = ImageDraw.Draw(im)
    font = _font(22)
    width = int(d.textlength("mmmm and then the rest of it goes on", font=font))
    for c in range(3):
        for i, text in enumerate(f"{w} and then the rest of it goes on" for w in WORDS[9 * c: 9 * c + 9]):
            d.text((120 + (width + 30) * c, 200 + 28 * i), text, font=font, fill="black")
    md = _read(rapid, im)
    assert "|" not in md, md
    pos = [p for p in _positions(_flat(md), WORDS[:27]) if p >= 0]
    assert len(pos) >= 24, md
    assert pos == sorted(pos), md


def _typewritten(lines: list[str], size: int, pitch: int, lead: int = 48) -> Image.Image:
    """`lines` set as a typewriter sets them: one character every `pitch` px, each centred in its cell."""
    font = _font(size)
    im = Image.new("RGB", (120 + pitch * max(map(len, lines)), 80 + lead * len(lines)), "white")
    d = ImageDraw.Draw(im)
    for i, line in enumerate(lines):
        for j, ch in enumerate(line):
            d.text((60 + j * pitch + (pitch - d.textlength(ch, font=font)) / 2, 40 + lead * i), ch, font=font,
                   fill="black")
    return im


@pytest.mark.parametrize("size,pitch", [(18, 12), (20, 14), (22, 13)])
def test_a_typewritten_paragraph_is_read_sentence_by_sentence(rapid, size, pitch):
    # Wide word spaces: the detector boxes each line in pieces, and on three lines some of their
    # spaces line up into a white strip down the block. It is no gutter: each line is read whole,
    # one after the other (not the left halves of all three, then the right halves).
    lines = ["Copy llncs.cls and sample.bib to your texmf tree,",
             "then see www.example.com/docs or mail info@example.org",
             "for the setup of version 2.4 and main.tex files."]
    md = _read(rapid, _typewritten(lines, size, pitch))
    text = "".join(md.split()).lower()  # (the recognizer may read a wide-set word as "t hen")
    pos = [text.find(m) for m in ("sample.bib", "texmftree", "example.com/docs", "info@example.org",
                                  "version2.4", "main.texfiles")]
    assert -1 not in pos and pos == sorted(pos), md


# -- the gutter split (ppocr.split_at_gutters), on line crops drawn here -----------------------------

LINE_H = 27  # a detected line's box on a 150 dpi page


def _line_crop(x0: int, x1: int, y: int, blank: tuple[int, int] | None = None):
    """A detected line from page x0 to x1 at y as ppocr.crop_line gives it (48 rows high): letters every
    few pixels, white over the page xs `blank` (a gutter, or a wide gap)."""
    import numpy as np

    from ocrbatch.engines.ppocr import REC_HEIGHT

    scale = REC_HEIGHT / LINE_H
    crop = np.full((REC_HEIGHT, int((x1 - x0) * scale), 3), 255, np.uint8)
    for x in range(2, crop.shape[1] - 4, 9):
        crop[10:38, x:x + 4] = 0
    if blank is not None:
        crop[:, int((blank[0] - x0) * scale):int((blank[1] - x0) * scale)] = 255
    quad = np.array([[x0, y], [x1, y], [x1, y + LINE_H], [x0, y + LINE_H]], np.float32)
    return crop, quad


def _split(lines):
    import numpy as np

    from ocrbatch.engines.ppocr import split_at_gutters

    crops, quads = split_at_gutters([c for c, _ in lines], np.stack([q for _, q in lines]))
    return sorted((int(q[:, 0].min()), int(q[:, 0].max()), int(q[0, 1])) for q in quads)


def test_a_sheets_article_with_its_lines_run_across_its_gutter_is_cut_into_its_columns():
    # A newspaper's sheet: one wide article on top, under it an article in two columns whose six lines the
    # detector ran across the 22 px gutter. Counted over the whole page the wide article's lines outnumber
    # the blank ones; the strip of white under it still runs down the lower article, line after line.
    top = [_line_crop(100, 1140, 100 + 32 * i) for i in range(20)]
    lower = [_line_crop(100, 1140, 800 + 32 * i, blank=(610, 632)) for i in range(6)]
    pieces = _split(top + lower)
    lower_pieces = [p for p in pieces if p[2] >= 800]
    assert len(lower_pieces) == 12, pieces
    assert sorted(p[1] < 640 for p in lower_pieces) == [False] * 6 + [True] * 6  # a left and a right column
    assert all(p[1] < 640 or p[0] > 600 for p in lower_pieces), pieces
    assert [p for p in pieces if p[2] < 800] == [(100, 1140, 100 + 32 * i) for i in range(20)]


def test_the_last_rows_of_two_columns_run_together_are_cut_at_the_gutter_the_rows_above_leave_white():
    # Under a masthead that runs over the gutter, two columns of seven lines each, found line by line, then
    # three last rows the detector ran across the gutter: too few rows to be a gutter on their own, but
    # the strip of white runs on above them, beside the columns' own lines, up to the masthead.
    masthead = [_line_crop(100, 1140, 60)]
    columns = [_line_crop(x0, x1, 120 + 32 * i) for i in range(7) for x0, x1 in ((100, 610), (632, 1140))]
    run_together = [_line_crop(100, 1140, 344 + 32 * i, blank=(610, 632)) for i in range(3)]
    pieces = _split(masthead + columns + run_together)
    assert len([p for p in pieces if p[2] >= 344]) == 6, pieces
    assert all(p[1] < 640 or p[0] > 600 for p in pieces if p[2] >= 120), pieces


def test_gaps_that_line_up_within_a_column_between_lines_of_ink_are_not_a_gutter():
    # Two displayed equations of two rows each, their gaps aligned, a line of prose between them and prose
    # above and below that runs over the same x with ink there: no gutter, nothing is cut.
    def prose(y):
        return _line_crop(100, 1140, y)

    def equation(y):
        return [_line_crop(300, 940, y + 32 * i, blank=(600, 640)) for i in range(2)]

    lines = [prose(100 + 32 * i) for i in range(4)] + equation(228) + [prose(292)] + equation(324)
    lines += [prose(388 + 32 * i) for i in range(4)]
    assert len(_split(lines)) == 13
