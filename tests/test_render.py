"""The output formats (ocrbatch/render/): each renderer from a page record drawn here, the registry every way out
reads, and `convert --format md,txt,hocr,pdf` end to end."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path, PurePosixPath

import pypdfium2
import pytest
from PIL import Image

from conftest import draw_page, run_cli, save_pdf
from ocrbatch import config, pagerecord
from ocrbatch.records import (FURNITURE, LINES, Kind, PageImage, PageRecord, PageRef, RecordBlock, RecordLine,
                              Source)
from ocrbatch.render import RENDERERS, DocumentPage, Page, Refusal, pdf

ROOT = Path(__file__).resolve().parents[1]
XHTML = "{http://www.w3.org/1999/xhtml}"


def line(text: str, box, score=0.93) -> RecordLine:
    return RecordLine(text, tuple(float(v) for v in box), score)


def drawn_record(width: int = 1000, height: int = 1400) -> PageRecord:
    """A page as an engine would read it: a heading, a paragraph of two lines, a list, a table and a page number
    (furniture, left out of the Markdown)."""
    return PageRecord(width, height, (
        RecordBlock("heading", "## Annual report", "Annual report", (line("Annual report", (100, 80, 520, 130)),)),
        RecordBlock("paragraph", "The harvest rose by a tenth  \nand the barns are full.",
                    "The harvest rose by a tenth\nand the barns are full.",
                    (line("The harvest rose by a tenth", (100, 200, 700, 236), 0.81),
                     line("and the barns are full.", (100, 244, 600, 280), 0.77))),
        RecordBlock("item", "- apples", "- apples", (line("- apples", (120, 330, 300, 366)),)),
        RecordBlock("item", "- pears", "- pears", (line("- pears", (120, 374, 280, 410)),)),
        RecordBlock("table", "| Fruit | Tons |\n|---|---|\n| Apples | 12 |", "Fruit\tTons\nApples\t12",
                    (line("Fruit Tons", (100, 500, 500, 536)), line("Apples 12", (100, 544, 500, 580)))),
        RecordBlock(FURNITURE, "", "Page 7", (RecordLine("Page 7", (480.0, 1340.0, 560.0, 1370.0), 0.99,
                                                          FURNITURE),)),
    ), LINES)


def page_of(record: PageRecord, **kw) -> Page:
    return Page(record, source=kw.pop("source", "scans/report.png"), number=kw.pop("number", 1), engine="test", **kw)


def markdown_as_text(md: str) -> str:
    """The text of a page's Markdown, by the test's own reading: heading marks and table rules out, cells by tabs,
    hard breaks as line breaks, blocks apart by one blank line (a tight list's items each on their own block)."""
    out = []
    for ln in md.replace("  \n", "\n").splitlines():
        if re.fullmatch(r"\|(-+\|)+", ln):
            continue
        if ln.startswith("|"):
            ln = "\t".join(c.strip() for c in ln.strip("|").split("|"))
        out.append(re.sub(r"^#+ ", "", ln))
    text = "\n".join(out)
    return re.sub(r"\n(- )", r"\n\n\1", text).replace("\n\n\n", "\n\n")


# -- md and txt ---------------------------------------------------------------------------------------

def test_markdown_is_the_records_blocks_with_a_tight_list_and_furniture_left_out():
    md = RENDERERS["md"].page(page_of(drawn_record())).decode()
    assert md == ("## Annual report\n\nThe harvest rose by a tenth  \nand the barns are full.\n\n- apples\n- pears\n\n"
                  "| Fruit | Tons |\n|---|---|\n| Apples | 12 |\n")
    assert "Page 7" not in md


def test_txt_is_the_markdowns_text_in_reading_order():
    record = drawn_record()
    text = RENDERERS["txt"].page(page_of(record)).decode()
    assert text == markdown_as_text(record.markdown_text()) + "\n"
    assert "Page 7" not in text and "#" not in text and "|" not in text
    joined = RENDERERS["txt"].join([(1, b"one\n", None), (2, None, "failed"), (3, b"three\n", None)])
    assert joined == b"one\n\f\fthree\n"


def test_the_layout_parts_make_the_same_markdown_as_before(rapid):
    """The embedded engine's Markdown is the record's (PageOutput.of), and the layout's own render agrees."""
    from ocrbatch.layout.markdown import page_markdown
    from ocrbatch.layout.page import layout_page
    from ocrbatch.records import TextLine

    lines = [TextLine("Quarterly report", (100, 80, 600, 130), 0.99),
             TextLine("- apples", (120, 200, 300, 230)), TextLine("- pears", (120, 240, 300, 270)),
             TextLine("Sales rose by a tenth this quarter and the", (100, 320, 900, 350)),
             TextLine("barns are full again.", (100, 356, 500, 386)), TextLine("Page 2 of 9", (480, 1340, 620, 1370))]
    layout = layout_page(lines, 1000, 1400)
    parts: list = []
    placed: list = []
    md = page_markdown(layout, placed=placed, parts=parts)
    from ocrbatch.pagejson import placed_lines

    record = pagerecord.of_layout(parts, placed_lines(placed, (1000, 1400)))
    assert record.markdown_text() == md and "Page 2 of 9" not in md
    assert [b.kind for b in record.blocks if b.kind != FURNITURE] == [k for k, _, _ in parts]
    assert any(b.kind == FURNITURE for b in record.blocks)
    out = rapid.infer([PageImage(PageRef(_png_source(Path("/x/a.png")), 1),
                                 draw_page("Apples and pears\n\nThe barns are full.", size=(600, 400)))])[0]
    assert out.record is not None and out.markdown == out.record.markdown_text() and out.record.boxes == LINES


# -- hocr -----------------------------------------------------------------------------------------------

def _titles(root, cls: str) -> list[dict[str, str]]:
    found = []
    for el in root.iter():
        if el.get("class") == cls:
            props = dict(p.strip().split(" ", 1) for p in el.get("title", "").split(";") if p.strip())
            found.append({**props, "text": "".join(el.itertext())})
    return found


def test_hocr_parses_as_xhtml_and_html_and_its_boxes_are_the_records():
    record = drawn_record()
    data = RENDERERS["hocr"].page(page_of(record, source='scans/"odd" name.png'))
    root = ET.fromstring(data)  # well-formed XML
    assert root.tag == XHTML + "html"
    metas = {m.get("name"): m.get("content") for m in root.iter(XHTML + "meta")}
    assert set(metas["ocr-capabilities"].split()) >= {"ocr_page", "ocr_carea", "ocr_par", "ocr_line", "ocrx_word"}
    page = _titles(root, "ocr_page")[0]
    assert page["bbox"] == "0 0 1000 1400" and page["ppageno"] == "0" and page["image"] == '"scans/\\"odd\\" name.png"'
    lines = _titles(root, "ocr_line")
    assert [ln["text"].replace("\u00a0", " ") for ln in lines] == [ln.text for ln in record.lines]
    assert [ln["bbox"] for ln in lines] == [" ".join(str(round(v)) for v in ln.box) for ln in record.lines]
    words = _titles(root, "ocrx_word")
    assert [w["text"] for w in words] == [w for ln in record.lines for w in ln.text.split()]
    assert words[0]["x_wconf"] == "93" and any(w["x_wconf"] == "77" for w in words)
    line_elements = [el for el in root.iter() if el.get("class") == "ocr_line"]
    for el in line_elements:  # each word's box within its line's, left to right
        lx0, ly0, lx1, ly1 = map(int, el.get("title").split(";")[0].split()[1:])
        xs = [tuple(map(int, w.get("title").split(";")[0].split()[1:])) for w in el if w.get("class") == "ocrx_word"]
        assert xs and all(lx0 <= x0 < x1 <= lx1 and (y0, y1) == (ly0, ly1) for x0, y0, x1, y1 in xs)
        assert all(a[2] <= b[0] for a, b in zip(xs, xs[1:])) and xs[0][0] == lx0 and xs[-1][2] == lx1  # apart
    areas = _titles(root, "ocr_carea")
    assert len(areas) == len(record.blocks) and areas[-1]["bbox"] == "480 1340 560 1370"  # furniture is on the page

    class Classes(HTMLParser):
        seen: list[str] = []

        def handle_starttag(self, tag, attrs):
            self.seen.append(dict(attrs).get("class", ""))

    parser = Classes()
    parser.feed(data.decode())
    assert parser.seen.count("ocr_line") == len(record.lines)


def test_hocr_joins_pages_into_one_document_and_says_which_page_is_missing():
    one = RENDERERS["hocr"].page(page_of(drawn_record(), number=1))
    three = RENDERERS["hocr"].page(page_of(drawn_record(), number=3))
    root = ET.fromstring(RENDERERS["hocr"].join([(1, one, None), (2, None, "cannot decode: bad"), (3, three, None)]))
    assert [p["ppageno"] for p in _titles(root, "ocr_page")] == ["0", "2"]
    ids = [el.get("id") for el in root.iter() if el.get("id")]
    assert len(ids) == len(set(ids))


def test_deepseek_pages_are_refused_for_hocr_with_the_reason():
    """DeepSeek-OCR-2's result (common.page_output, as every backend ends) has blocks with block boxes, no lines."""
    from ocrbatch.engines.deepseek_ocr2.common import Generated, page_output

    raw = ("<|ref|>title<|/ref|><|det|>[[100, 50, 900, 90]]<|/det|>\n# Annual report\n\n"
           "<|ref|>text<|/ref|><|det|>[[100, 120, 900, 300]]<|/det|>\nThe harvest rose.\n")
    image = Image.new("RGB", (800, 1000), "white")
    out = page_output(raw, Generated([1, 2, 3], True), PageImage(PageRef(_png_source(Path("/x/d.png")), 1), image),
                      {}, ())
    assert out.record is not None and out.record.markdown_text() == out.markdown
    assert out.record.boxes == "blocks"
    with pytest.raises(Refusal, match="hocr needs each line's box.*blocks, not lines"):
        RENDERERS["hocr"].page(page_of(out.record))
    assert "The harvest rose." in RENDERERS["txt"].page(page_of(out.record)).decode()
    assert RENDERERS["md"].page(page_of(out.record)).decode() == out.markdown
    fake = pagerecord.of_markdown("# Title\n\nSome text.\n")  # an engine with no boxes at all
    with pytest.raises(Refusal, match="no boxes"):
        RENDERERS["hocr"].page(page_of(fake))


# -- pdf ------------------------------------------------------------------------------------------------

def _png_source(path: Path, kind: Kind = Kind.PNG, pages: int = 1) -> Source:
    return Source(path, path.name, kind, PurePosixPath(path.stem), 1, 1, pages, pages > 1)


def _image_of(source: Source):
    from ocrbatch.pipeline.decode import decode_page

    return lambda n: decode_page(PageRef(source, n), 150, pdfs=None).image


def _text_in(page, box_pt, height_pt: float) -> str:
    """The text pdfium finds inside `box_pt` (x0, y0, x1, y1 in points, y down from the page's top)."""
    x0, y0, x1, y1 = box_pt
    return page.get_textpage().get_text_bounded(x0 - 1, height_pt - y1 - 1, x1 + 1, height_pt - y0 + 1)


def test_pdf_of_an_image_puts_each_lines_text_inside_its_box_and_every_page_renders(tmp_path):
    record = drawn_record(1000, 1400)
    Image.new("RGB", (1000, 1400), "white").save(tmp_path / "scan.png", dpi=(200, 200))
    source = _png_source(tmp_path / "scan.png")
    data = pdf.document(source, [DocumentPage(1, record)], _image_of(source))
    doc = pypdfium2.PdfDocument(data)
    assert len(doc) == 1
    page = doc[0]
    w, h = page.get_size()
    assert (round(w), round(h)) == (360, 504)  # 1000 x 1400 px at the image's 200 dpi
    scale = 72 / 200
    for ln in record.lines:
        inside = _text_in(page, [v * scale for v in ln.box], h)
        assert inside.strip() == ln.text, (ln.text, inside)
    bitmap = page.render(scale=0.5).to_pil()
    assert abs(bitmap.width - 180) <= 1 and bitmap.getextrema() == ((255, 255),) * 3  # the text is invisible
    if shutil.which("pdftotext"):
        words = _pdftotext_words(data)
        expected = [(word, ln.box) for ln in record.lines for word in ln.text.split()]
        assert [t for t, _ in words] == [t for t, _ in expected]
        for (word, (x0, y0, x1, y1)), (_, box) in zip(words, expected):
            bx0, by0, bx1, by1 = (v * scale for v in box)
            assert bx0 - 1 <= x0 < x1 <= bx1 + 1 and by0 - 1 <= y0 < y1 <= by1 + 1, word


def _pdftotext_words(data: bytes, page: int = 1) -> list[tuple[str, tuple[float, ...]]]:
    """poppler's words on `page` with their boxes (points, y down from the top of the crop box as shown)."""
    out = subprocess.run(["pdftotext", "-cropbox", "-f", str(page), "-l", str(page), "-bbox", "-", "-"], input=data,
                         capture_output=True, check=True).stdout.decode()
    return [(m[4], tuple(float(v) for v in m[:4])) for m in re.findall(
        r'<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">([^<]*)</word>', out)]


def test_pdf_of_a_pdf_keeps_its_pages_and_places_the_text_on_turned_and_cropped_pages(tmp_path):
    from ocrbatch import pdfium as ours

    path = save_pdf(tmp_path / "in.pdf", [draw_page("first", size=(600, 800)), draw_page("second", size=(600, 800))])
    src = pypdfium2.PdfDocument(path)
    src[1].set_rotation(90)
    src[1].set_cropbox(20, 30, 400, 500)
    src.save(tmp_path / "turned.pdf")
    src.close()
    path = tmp_path / "turned.pdf"
    source = Source(path, "turned.pdf", Kind.PDF, PurePosixPath("turned"), 1, 1, 2, True)
    handle = ours.PdfHandle(path)
    sizes = [handle.render(i, 150).size for i in range(2)]
    handle.close()
    records = [PageRecord(w, h, (RecordBlock("paragraph", "x", "x", (
        line("North west corner", (20, 20, 300, 50)), line("far south east", (w - 320, h - 60, w - 20, h - 20)))),),
        LINES) for w, h in sizes]
    data = pdf.document(source, [DocumentPage(1, records[0]), DocumentPage(2, records[1])], _image_of(source))
    doc = pypdfium2.PdfDocument(data)
    assert len(doc) == 2 and doc[1].get_rotation() == 90 and tuple(doc[1].get_cropbox()) == (20, 30, 400, 500)
    for i in range(2):
        doc[i].render(scale=0.3)  # every page renders
    for ln in records[0].lines:  # the upright page: pdfium's text API finds each line in its box
        assert _text_in(doc[0], [v * 72 / 150 for v in ln.box], doc[0].get_size()[1]).strip() == ln.text
    if shutil.which("pdftotext"):  # poppler reports words as the page is shown: turned and cropped
        words = dict(_pdftotext_words(data, page=2))
        for ln in records[1].lines:
            bx0, by0, bx1, by1 = (v * 72 / 150 for v in ln.box)
            for word in ln.text.split():
                x0, y0, x1, y1 = words[word]
                assert bx0 - 1 <= x0 < x1 <= bx1 + 1 and by0 - 1 <= y0 < y1 <= by1 + 1, (word, words[word], ln.box)


def test_pdf_copies_text_layer_pages_and_pages_without_line_boxes_as_they_are(tmp_path):
    from test_layout_textlayer import article_page, write_pdf

    path = write_pdf(tmp_path / "a.pdf", [article_page(), article_page()])
    source = Source(path, "a.pdf", Kind.PDF, PurePosixPath("a"), 1, 1, 2, True)
    before = pypdfium2.PdfDocument(path)[0].get_textpage().get_text_range()
    deepseek = pagerecord.of_markdown("# Results\n")
    data = pdf.document(source, [DocumentPage(1, drawn_record(1275, 1650), text_layer=True),
                                 DocumentPage(2, deepseek)], _image_of(source))
    doc = pypdfium2.PdfDocument(data)
    assert [doc[i].get_textpage().get_text_range() for i in range(2)] == [before, before]  # nothing added


@pytest.mark.parametrize("kind, suffix", [(Kind.PNG, ".png"), (Kind.JPEG, ".jpg")])
def test_pdf_of_an_image_holds_the_image_as_decoded(tmp_path, kind, suffix):
    """A PNG's pixels come back exactly (lossless, rows as the PNG encoder filtered them); a JPEG that needs no
    turning is embedded as its own bytes."""
    image = draw_page("Apples and pears\n\nThe barns are full.", size=(400, 300)).convert("RGB")
    image.putpixel((5, 5), (200, 30, 90))
    path = tmp_path / f"scan{suffix}"
    image.save(path, dpi=(72, 72))
    source = _png_source(path, kind)
    data = pdf.document(source, [DocumentPage(1, None)], _image_of(source))
    page = pypdfium2.PdfDocument(data)[0]
    assert tuple(round(v) for v in page.get_size()) == (400, 300)
    if kind is Kind.JPEG:
        assert path.read_bytes() in data
        return
    drawn = page.render(scale=1).to_pil().convert("RGB")
    assert drawn.size == image.size and drawn.tobytes() == image.tobytes()
    assert len(data) < 2 * path.stat().st_size + 4096  # about the PNG's size, not raw pixels
    image.convert("L").save(path, dpi=(72, 72))  # a grey scan stays one channel
    grey = pdf.document(source, [DocumentPage(1, None)], _image_of(source))
    drawn = pypdfium2.PdfDocument(grey)[0].render(scale=1).to_pil().convert("L")
    assert drawn.tobytes() == image.convert("L").tobytes() and b"/DeviceGray" in grey


def test_the_hand_written_pdf_is_valid_for_poppler_and_holds_any_text(tmp_path):
    sheet = pdf._Sheet((0, 0, 300, 200), (300, 200), lines=[("Grüße aus 東京 (tab)\\", 10, 100, 290, 120)])
    data = pdf.sheets_pdf([sheet])
    assert pypdfium2.PdfDocument(data)[0].get_textpage().get_text_range() == "Grüße aus 東京 (tab)\\"
    if shutil.which("pdftotext"):
        r = subprocess.run(["pdftotext", "-", "-"], input=data, capture_output=True)
        assert r.returncode == 0 and not r.stderr and "Grüße aus 東京" in r.stdout.decode()


# -- the registry -------------------------------------------------------------------------------------------

def test_one_registry_is_the_format_option_and_serves_offers():
    from ocrbatch.serve import accept

    assert config.FORMATS == tuple(RENDERERS) and config.FORMATS[:5] == ("md", "json", "txt", "hocr", "pdf")
    for name, r in RENDERERS.items():
        assert accept.choose(None, name).format == (None if name == "json" else name)
        if name != "json":
            assert r.media in accept.OFFERS and accept.choose(r.media, None).format == name
        assert (r.render is None) == r.per_document
    assert accept.choose("*/*", None).media == accept.JSON and accept.choose("text/*", None).format == "md"
    assert config.parse_formats("pdf,txt") == ("md", "txt", "pdf")


# -- end to end ----------------------------------------------------------------------------------------------

def test_convert_writes_md_txt_hocr_and_a_searchable_pdf_per_document(tmp_path):
    out = tmp_path / "out"
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "sample_docs", docs)
    r = run_cli("convert", str(docs), "-o", str(out), "--format", "md,txt,hocr,pdf", "--join", "--json")
    assert r.returncode == 0, r.stderr
    for page_md in out.rglob("*.md"):
        if page_md.parent == out and page_md.stem == "report":
            continue  # the joined document
        page_json = json.loads(page_md.with_suffix(".json").read_text())  # pdf writes the page JSON too
        assert page_md.with_suffix(".txt").is_file()
        root = ET.fromstring(page_md.with_suffix(".hocr").read_bytes())
        boxes = [ln["bbox"] for ln in _titles(root, "ocr_line")]
        assert boxes == [" ".join(str(round(v)) for v in ln["box"]) for ln in page_json["lines"]]
    assert (out / "report.txt").read_bytes().count(b"\f") == 2 and (out / "report.hocr").is_file()
    for name in ("report", "invoice", "table", "letter-scan", "article-two-column"):
        doc = pypdfium2.PdfDocument(out / f"{name}.pdf")
        pages = sorted(out.glob(f"{name}/page-*.json")) or [out / f"{name}.json"]
        assert len(doc) == len(pages)
        for i, pj in enumerate(pages):
            lines = json.loads(pj.read_text())["lines"]
            text = doc[i].get_textpage().get_text_range()
            assert lines and all(ln["text"] in text for ln in lines), name
    summary = json.loads(r.stdout)
    again = run_cli("convert", str(docs), "-o", str(out), "--format", "md,txt,hocr,pdf", "--json")
    assert json.loads(again.stdout)["pages_skipped"] == summary["pages_ok"]
    (out / "table.txt").unlink()  # a page without its file in a format asked for is redone
    again = run_cli("convert", str(docs), "-o", str(out), "--format", "txt", "--json")
    assert json.loads(again.stdout)["pages_ok"] == 1 and (out / "table.txt").is_file()


