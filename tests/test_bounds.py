"""Small files with big costs, names that forge log lines, and writes that could overwrite the run's own files
(issue 39): each probe of that round as a test. Bombs are made small: a 700-byte PDF claiming a million pages, a
1 MB stream inflating to 1 GiB (its run's memory measured with getrusage in a subprocess, never a clock), a
300-frame TIFF shown linear by counting the frame directories Pillow reads."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import unicodedata
import zlib
from pathlib import Path, PurePosixPath

import pytest

from conftest import draw_page, manifest, raw_pdf, save_pdf

BOUND_S = 120  # every run's own bound: a hang is a failure


def cli(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ocrbatch", *args], capture_output=True, text=True,
                          timeout=BOUND_S, **kw)


def errors(p: subprocess.CompletedProcess) -> list[str]:
    return [line for line in p.stderr.splitlines() if line.startswith("ocrbatch: error:")]


def pdf(*objects: bytes, pad: int = 0) -> bytes:
    """A PDF of these objects (the first the catalog), with its xref; `pad` bytes of comment make it larger."""
    return raw_pdf(list(objects), pad=pad)


def loop_pdf(count: int, pad: int = 360) -> bytes:
    """A page tree whose root lists itself among its kids, claiming `count` pages; ~700 bytes."""
    return pdf(b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [2 0 R 3 0 R] /Count %d >>" % count,
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>", pad=pad)


# -- B5: a page count is checked against the page tree, the file's size and a cap ------------------------------

def test_a_700_byte_pdf_claiming_a_million_pages_is_one_line_and_one_record(tmp_path):
    (tmp_path / "loop.pdf").write_bytes(loop_pdf(1_000_000))
    assert 600 < (tmp_path / "loop.pdf").stat().st_size < 800
    out = tmp_path / "out"
    p = cli("convert", str(tmp_path / "loop.pdf"), "-o", str(out), "--engine", "fake")
    assert p.returncode == 3, p.stderr
    (line,) = errors(p)
    assert "loop.pdf" in line and "1,000,000 pages" in line and "over the 100,000" in line
    assert len(manifest(out)) == 1 and "pages=1/1" in p.stderr  # the total counted ahead agrees


def test_a_claim_more_pages_than_the_files_bytes_can_hold_fails_the_file_once(tmp_path):
    (tmp_path / "loop.pdf").write_bytes(loop_pdf(50_000))
    out = tmp_path / "out"
    p = cli("convert", str(tmp_path / "loop.pdf"), "-o", str(out), "--engine", "fake")
    (line,) = errors(p)
    assert "50,000 pages" in line and "bytes can hold" in line
    assert [r["status"] for r in manifest(out)] == ["failed"]


def test_the_pages_a_damaged_tree_lacks_are_one_record_and_the_rest_are_read(tmp_path):
    """The CLI, stream() and serve's probe all take the pages the tree holds, and the rest as one record."""
    from ocrbatch import Converter
    from ocrbatch.pipeline import discover

    path = tmp_path / "loop.pdf"
    path.write_bytes(loop_pdf(300))
    out = tmp_path / "out"
    p = cli("convert", str(path), "-o", str(out), "--engine", "fake")
    (line,) = errors(p)
    assert "loop.pdf pages 2-300" in line and "holds 1" in line
    assert sorted(r["status"] for r in manifest(out)) == ["failed", "ok"] and "pages=2/2" in p.stderr
    with Converter(engine="fake") as conv:
        results = list(conv.stream(path))
    assert sorted(r.status.value for r in results) == ["failed", "ok"]
    _, count, _ = discover.probe(discover.Candidate(path, "loop.pdf", PurePosixPath("loop.pdf")))
    assert count == 1  # serve's and submit()'s count


# -- B6: a stream's inflated size and an image's declared size are bounded -------------------------------------

