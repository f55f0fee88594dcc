"""The PDF text-layer fast path: born-digital PDFs written here by hand, read without OCR."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import raw_pdf
from ocrbatch import textlayer
from ocrbatch.config import RunConfig
from ocrbatch.pdfium import PdfHandle
from ocrbatch.pipeline.run import run
from ocrbatch.records import Status

LEFT = ["Alpha one begins the left column of", "this page and alpha two carries on,",
        "alpha three keeps going a little and", "alpha four closes the left column."]
RIGHT = ["Beta one opens the right column of", "the page and beta two follows it on,",
         "beta three fills the line as well and", "beta four ends the right column."]
TABLE = [("Animal", "Description", "Price"), ("Gnat", "per gram", "13.65"), ("Gnu", "stuffed", "92.50"),
         ("Emu", "stuffed", "33.33")]


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def write_pdf(path: Path, pages: list[list[tuple[str, float, float, float]]], *, rotate: int = 0,
              sideways: bool = False) -> Path:
    """A PDF whose pages hold Helvetica text: (text, x, y, size) in points, y from the bottom, on a
    US Letter page. `rotate` sets the page's /Rotate; `sideways` draws the page turned a quarter
    anticlockwise onto landscape paper (text running up it), as a scanner writes a page fed sideways."""
    objects: list[bytes] = []
    kids = []
    media = "0 0 792 612" if sideways else "0 0 612 792"
    for items in pages:
        place = [f"0 1 -1 0 {792 - y} {x} Tm" if sideways else f"{x} {y} Td" for _, x, y, _ in items]
        content = "".join(f"BT /F{2 if size >= 16 else 1} {size} Tf {at} ({_escape(t)}) Tj ET\n"
                          for (t, x, y, size), at in zip(items, place)).encode("latin-1")
        objects.append(b"<< /Length %d >>\nstream\n" % len(content) + content + b"endstream")
        content_id = len(objects) + 2  # objects 1 and 2 are the catalog and the page tree
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [{media}] /Rotate {rotate} "
                       f"/Contents {content_id} 0 R "
                       f"/Resources << /Font << /F1 FONT1 0 R /F2 FONT2 0 R >> >> >>".encode())
        kids.append(len(objects) + 2)
    font1, font2 = len(objects) + 3, len(objects) + 4
    objects = [o.replace(b"FONT1", str(font1).encode()).replace(b"FONT2", str(font2).encode()) for o in objects]
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>")
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               f"<< /Type /Pages /Kids [{' '.join(f'{k} 0 R' for k in kids)}] /Count {len(kids)} >>".encode()] \
        + objects
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw_pdf(objects))
    return path


def article_page() -> list[tuple[str, float, float, float]]:
    items = [("Results of the Study", 200, 720, 20)]
    items += [(t, 72, 660 - 14 * i, 10) for i, t in enumerate(LEFT)]
    items += [(t, 320, 660 - 14 * i, 10) for i, t in enumerate(RIGHT)]
    items += [("The table below lists the animals we counted on the farm.", 72, 560, 10)]
    for r, cells in enumerate(TABLE):
        items += [(c, 150 + 110 * k, 530 - 14 * r, 10) for k, c in enumerate(cells)]
    return items


@pytest.fixture()
def born_digital(tmp_path: Path) -> Path:
    return write_pdf(tmp_path / "in" / "article.pdf", [article_page()])


def test_born_digital_page_reads_through_the_text_layer(born_digital: Path):
    handle = PdfHandle(born_digital)
    try:
        text = handle.text_chars(0)
    finally:
        handle.close()
    assert textlayer.unusable(text) is None
    page = textlayer.page_markdown(text, 150)
    md = page.markdown
    assert md.startswith("# Results of the Study\n")
    assert md.index("alpha four closes") < md.index("Beta one opens")  # column order
    assert "| Gnat | per gram | 13.65 |" in md
    assert md.index("Beta") < md.index("| Animal")


def _layer_markdown(path: Path):
    handle = PdfHandle(path)
    try:
        return textlayer.page_markdown(handle.text_chars(0), 150)
    finally:
        handle.close()


@pytest.mark.parametrize("rotate, sideways, turned", [(90, False, 0), (90, True, 90), (0, True, 90),
                                                      (270, True, 90)])
def test_page_shown_turned_or_drawn_sideways_reads_like_the_upright_page(tmp_path, rotate, sideways, turned):
    upright = _layer_markdown(write_pdf(tmp_path / "upright.pdf", [article_page()]))
    page = _layer_markdown(write_pdf(tmp_path / "turned.pdf", [article_page()], rotate=rotate, sideways=sideways))
    assert page.markdown == upright.markdown
    assert page.turn == turned


def test_table_of_contents_with_dot_leaders_reads_through_the_text_layer(tmp_path):
    entries = [("Introduction", 1), ("Getting started", 3), ("Options", 7), ("Exit codes", 12)]
    items = [("Contents", 72, 720, 20)]
    items += [(f"{n}  {title} " + ". " * (40 - len(title) // 2) + str(page), 72, 680 - 18 * n, 10)
              for n, (title, page) in enumerate(entries, 1)]
    page = _layer_markdown(write_pdf(tmp_path / "toc.pdf", [items]))
    assert page is not None
    assert "Getting started" in page.markdown and page.markdown.count(". .") >= 4
    assert "12" in page.markdown.split("Exit codes")[1]
    entries = [l for l in page.markdown.splitlines() if ". . ." in l]
    assert len(entries) == 4, page.markdown  # one line each, not run together as a paragraph


def test_empty_and_garbage_layers_are_refused(tmp_path: Path):
    empty = write_pdf(tmp_path / "empty.pdf", [[("7", 300, 40, 10)]])
    garbage = write_pdf(tmp_path / "garbage.pdf", [[("\x80\x81\x82 \x83\x84 ~~~ ^^^ ||| \x85\x86\x87 @@@ ###", 72,
                                                     700, 10)] * 3])
    for path, why in ((empty, "empty"), (garbage, "garbage")):
        handle = PdfHandle(path)
        try:
            text = handle.text_chars(0)
        finally:
            handle.close()
        assert textlayer.page_markdown(text, 150) is None
        assert why in textlayer.unusable(text)


def test_convert_takes_the_text_layer_path_and_records_it(born_digital: Path, tmp_path: Path):
    out = tmp_path / "out"
    summary = run(RunConfig(inputs=(str(born_digital),), output=out, engine="fake", text_layer="auto"))
    assert summary.counts["ok"] == 1
    md = (out / "article.md").read_text() if (out / "article.md").exists() else \
        (out / "article" / "page-0001.md").read_text()
    assert "alpha four closes" in md  # real text, not the fake engine's description
    record = json.loads((out / "manifest.jsonl").read_text().splitlines()[0])
    assert record["info"]["path"] == "text-layer"


def test_text_layer_off_sends_the_page_to_the_engine(born_digital: Path, tmp_path: Path):
    out = tmp_path / "out"
    run(RunConfig(inputs=(str(born_digital),), output=out, engine="fake", text_layer="off"))
    record = json.loads((out / "manifest.jsonl").read_text().splitlines()[0])
    assert record.get("info", {}).get("path") != "text-layer"


def test_text_layer_only_fails_pages_without_a_layer(tmp_path: Path):
    from PIL import Image

    scan = tmp_path / "in" / "scan.png"
    scan.parent.mkdir(parents=True)
    Image.new("RGB", (200, 100), "white").save(scan)
    out = tmp_path / "out"
    summary = run(RunConfig(inputs=(str(scan),), output=out, engine="fake", text_layer="only"))
    assert summary.counts["failed"] == 1
    record = json.loads((out / "manifest.jsonl").read_text().splitlines()[0])
    assert record["status"] == Status.FAILED.value
    assert "text-layer only" in record["error"]


def test_a_layer_the_layout_chokes_on_is_read_by_the_engine_and_the_run_goes_on(born_digital: Path, tmp_path: Path,
                                                                               monkeypatch, caplog):
    def broken(*args):
        raise IndexError("list index out of range")

    monkeypatch.setattr(textlayer, "page_markdown", broken)  # a layout bug met on one user's PDF
    out = tmp_path / "out"
    summary = run(RunConfig(inputs=(str(born_digital),), output=out, engine="fake", text_layer="auto"))
    assert summary.counts["ok"] == 1
    record = json.loads((out / "manifest.jsonl").read_text().splitlines()[0])
    assert record["status"] == "ok" and record.get("info", {}).get("path") != "text-layer"
    assert any("cannot lay out the text layer (IndexError" in r.getMessage() for r in caplog.records)


def test_letters_of_a_ligature_glyph_stay_in_their_word():
    from ocrbatch.pdfium import PageText

    # PDFium spells out an "fi" ligature as two characters sharing the glyph's box.
    word = [(ord(c), 72 + 6 * k, 700, 78 + 6 * k, 712) for k, c in enumerate("pro")]
    word += [(ord("f"), 90, 700, 98, 712), (ord("i"), 90, 700, 98, 712)]
    word += [(ord(c), 98 + 6 * k, 700, 104 + 6 * k, 712) for k, c in enumerate("le")]
    text = PageText(word + [(0x20, 110, 700, 113, 712)] + [(ord(c), 113 + 6 * k, 700, 119 + 6 * k, 712)
                                                           for k, c in enumerate("page")], 612, 792, 0, 0.0)
    assert [l.text for l in textlayer.text_lines(text, 72)] == ["profile page"]


def test_a_word_hyphenated_at_the_end_of_a_line_is_joined_again():
    from ocrbatch.pdfium import PageText

    def word(text, x, y):
        return [(ord(c), x + 6 * k, y, x + 6 + 6 * k, y + 12) for k, c in enumerate(text)]

    first = word("A long list of ASN.1 declara", 72, 700)
    first.append((0xFFFE, first[-1][3], 700, first[-1][3] + 4, 712))  # PDFium's line-end hyphen
    md = textlayer.page_markdown(PageText(first + word("tions follows.", 72, 686), 612, 792, 0, 0.0), 72).markdown
    assert "declarations follow" in md and "\ufffe" not in md


def report_with_furniture(path: Path) -> Path:
    """Two born-digital pages with a running head (title and year) and a page number in the foot."""
    pages = []
    for n in (1, 2):
        items = [("Farm Cooperative Annual Report 2024", 72, 750, 8), (f"Page {n} of 2", 280, 36, 8)]
        items += [(t, 72, 660 - 14 * i, 10) for i, t in enumerate(LEFT + RIGHT)]
        pages.append(items)
    return write_pdf(path, pages)


def test_text_layer_pages_leave_furniture_out_unless_kept_and_resume_tells_them_apart(tmp_path: Path):
    from conftest import run_cli

    pdf = report_with_furniture(tmp_path / "in" / "report.pdf")
    out = tmp_path / "out"
    summary = run(RunConfig.build((str(pdf),), out, engine="fake"))
    assert summary.counts["ok"] == 2
    first = (out / "report" / "page-0001.md").read_text()
    assert "alpha four closes" in first and "beta four ends" in first  # read from the layer, not the fake engine
    assert "Page 1 of 2" not in first and "Annual Report" not in first
    assert json.loads((out / "manifest.jsonl").read_text().splitlines()[0])["info"]["path"] == "text-layer"

    # the same folder with the furniture kept: both pages are redone, not skipped as already done
    summary = run(RunConfig.build((str(pdf),), out, engine="fake", keep_furniture=True))
    assert summary.counts["ok"] == 2 and summary.counts.get("skipped", 0) == 0
    second = (out / "report" / "page-0002.md").read_text()
    assert "Page 2 of 2" in second and "Farm Cooperative Annual Report 2024" in second
    assert second.index("Annual Report") < second.index("Alpha one") < second.index("Page 2 of 2")

    kept = tmp_path / "kept"  # the option from the environment (config.ENV), as the command line reads it
    r = run_cli("convert", str(pdf), "-o", str(kept), "--engine", "fake", env={"OCRBATCH_KEEP_FURNITURE": "1"})
    assert r.returncode == 0, r.stderr
    assert "Page 1 of 2" in (kept / "report" / "page-0001.md").read_text()


def test_resume_keeps_the_info_of_a_skipped_page_and_redoes_pages_for_another_text_layer_or_dpi(
        born_digital: Path, tmp_path: Path):
    from PIL import Image

    scan = born_digital.parent / "scan.png"
    Image.new("RGB", (200, 100), "white").save(scan)
    out = tmp_path / "out"

    def convert(**options) -> dict[str, dict]:
        run(RunConfig(inputs=(str(born_digital.parent),), output=out, engine="fake", **options))
        return {Path(r["source"]).name: r for r in map(json.loads, (out / "manifest.jsonl").read_text().splitlines())}

    assert convert()["article.pdf"]["info"]["path"] == "text-layer"
    again = convert()
    assert again["article.pdf"]["status"] == "skipped"
    assert again["article.pdf"]["info"]["path"] == "text-layer"  # what the page was read from, still said
    off = convert(text_layer="off")
    assert off["article.pdf"]["status"] == "ok"  # redone by the engine, not skipped as done
    assert off["article.pdf"].get("info", {}).get("path") != "text-layer"
    assert off["scan.png"]["status"] == "skipped"  # no text layer to read: the same either way
    finer = convert(text_layer="off", dpi=200)
    assert (finer["article.pdf"]["status"], finer["scan.png"]["status"]) == ("ok", "skipped")
    assert convert(text_layer="off", dpi=200)["article.pdf"]["status"] == "skipped"