def test_stdout_prints_plain_text_pages_apart_by_a_form_feed(tmp_path):
    path = save_pdf(tmp_path / "two.pdf", [draw_page("Apples and pears", size=(600, 300)),
                                           draw_page("Barns are full", size=(600, 300))])
    r = run_cli("convert", str(path), "-o", "-", "--format", "txt")
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.split("\f")
    assert "Apples" in first and "Barns" in second and "<!--" not in r.stdout
    bad = run_cli("convert", str(path), "-o", "-", "--format", "pdf")
    assert bad.returncode == 2 and "--format pdf writes files" in bad.stderr


def test_a_format_the_engine_cannot_give_leaves_its_file_out_with_one_line_per_page(tmp_path):
    path = save_pdf(tmp_path / "two.pdf", [draw_page("one", size=(300, 300)), draw_page("two", size=(300, 300))])
    out = tmp_path / "out"
    r = run_cli("convert", str(path), "-o", str(out), "--engine", "fake", "--format", "hocr,pdf")
    assert r.returncode == 0, r.stderr
    assert re.findall(r"two\.pdf page (\d): no hocr: hocr needs each line's box, and the engine gave no boxes",
                      r.stderr) == ["1", "2"]
    assert not list(out.rglob("*.hocr")) and (out / "two" / "page-0001.md").is_file()
    assert "pages 1, 2 without text" in r.stderr and len(pypdfium2.PdfDocument(out / "two.pdf")) == 2
    again = run_cli("convert", str(path), "-o", str(out), "--engine", "fake", "--format", "hocr", "--json")
    assert json.loads(again.stdout)["pages_skipped"] == 2  # refused once, not redone for it