def bomb(mib: int) -> bytes:
    """zlib data inflating to `mib` MiB of spaces, made in a moment: after a full flush the compressor starts
    afresh, so each MiB compresses to the same bytes, repeated."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = b" " * (1 << 20)
    c.compress(chunk)
    c.flush(zlib.Z_FULL_FLUSH)
    part = c.compress(chunk) + c.flush(zlib.Z_FULL_FLUSH)
    check = 1
    for _ in range(mib):
        check = zlib.adler32(chunk, check)
    return b"\x78\xda" + part * mib + c.flush() + check.to_bytes(4, "big")


def one_page(contents: bytes, extra: bytes = b"") -> bytes:
    return pdf(b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R " + extra + b">>", contents)


RSS_BOUND_MB = 400  # the whole convert process, PDFium and Python included (it took 2.1 GB without the bound)


def test_a_1_mb_content_stream_inflating_to_1_gib_fails_its_file_in_bounded_memory(tmp_path):
    data = bomb(1024)
    path = tmp_path / "bomb.pdf"
    path.write_bytes(one_page(b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(data) + data +
                              b"\nendstream"))
    assert path.stat().st_size < 1_200_000
    out = tmp_path / "out"
    measure = ("import resource, subprocess, sys\n"
               "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
               "sys.stdout.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) + '\\n')\n"
               "sys.stdout.write(p.stderr)\n")
    p = subprocess.run([sys.executable, "-c", measure, sys.executable, "-m", "ocrbatch", "convert", str(path),
                        "-o", str(out), "--engine", "fake"], capture_output=True, text=True, timeout=BOUND_S)
    rss_kb, *stderr = p.stdout.splitlines()
    assert int(rss_kb) < RSS_BOUND_MB * 1024, p.stdout
    (line,) = [s for s in stderr if s.startswith("ocrbatch: error:")]
    assert "bomb.pdf" in line and "object 4" in line and "64 MiB" in line
    assert [r["status"] for r in manifest(out)] == ["failed"]


def test_an_image_declaring_more_pixels_than_the_bound_fails_before_it_is_decoded(tmp_path):
    from ocrbatch.errors import DecodeError
    from ocrbatch.pdfscan import check

    image = b"<< /Type /XObject /Subtype /Image /Width 100000 /Height 100000 /ColorSpace /DeviceRGB " \
            b"/BitsPerComponent 8 /Length 3 /Filter /DCTDecode >>\nstream\nabc\nendstream"
    path = tmp_path / "huge.pdf"
    path.write_bytes(one_page(b"<< /Length 0 >>\nstream\n\nendstream") + b"5 0 obj\n" + image + b"\nendobj\n")
    with pytest.raises(DecodeError, match="declares 30,000 MB"):
        check(path)


def test_ordinary_pdfs_pass_the_stream_check(tmp_path):
    from ocrbatch.pdfscan import check

    save_pdf(tmp_path / "scan.pdf", [draw_page(f"page {i}") for i in range(3)])
    small = zlib.compress(b"BT /F1 12 Tf 72 712 Td (hello) Tj ET\n" * 1000)
    (tmp_path / "text.pdf").write_bytes(one_page(b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(small)
                                                 + small + b"\nendstream"))
    for name in ("scan.pdf", "text.pdf"):
        check(tmp_path / name)


# -- B7: multi-frame images are read in time linear in their frames --------------------------------------------

FRAMES = 300


@pytest.fixture
def tiff(tmp_path) -> Path:
    from PIL import Image

    frames = [Image.new("L", (120, 60), 255) for _ in range(FRAMES)]
    path = tmp_path / "fax.tif"
    frames[0].save(path, save_all=True, append_images=frames[1:], compression="tiff_deflate")
    return path


@pytest.fixture
def directories_read(monkeypatch):
    """How many TIFF frame directories Pillow reads (each step of a seek reads one): a count, not a clock."""
    from PIL import TiffImagePlugin

    n = [0]
    load = TiffImagePlugin.ImageFileDirectory_v2.load

    def counted(self, fp):
        n[0] += 1
        return load(self, fp)

    monkeypatch.setattr(TiffImagePlugin.ImageFileDirectory_v2, "load", counted)
    return n


def test_a_300_frame_tiff_is_read_in_steps_linear_in_its_frames(tiff, directories_read):
    """Reopened and sought from frame 0 for each page, it took n²/2 = 45,000 steps."""
    from ocrbatch import Converter

    with Converter(engine="fake") as conv:
        results = list(conv.stream(tiff))
    assert len(results) == FRAMES and all(r.ok for r in results)
    assert directories_read[0] <= 12 * FRAMES, directories_read[0]


def test_submitting_a_tiffs_pages_in_chunks_counts_its_frames_once(tiff, directories_read):
    """serve submits a window of pages at a time; each submit recounting 300 frames made it quadratic."""
    from ocrbatch import Converter

    futures = []
    with Converter(engine="fake") as conv:
        for first in range(1, FRAMES + 1, 8):
            futures += conv.submit(tiff, "bulk", pages=f"{first}-{min(FRAMES, first + 7)}")
        assert all(f.result().ok for f in futures) and len(futures) == FRAMES
    assert directories_read[0] <= 12 * FRAMES, directories_read[0]


# -- max_pixels for PIL images given to the API ----------------------------------------------------------------

def test_a_pil_image_over_max_pixels_fails_as_its_page(tmp_path):
    from PIL import Image

    from ocrbatch import Converter

    with Converter(engine="fake", max_pixels=1_000_000) as conv:
        big = conv.submit(Image.new("L", (1200, 1000), 255)).result()
        small = conv.submit(Image.new("L", (300, 200), 255)).result()
    assert big.status.value == "failed" and "over --max-pixels" in big.error and "1200x1000" in big.error
    assert small.ok


# -- B1, B3 and item 3: no write replaces what the run reads or keeps ------------------------------------------

@pytest.fixture
def done(tmp_path) -> tuple[Path, Path]:
    """A folder of two pages converted once into out/."""
    docs = tmp_path / "docs"
    docs.mkdir()
    draw_page("a page").save(docs / "a.png")
    save_pdf(docs / "b.pdf", [draw_page("one"), draw_page("two")])
    out = tmp_path / "out"
    assert cli("convert", str(docs), "-o", str(out), "--engine", "fake").returncode == 0
    return docs, out


@pytest.mark.parametrize("target, what", [("docs/a.png", "inside the input folder"),
                                          ("docs/b.pdf", "inside the input folder"),
                                          ("out/manifest.jsonl", "the manifest"),
                                          ("out/manifest.shard-1-of-2.jsonl", "the manifest"),
                                          ("out/a.md", "a page's output"), ("out/b/page-0001.md", "pages' files"),
                                          ("out/.ocrbatch.lock", "a lock file")])
def test_the_metrics_file_never_replaces_an_input_the_manifest_a_lock_or_a_page(done, tmp_path, target, what):
    docs, out = done
    path = tmp_path / target
    if not path.exists():
        path.write_text("kept\n")
    before = path.read_bytes()
    p = cli("convert", str(docs), "-o", str(out), "--engine", "fake", "--metrics-file", str(path))
    assert p.returncode == 2, p.stderr
    (line,) = errors(p)
    assert "--metrics-file" in line and str(path) in line and what in line
    assert path.read_bytes() == before


def test_a_metrics_file_beside_the_pages_is_still_written(done):
    docs, out = done
    p = cli("convert", str(docs), "-o", str(out), "--engine", "fake", "--metrics-file", str(out / "m.prom"))
    assert p.returncode == 0, p.stderr
    assert "ocrbatch_pages_total" in (out / "m.prom").read_text() or (out / "m.prom").stat().st_size > 0


def test_json_never_goes_into_the_manifest(done):
    docs, out = done
    before = (out / "manifest.jsonl").read_bytes()
    with open(out / "manifest.jsonl", "a") as stdout:  # `>> out/manifest.jsonl`
        p = subprocess.run([sys.executable, "-m", "ocrbatch", "convert", str(docs), "-o", str(out), "--engine",
                            "fake", "--json"], stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=BOUND_S)
    assert p.returncode == 2
    (line,) = [s for s in p.stderr.splitlines() if s.startswith("ocrbatch: error:")]
    assert "--json" in line and "the manifest" in line
    assert (out / "manifest.jsonl").read_bytes() == before


def test_the_debug_folder_is_never_the_input_folder(done, tmp_path):
    """B3: each run read the last run's pictures as new pages."""
    docs, out = done
    p = cli("convert", str(docs), "-o", str(out), "--engine", "fake", "--debug-layout", str(docs))
    assert p.returncode == 2
    (line,) = errors(p)
    assert "--debug-layout" in line and "a folder the run reads" in line
    assert sorted(f.name for f in docs.iterdir()) == ["a.png", "b.pdf"]


