"""The page JSON (`--format md,json`): its schema, and boxes that land on the page's own ink whichever way
the engine turned the page (real OCR on drawn pages, real text layers)."""

from __future__ import annotations

import math
from pathlib import Path, PurePosixPath

import jsonschema
import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from ocrbatch import pagejson, textlayer
from ocrbatch.pdfium import PdfHandle
from ocrbatch.records import Kind, PageImage, PageRef, PageResult, Source, Status
from test_layout_textlayer import article_page, write_pdf

WORDS = ["Quarterly figures for the harbour", "Cargo landed rose by a tenth", "Passenger ferries ran on time",
         "The new crane opens in spring"]


def _ref(name: str = "scan.png") -> PageRef:
    src = Source(Path("/x") / name, name, Kind.PNG, PurePosixPath(Path(name).stem), 1, 1, 1, False)
    return PageRef(src, 1)


def _drawn() -> tuple[Image.Image, list[tuple[str, tuple[int, int, int, int]]]]:
    """A page of four lines, and each line's ink box."""
    im = Image.new("RGB", (900, 600), "white")
    d = ImageDraw.Draw(im)
    font = ImageFont.load_default(size=30)
    boxes = []
    for i, text in enumerate(WORDS):
        at = (60, 80 + 110 * i)
        d.text(at, text, font=font, fill="black")
        boxes.append((text, d.textbbox(at, text, font=font)))
    return im, boxes


def _inside(inner, outer, slack: float) -> bool:
    return (inner[0] >= outer[0] - slack and inner[1] >= outer[1] - slack and inner[2] <= outer[2] + slack
            and inner[3] <= outer[3] + slack)


@pytest.mark.parametrize("turn", [0, 90, 180, 270])
def test_unturn_takes_a_box_back_from_each_turned_frame(turn):
    page = np.zeros((40, 60), np.uint8)  # h × w
    page[5:10, 20:50] = 1  # rows 5-9, columns 20-49: the box (20, 5, 50, 10)
    k = {0: 0, 90: 3, 180: 2, 270: 1}[turn]  # np.rot90 turns anticlockwise
    turned = np.rot90(page, k)
    ys, xs = np.nonzero(turned)
    corners = [(xs.min(), ys.min()), (xs.max() + 1, ys.min()), (xs.max() + 1, ys.max() + 1), (xs.min(), ys.max() + 1)]
    h, w = turned.shape
    assert pagejson.unturn(corners, turn, w, h) == (20, 5, 50, 10)


@pytest.mark.parametrize("degrees", [0, 90, 180, 270])
def test_each_line_box_holds_its_text_on_the_page_as_given(rapid, degrees):
    """Turned pages are read upright by the engine; the JSON's boxes still point at the page as it came."""
    upright, truth = _drawn()
    im = upright.rotate(-degrees, expand=True)  # PIL turns anticlockwise
    out = rapid.infer([PageImage(ref=_ref(), image=im)])[0]
    result = PageResult(ref=_ref(), status=Status.OK, markdown=out.markdown, info=out.info, lines=out.lines)
    page = pagejson.page_json(result, engine="rapidocr/ppocrv6-small")
    jsonschema.validate(page, pagejson.SCHEMA)
    assert (page["width"], page["height"]) == im.size
    assert [l["text"] for l in page["lines"]] == WORDS  # in reading order
    assert [l["order"] for l in page["lines"]] == [0, 1, 2, 3]
    assert page["confidence"]["method"] == "recognizer" and 0.9 < page["confidence"]["score"] <= 1
    w0, h0 = upright.size
    for line, (_, ink) in zip(page["lines"], truth):
        x0, y0, x1, y1 = ink  # where the ink went when the page was turned clockwise
        turned = {0: (x0, y0, x1, y1), 90: (h0 - y1, x0, h0 - y0, x1), 180: (w0 - x1, h0 - y1, w0 - x0, h0 - y0),
                  270: (y0, w0 - x1, y1, w0 - x0)}[degrees]
        assert _inside(turned, line["box"], slack=4), (degrees, line, turned)
        assert (line["box"][2] - line["box"][0]) * (line["box"][3] - line["box"][1]) < \
            2.5 * (turned[2] - turned[0]) * (turned[3] - turned[1]), line  # around the line, not the page
        assert line["box_norm"] == pytest.approx([line["box"][0] / im.width, line["box"][1] / im.height,
                                                  line["box"][2] / im.width, line["box"][3] / im.height], abs=1e-4)
        assert 0.5 <= line["score"] <= 1 and line["kind"] == "text"


def test_a_skewed_scan_keeps_its_boxes_on_the_lines(rapid):
    """The engine lays out a skewed page in a straightened frame; the boxes go back to the tilted lines."""
    upright, truth = _drawn()
    a = math.radians(4)
    im = upright.rotate(4, fillcolor="white", resample=Image.BICUBIC)  # 4 degrees anticlockwise, about the centre
    out = rapid.infer([PageImage(ref=_ref(), image=im)])[0]
    page = pagejson.page_json(PageResult(ref=_ref(), status=Status.OK, info=out.info, lines=out.lines), "rapidocr")
    assert [l["text"] for l in page["lines"]] == WORDS
    cx, cy = im.width / 2, im.height / 2
    for line, (_, (x0, y0, x1, y1)) in zip(page["lines"], truth):
        turned = [(cx + (x - cx) * math.cos(a) + (y - cy) * math.sin(a), cy - (x - cx) * math.sin(a) +
                   (y - cy) * math.cos(a)) for x, y in ((x0, y0), (x1, y0), (x1, y1), (x0, y1))]
        ink = (min(p[0] for p in turned), min(p[1] for p in turned), max(p[0] for p in turned),
               max(p[1] for p in turned))  # around the tilted line
        assert _inside(ink, line["box"], slack=5), (line, ink)
        box = line["box"]
        assert (box[2] - box[0]) * (box[3] - box[1]) < 1.6 * (ink[2] - ink[0]) * (ink[3] - ink[1]), (line, ink)


