"""The files a cron job meets (issue 27): what is at the paths ocrbatch keeps (the manifest, the metrics file,
the lock, the page files, --debug-layout's folder) is checked by type before it is opened; long names fit; a
stdout that fails, a closed pipe, empty settings and a page rendered below --dpi each get the answer the README
gives. Every run is bounded by a subprocess timeout: a FIFO that blocked would fail the test, not hang it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import draw_page, manifest, save_pdf
from test_layout_textlayer import article_page, write_pdf

BOUND_S = 120  # every run's own bound: a hang is a failure


def cli(*args: str, env: dict | None = None, stdout=subprocess.PIPE, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ocrbatch", *args], stdout=stdout, stderr=subprocess.PIPE,
                          text=True, timeout=BOUND_S, env={**os.environ, **(env or {})}, **kw)


@pytest.fixture
def docs(tmp_path) -> Path:
    d = tmp_path / "docs"
    d.mkdir()
    draw_page("a page", size=(300, 200)).save(d / "a.png")
    return d


def one_error_line(p: subprocess.CompletedProcess, *words: str) -> None:
    lines = [line for line in p.stderr.splitlines() if "error" in line]
    assert len(lines) == 1 and all(w in lines[0] for w in words), p.stderr
    assert "Traceback" not in p.stderr


# -- special files --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("what", ["fifo", "full", "null", "folder"])
def test_a_metrics_file_that_is_not_a_regular_file_is_refused_unopened(docs, tmp_path, what):
    """Devices are reached through a link in the test's folder: were the check broken (the mutation table
    breaks it on purpose), a run as root would replace the link, never /dev/null itself."""
    path = tmp_path / "m.prom"
    if what == "fifo":
        os.mkfifo(path)
    elif what == "folder":
        path.mkdir()
    else:
        if not Path(f"/dev/{what}").exists():
            pytest.skip(f"/dev/{what} is not on this system")
        path.symlink_to(f"/dev/{what}")
    p = cli("convert", str(docs), "-o", str(tmp_path / "out"), "--engine", "fake", "--metrics-file", str(path))
    assert p.returncode == 2
    one_error_line(p, "--metrics-file", str(path), "not a regular file")
    assert not path.is_file() and (what in ("fifo", "folder") or path.is_symlink())  # never replaced


@pytest.mark.parametrize("what", ["fifo", "zero", "folder"])
def test_a_manifest_that_is_not_a_regular_file_is_refused_unopened(docs, tmp_path, what):
    out = tmp_path / "out"
    out.mkdir()
    path = out / "manifest.jsonl"
    if what == "fifo":
        os.mkfifo(path)
    elif what == "zero":
        path.symlink_to("/dev/zero")
    else:
        path.mkdir()
    p = cli("convert", str(docs), "-o", str(out), "--engine", "fake")
    assert p.returncode == 2
    one_error_line(p, "the manifest", "not a regular file")


@pytest.mark.parametrize("part", [[], ["--shard", "1/2"]], ids=["whole run", "a --shard part's shared hold"])
def test_a_lock_file_that_is_a_fifo_is_refused_unopened(docs, tmp_path, part):
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / ".ocrbatch.lock")
    p = cli("convert", str(docs), "-o", str(out), "--engine", "fake", *part)
    assert p.returncode == 2
    one_error_line(p, "the lock file", "named pipe")


def test_a_manifest_too_large_to_be_ocrbatchs_is_refused(docs, tmp_path):
    from ocrbatch.manifest import MAX_BYTES

    out = tmp_path / "out"
    out.mkdir()
    with open(out / "manifest.jsonl", "wb") as fh:
        fh.truncate(MAX_BYTES + 1)  # sparse: no disk taken
    p = cli("convert", str(docs), "-o", str(out), "--engine", "fake")
    assert p.returncode == 2
    one_error_line(p, "the manifest", "GiB")


def test_manifest_lines_too_long_or_nested_too_deep_are_skipped_with_a_warning(docs, tmp_path):
    from ocrbatch.manifest import MAX_LINE_BYTES

    out = tmp_path / "out"
    assert cli("convert", str(docs), "-o", str(out), "--engine", "fake").returncode == 0
    with open(out / "manifest.jsonl", "a") as fh:
        fh.write("[" * 100_000 + "\n")  # json.loads: RecursionError
        fh.write('{"source": "' + "x" * (MAX_LINE_BYTES + 10) + '"}\n')
    p = cli("convert", str(docs), "-o", str(out), "--engine", "fake", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["pages_skipped"] == 1  # the good record still counts
    assert "not whole JSON records" in p.stderr and f"over {MAX_LINE_BYTES} bytes" in p.stderr


def test_a_page_file_replaced_by_a_fifo_stops_the_run_with_exit_2(docs, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / "a.md")
    p = cli("convert", str(docs), "-o", str(out), "--engine", "fake")
    assert p.returncode == 2 and "not a regular file" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert (out / "a.md").is_fifo()


# -- names ---------------------------------------------------------------------------------------------------

def test_an_input_named_like_the_manifest_is_converted_and_resumed(tmp_path):
    docs = tmp_path / "docs"
    save_pdf(docs / "manifest.jsonl.pdf", [draw_page("one", size=(300, 200)), draw_page("two", size=(300, 200))])
    out = tmp_path / "out"
    for skipped in (0, 2):
        p = cli("convert", str(docs), "-o", str(out), "--engine", "fake", "--json")
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["pages_skipped"] == skipped
    assert (out / "manifest.jsonl").is_file() and len(manifest(out)) == 2
    assert (out / "manifest.jsonl.pdf" / "page-0002.md").is_file()


def test_a_document_named_as_long_as_allowed_gets_its_joined_file(tmp_path):
    docs = tmp_path / "docs"
    name = "d" * 255  # a PDF by its content, no suffix: its pages' folder fits, KEY.md would not unshortened
    save_pdf(docs / "d.pdf", [draw_page("one", size=(300, 200)), draw_page("two", size=(300, 200))]).rename(
        docs / name)
    out = tmp_path / "out"
    p = cli("convert", str(docs), "-o", str(out), "--engine", "fake", "--join")
    assert p.returncode == 0 and "too long" not in p.stderr, p.stderr
    joined = [r for r in manifest(out) if r.get("joined")]
    assert len(joined) == 1 and (out / joined[0]["output"]).read_text().count("<!-- page ") == 2


def test_debug_layout_never_changes_a_pages_result_and_fits_long_names(tmp_path):
    docs = tmp_path / "docs"
    write_pdf(docs / ("t" * 241 + ".pdf"), [article_page()])  # 245 bytes, a text layer: NAME-page-0001.png 259
    results = {}
    for run, extra in (("plain", ()), ("debug", ("--debug-layout", str(tmp_path / "dbg")))):
        out = tmp_path / run
        p = cli("convert", str(docs), "-o", str(out), "--engine", "fake", *extra)
        assert p.returncode == 0, p.stderr
        (rec,) = manifest(out)
        results[run] = (rec["info"]["path"], (out / rec["output"]).read_text())
    assert results["debug"] == results["plain"] and results["plain"][0] == "text-layer"
    assert len(list((tmp_path / "dbg").glob("*.png"))) == 1


def test_an_output_name_over_the_limit_is_a_usage_error(docs, tmp_path):
    p = cli("convert", str(docs), "-o", str(tmp_path / ("o" * 256)), "--engine", "fake")
    assert p.returncode == 2
    one_error_line(p, "too long")


def test_a_debug_folder_inside_the_input_folder_is_not_converted(docs):
    debug = docs / "debug"
    debug.mkdir()
    draw_page("an earlier debug picture", size=(300, 200)).save(debug / "old-page-0001.png")
    out = docs / "out"
    p = cli("convert", str(docs), "-o", str(out), "--engine", "fake", "--debug-layout", str(debug), "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["pages"] == 1 and [Path(r["source"]).name for r in manifest(out)] == ["a.png"]


# -- stdout ----------------------------------------------------------------------------------------------------

@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
def test_a_full_stdout_is_exit_7_not_a_bug(docs, tmp_path):
    with open("/dev/full", "w") as full:
        p = cli("convert", str(docs), "-o", "-", "--engine", "fake", stdout=full)
    assert p.returncode == 7, p.stderr
    assert "No space left" in p.stderr and "bug" not in p.stderr and "Traceback" not in p.stderr
    with open("/dev/full", "w") as full:
        p = cli("convert", str(docs), "-o", str(tmp_path / "out"), "--engine", "fake", "--json", stdout=full)
    assert p.returncode == 7 and "cannot write to stdout" in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_a_closed_stdout_or_a_reader_gone_is_never_a_traceback(docs, tmp_path):
    def closed_stdout():
        os.close(1)

    p = subprocess.run([sys.executable, "-m", "ocrbatch", "convert", str(docs), "-o", "-", "--engine", "fake"],
                       stderr=subprocess.PIPE, text=True, timeout=BOUND_S, preexec_fn=closed_stdout)
    assert p.returncode == 7 and "stdout is closed" in p.stderr and "Traceback" not in p.stderr, p.stderr
    r, w = os.pipe()
    os.close(r)  # `--json | true`: the reader is gone before the summary is printed
    try:
        p = subprocess.run([sys.executable, "-m", "ocrbatch", "convert", str(docs), "-o", str(tmp_path / "out"),
                            "--engine", "fake", "--json"], stdout=w, stderr=subprocess.PIPE, text=True,
                           timeout=BOUND_S)
    finally:
        os.close(w)
    assert p.returncode == 0, p.stderr  # the run's own code: a reader that leaves is its choice
    assert "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr and "error" not in p.stderr, p.stderr


# -- settings -------------------------------------------------------------------------------------------------

def test_empty_settings_are_refused_as_their_flags_are(docs, tmp_path):
    p = cli("convert", str(docs), "-o", "", "--engine", "fake", cwd=tmp_path)
    assert p.returncode == 2 and "--output ''" in p.stderr and list(tmp_path.iterdir()) == [docs], p.stderr
    for env in ({"OCRBATCH_PAGES": ""}, {"OCRBATCH_QUIET": "2"}):
        p = cli("convert", str(docs), "-o", str(tmp_path / "out"), "--engine", "fake", env=env)
        assert p.returncode == 2 and next(iter(env)) in p.stderr, (env, p.stderr)


def test_a_missing_input_is_said_once(docs, tmp_path):
    p = cli("convert", str(docs / "gone.pdf"), str(docs), "-o", str(tmp_path / "out"), "--engine", "fake")
    assert p.returncode == 3 and p.stderr.count("gone.pdf: no such file or directory") == 1, p.stderr


def test_a_page_rendered_below_the_dpi_records_the_dpi_it_got(tmp_path, monkeypatch):
    from ocrbatch import Converter, pdfium

    monkeypatch.setattr(pdfium, "MAX_RENDER_PIXELS", 200_000)  # a letter page at 150 dpi is 2.1 MP
    save_pdf(tmp_path / "docs" / "big.pdf", [draw_page("a page too large", size=(850, 1100))])
    out = tmp_path / "out"
    with Converter(engine="rapidocr", text_layer="off") as conv:  # its page geometry is the image's
        assert conv.convert([str(tmp_path / "docs")], out, formats="md,json").exit_code == 0
    (rec,) = manifest(out)
    page = json.loads((out / rec["output"]).with_suffix(".json").read_text())
    assert rec["info"]["dpi_capped"] and rec["info"]["dpi"] == page["dpi"] < 150
    points = 1100 / 100 * 72  # the page's height in points (saved at 100 pixels an inch)
    assert abs(page["height"] / page["dpi"] * 72 - points) < 1.5  # pixels back to points, as a reader would


def test_a_pdf_gone_before_its_page_is_read_fails_that_page_in_one_line(tmp_path, caplog):
    """A PDF removed between discovery and decoding (an upload deleted, a file moved): its page fails with the
    file's reason, as a failed decode does, and no warning about its text layer is logged on the way."""
    from pathlib import PurePosixPath

    from ocrbatch.pipeline import decode
    from ocrbatch.records import Kind, PageRef, Source, Status

    gone = tmp_path / "gone.pdf"
    src = Source(gone, "gone.pdf", Kind.PDF, PurePosixPath("gone"), 1, 1, 1, False)
    pdfs = decode.PdfCache(size=1)
    with caplog.at_level("WARNING"):
        result = decode.read_page(PageRef(src, 1), decode.DecodeSettings(dpi=150), pdfs)
    pdfs.close()
    assert result.status is Status.FAILED and "no such file" in result.error.lower() and "\n" not in result.error
    assert not [r for r in caplog.records if "text layer" in r.getMessage()]