def test_a_joined_file_never_replaces_an_input(tmp_path):
    """Discovery takes a file by its content: `a.md` that is a PDF is an input, where --join would write a's."""
    docs = tmp_path / "docs"
    save_pdf(docs / "a.pdf", [draw_page("one"), draw_page("two")])
    save_pdf(docs / "x" / "a.pdf", [draw_page("an input named a.md")]).rename(docs / "x" / "a.md")
    out = tmp_path / "out"
    (out / "x").mkdir(parents=True)
    (out / "a.md").symlink_to(docs / "x" / "a.md")  # the joined file's name leads to the input
    before = (docs / "x" / "a.md").read_bytes()
    p = cli("convert", str(docs / "a.pdf"), str(docs / "x" / "a.md"), "-o", str(out), "--engine", "fake", "--join")
    assert (docs / "x" / "a.md").read_bytes() == before, p.stderr
    assert any("joined" in line and "an input of the run" in line for line in errors(p)), p.stderr


# -- B2: a long stem with --format md,json ---------------------------------------------------------------------

def test_a_long_stem_fits_both_its_markdown_and_its_json(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    name = "é" * 125 + "s"  # 251 bytes: NAME.md is 254, NAME.json would be 256
    draw_page("a long name").save(docs / name, format="PNG")
    out = tmp_path / "out"
    p = cli("convert", str(docs), "-o", str(out), "--engine", "fake", "--format", "md,json")
    assert p.returncode == 0, p.stderr
    names = sorted((f.suffix, f.name) for f in out.iterdir() if f.suffix in (".md", ".json"))
    assert [s for s, _ in names] == [".json", ".md"] and all(len(os.fsencode(n)) <= 255 for _, n in names)
    assert names[1][1] == name + ".md"  # the Markdown keeps its whole name (earlier runs' names stay)
    assert names[0][1].startswith("é" * 100) and "~" in names[0][1]  # the JSON's is cut short with a hash
    assert [r["status"] for r in manifest(out)] == ["ok"]


def test_a_write_error_names_the_file_it_failed_on(tmp_path):
    from ocrbatch.manifest import Manifest
    from ocrbatch.pipeline.write import Writer
    from ocrbatch.records import Attachment, Kind, PageRef, PageResult, Source, Status

    out = tmp_path / "out"
    out.mkdir()
    src = Source(tmp_path / "a.png", "a.png", Kind.PNG, PurePosixPath("a"), 1, 1, 1, False)
    too_long = PurePosixPath("images/" + "f" * 300 + ".png")
    result = PageResult(ref=PageRef(src, 1), status=Status.OK, markdown="text",
                        attachments=[Attachment(too_long, b"png")])
    Writer(out, Manifest(out, "fake"), "fake").write(result)
    assert result.status is Status.FAILED and result.error.startswith(f"cannot write {too_long}")


# -- B4 and item 4: names on a terminal, and in Unicode's two forms --------------------------------------------

def test_a_name_with_a_newline_and_escape_codes_cannot_forge_a_line_or_colour_stderr(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    forged = "x\n2026-12-07T02:00:00+0000 ocrbatch: finished pages=1 ok=1 exit_code=0 \x1b[31mred\u202e.png"
    (docs / forged).write_bytes(b"not an image")
    p = cli("convert", str(docs), "-o", str(tmp_path / "out"), "--engine", "fake", "-v")
    assert p.returncode == 3
    assert "\x1b" not in p.stderr and "\u202e" not in p.stderr
    finished = [line for line in p.stderr.splitlines() if re.match(r"\S+ ocrbatch: finished ", line)]
    assert len(finished) == 1 and finished[0].endswith("exit_code=3")
    (line,) = errors(p)
    assert "x\\n2026" in line and "\\x1b[31mred\\u202e.png" in line
    (file_line,) = [s for s in p.stderr.splitlines() if " ocrbatch: file " in s]
    assert "\\\\x1b[31m" in file_line  # logfmt quotes the escape's backslash


def test_nfc_and_nfd_forms_of_a_name_give_composed_output_names_told_apart(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for form in ("NFC", "NFD"):
        draw_page(form).save(docs / (unicodedata.normalize(form, "café") + ".png"))
    out = tmp_path / "out"
    assert cli("convert", str(docs), "-o", str(out), "--engine", "fake").returncode == 0
    names = sorted(f.name for f in out.glob("*.md"))
    assert names == ["café.md", "café.png.md"] and all(unicodedata.is_normalized("NFC", n) for n in names)
    again = cli("convert", str(docs), "-o", str(out), "--engine", "fake", "--json")
    assert json.loads(again.stdout)["pages_skipped"] == 2  # a rerun finds both


# -- weak: a deep tree, and page numbers past 9,999 -------------------------------------------------------------

def test_a_folder_tree_deeper_than_pythons_recursion_limit_is_converted(tmp_path):
    depth = sys.getrecursionlimit() + 200
    top = tmp_path / "deep"
    top.mkdir()
    fd = os.open(top, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        page = draw_page("deep down", size=(200, 100))
        from io import BytesIO

        buf = BytesIO()
        page.save(buf, format="PNG")
        f = os.open("x.png", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(f, buf.getvalue())
        os.close(f)
    finally:
        os.close(fd)
    out = tmp_path / "out"
    try:
        p = cli("convert", str(top), "-o", str(out), "--engine", "fake", "--json")
        assert p.returncode == 0, p.stderr[-2000:]
        assert json.loads(p.stdout)["pages_ok"] == 1 and "RecursionError" not in p.stderr
    finally:  # shutil.rmtree (pytest's cleanup) recurses too
        remove_deep(top)
        if out.exists():
            remove_deep(out)


def remove_deep(top: Path) -> None:
    """Remove a tree of any depth: each pass lifts every folder's entries one level up."""
    n = 0
    while True:
        entries = os.listdir(top)
        if not entries:
            break
        for name in entries:
            path = top / name
            if path.is_dir() and not path.is_symlink():
                for child in os.listdir(path):
                    n += 1
                    os.rename(path / child, top / f"lifted-{n}")
                os.rmdir(path)
            else:
                path.unlink()
    os.rmdir(top)


def test_page_numbers_are_as_wide_as_a_documents_page_count_past_9999(tmp_path):
    """page-10000.md sorted before page-9999.md; a document of 10,000 pages is numbered 5 digits wide."""
    kids = b"3 0 R " * 10_000  # one page object, listed 10,000 times: a valid tree
    (tmp_path / "long.pdf").write_bytes(pdf(b"<< /Type /Catalog /Pages 2 0 R >>",
                                            b"<< /Type /Pages /Kids [" + kids + b"] /Count 10000 >>",
                                            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 100] >>"))
    out = tmp_path / "out"
    p = cli("convert", str(tmp_path / "long.pdf"), "-o", str(out), "--engine", "fake", "--pages", "9999-10000")
    assert p.returncode == 0, p.stderr
    assert sorted(f.name for f in (out / "long").iterdir()) == ["page-09999.md", "page-10000.md"]


def test_a_rerun_keeps_the_four_digit_names_an_earlier_run_wrote():
    from ocrbatch.pipeline.names import KeyClaims

    class Book:
        def __init__(self, held):
            self._held = held

        def held(self, source):
            return self._held

        def holder(self, name):
            return None

    assert KeyClaims(Book(set())).digits("/a.pdf", 10_000) == 5
    assert KeyClaims(Book({"a/page-0001.md"})).digits("/a.pdf", 10_000) == 4
    assert KeyClaims(Book(set())).digits("/a.pdf", 9_999) == 4