@pytest.mark.parametrize("rotate, sideways", [(0, False), (90, False), (0, True), (270, True)])
def test_text_layer_boxes_land_on_the_rendered_glyphs(tmp_path, rotate, sideways):
    path = write_pdf(tmp_path / "a.pdf", [article_page()], rotate=rotate, sideways=sideways)
    handle = PdfHandle(path)
    try:
        text = handle.text_chars(0)
        rendered = handle.render(0, 150)
    finally:
        handle.close()
    page = textlayer.page_markdown(text, 150)
    geo = page.geometry
    assert abs(geo.width - rendered.width) <= 1 and abs(geo.height - rendered.height) <= 1
    ink = np.asarray(rendered.convert("L")) < 160
    assert geo.lines and all(l.score is None for l in geo.lines)
    for line in geo.lines:
        x0, y0, x1, y1 = (int(v) for v in line.box)
        assert ink[y0:y1 + 1, x0:x1 + 1].sum() > 0.8 * ink[max(0, y0 - 2):y1 + 3, max(0, x0 - 2):x1 + 3].sum() > 0, \
            (rotate, sideways, line)
    assert ink.sum() <= 1.05 * sum(ink[int(l.box[1]):int(l.box[3]) + 1, int(l.box[0]):int(l.box[2]) + 1].sum()
                                   for l in geo.lines)  # every glyph lies in some line's box
    texts = [l.text for l in geo.lines]
    assert texts[0] == "Results of the Study" and texts.index("alpha four closes the left column.") < \
        texts.index("Beta one opens the right column of")  # reading order, as the Markdown has it


def test_deepseek_blocks_become_lines_and_figures_keep_their_boxes():
    from ocrbatch.engines.deepseek_ocr2.post import page_lines, to_markdown

    raw = ("<|ref|>title<|/ref|><|det|>[[100, 50, 900, 120]]<|/det|># Harbour report\n\n"
           "<|ref|>image<|/ref|><|det|>[[100, 200, 500, 600]]<|/det|>\n\n"
           "<|ref|>text<|/ref|><|det|>[[100, 650, 900, 700], [100, 700, 800, 760]]<|/det|>Cargo rose by a tenth.")
    image = Image.new("RGB", (1000, 2000), "white")
    geo = page_lines(raw, image.size)
    assert [(l.text, l.kind, l.block) for l in geo.lines] == [("# Harbour report", "title", 0),
                                                              ("Cargo rose by a tenth.", "text", 1)]
    assert geo.lines[1].box == pytest.approx((100.1, 1301.3, 900.9, 1521.5), abs=1)
    assert geo.figures == ((100.0, 400.0, 501.0, 1201.0),)
    _, figures = to_markdown(raw, image, PurePosixPath("scan.md"))
    page = pagejson.page_json(PageResult(ref=_ref(), status=Status.OK, lines=geo), "deepseek-ocr2",
                              figure_files=[f"images/{figures[0].relpath.name}"])
    jsonschema.validate(page, pagejson.SCHEMA)
    assert page["figures"] == [{"box": [100.0, 400.0, 501.0, 1201.0], "box_norm": [0.1, 0.2, 0.501, 0.6005],
                                "file": "images/scan-1.png"}]
    assert page["lines"][0]["score"] is None and page["confidence"] is None


def test_a_page_without_geometry_still_has_a_valid_json():
    page = pagejson.page_json(PageResult(ref=_ref(), status=Status.TRUNCATED, info={}), "fake", dpi=150)
    jsonschema.validate(page, pagejson.SCHEMA)
    assert page["lines"] == [] and page["version"] == pagejson.VERSION and page["status"] == "truncated"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**page, "version": 2}, pagejson.SCHEMA)


def test_lines_carry_the_markdown_block_they_went_into_and_furniture_has_none(rapid):
    im = Image.new("RGB", (1000, 1400), "white")
    d = ImageDraw.Draw(im)
    d.text((80, 80), "Harbour report", font=ImageFont.load_default(size=48), fill="black")
    body = ["The cargo landed in May rose by a tenth over April, and the", "passenger ferries ran on time on all",
            "but two days of the month, both in the storm week."]
    for i, text in enumerate(body):
        d.text((80, 200 + 40 * i), text, font=ImageFont.load_default(size=26), fill="black")
    d.text((440, 1320), "Page 2 of 9", font=ImageFont.load_default(size=26), fill="black")
    out = rapid.infer([PageImage(ref=_ref(), image=im)])[0]
    lines = [(l.text, l.block, l.kind) for l in out.lines.lines]
    assert lines == [("Harbour report", 0, "text")] + [(t, 1, "text") for t in body] + \
        [("Page 2 of 9", None, "furniture")], lines
    assert out.markdown.startswith("#") and "Page 2 of 9" not in out.markdown
