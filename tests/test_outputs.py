"""What a run gives people and pipelines besides the page files: Markdown on stdout (`-o -`), one file per
document (`--join`), the page JSON (`--format md,json`) and the review list (`--review-below`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from conftest import draw_page, manifest, run_cli, save_pdf
from ocrbatch import pagejson
from ocrbatch.config import RunConfig
from ocrbatch.engines.fake import FakeEngine
from ocrbatch.pipeline.run import run


@pytest.fixture
def docs(tmp_path) -> Path:
    d = tmp_path / "in"
    save_pdf(d / "report.pdf", [draw_page(f"Report page {i}") for i in (1, 2, 3)])
    draw_page("A receipt").save(d / "receipt.png")
    return d


def _pages(text: str) -> list[str]:
    """The page separators on stdout, in order."""
    return [line for line in text.splitlines() if line.startswith("<!-- ")]


# -- stdout -------------------------------------------------------------------------------------------------

def test_one_pdf_to_stdout_prints_its_pages_in_order_and_writes_no_folder(docs, tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    r = run_cli("convert", str(docs / "report.pdf"), "-o", "-", "--engine", "fake", "--max-batch", "1",
                cwd=tmp_path, env={"TMPDIR": str(tmp)})
    assert r.returncode == 0, r.stderr
    assert _pages(r.stdout) == ["<!-- page 1 -->", "<!-- page 2 -->", "<!-- page 3 -->"]
    assert r.stdout.startswith("<!-- page 1 -->\n\n# report.pdf, page 1\n")
    assert "\n\n<!-- page 2 -->\n\n# report.pdf, page 2\n" in r.stdout
    assert "ocrbatch: finished pages=3/3 ok=3" in r.stderr and "<!--" not in r.stderr  # logs on stderr
    assert not (tmp_path / "-").exists() and list(tmp.iterdir()) == []  # no folder "-", the private one removed


def test_several_inputs_to_stdout_each_start_with_their_name_in_the_order_given(docs, tmp_path):
    r = run_cli("convert", str(docs / "receipt.png"), str(docs / "report.pdf"), "-o", "-", "--engine", "fake",
                "-j", "3")
    assert r.returncode == 0, r.stderr
    assert _pages(r.stdout) == [f"<!-- document: {docs / 'receipt.png'} -->",
                                f"<!-- document: {docs / 'report.pdf'} -->",
                                "<!-- page 1 -->", "<!-- page 2 -->", "<!-- page 3 -->"]
    assert r.stdout.index("# receipt.png, page 1") < r.stdout.index("# report.pdf, page 1")


def test_a_damaged_file_on_stdout_is_a_comment_and_exit_3(docs, tmp_path):
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 nothing")
    r = run_cli("convert", str(docs), "-o", "-", "--engine", "fake")
    assert r.returncode == 3
    assert f"<!-- document: {docs / 'broken.pdf'} -->\n\n<!-- failed: not a readable PDF" in r.stdout
    assert "broken.pdf" in r.stderr


def test_stdout_refuses_what_needs_a_folder(docs):
    for extra in (["--json"], ["--join"], ["--format", "md,json"]):
        r = run_cli("convert", str(docs), "-o", "-", "--engine", "fake", *extra)
        assert r.returncode == 2 and "-o - puts the Markdown on stdout" in r.stderr, extra


def test_a_reader_that_goes_away_stops_the_run(tmp_path):
    pdf = save_pdf(tmp_path / "long.pdf", [draw_page(f"Page {i}", size=(200, 260)) for i in range(120)])
    proc = subprocess.Popen([sys.executable, "-m", "ocrbatch", "convert", str(pdf), "-o", "-", "--engine", "fake",
                             "--max-batch", "1", "-j", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline() == b"<!-- page 1 -->\n"
    proc.stdout.close()  # as `| head -1` does
    err = proc.stderr.read().decode()
    assert proc.wait() == 7, err
    assert "stdout was closed" in err and "Traceback" not in err and "BrokenPipe" not in err
    finished = next(line for line in err.splitlines() if " ocrbatch: finished " in line)
    assert "pages=120/120 ok=120" not in finished  # it stopped, rather than reading every page for nobody


# -- --join -------------------------------------------------------------------------------------------------

class FlakyEngine(FakeEngine):
    """The fake engine, failing the pages numbered in `fail` (changed between runs by the test)."""

    name = "flaky"
    fail: set[int] = set()

    def infer(self, pages):
        outs = super().infer(pages)
        return [RuntimeError("the engine tripped") if p.ref.page in self.fail else o for p, o in zip(pages, outs)]


def _convert(docs: Path, out: Path, **kw):
    return run(RunConfig(inputs=(str(docs),), output=out, engine="flaky", join=True, **kw))


def test_join_writes_one_file_per_document_and_rewrites_it_only_when_a_page_changes(docs, tmp_path,
                                                                                      register_engine):
    register_engine(FlakyEngine)
    out = tmp_path / "out"
    FlakyEngine.fail = {2}
    assert _convert(docs, out).counts["failed"] == 1
    joined = (out / "report.md").read_text()
    assert _pages(joined) == ["<!-- page 1 -->", "<!-- page 2: failed: RuntimeError: the engine tripped -->",
                              "<!-- page 3 -->"]
    assert (out / "report" / "page-0001.md").read_text() in joined
    assert not (out / "receipt.md.md").exists() and (out / "receipt.md").is_file()  # single pages are not joined
    doc = [r for r in manifest(out) if r["page"] is None]
    assert [(d["output"], d["joined"], d["status"]) for d in doc] == [("report.md", [1, 2, 3], "ok")]

    FlakyEngine.fail = set()
    second = _convert(docs, out)  # page 2 is retried: the document is written again with it
    assert (second.counts["ok"], second.counts["skipped"]) == (1, 3)
    joined = (out / "report.md").read_text()
    assert _pages(joined) == ["<!-- page 1 -->", "<!-- page 2 -->", "<!-- page 3 -->"]
    assert joined == "\n".join(f"<!-- page {p} -->\n\n" + (out / "report" / f"page-000{p}.md").read_text()
                               for p in (1, 2, 3))

    before = (out / "report.md").stat().st_mtime_ns
    assert _convert(docs, out).counts["skipped"] == 4  # nothing changed: not rewritten
    assert (out / "report.md").stat().st_mtime_ns == before

    (out / "report.md").unlink()  # a run stopped before it wrote the document, or a file removed since
    assert _convert(docs, out).counts["skipped"] == 4
    assert (out / "report.md").read_text() == joined
    assert len([r for r in manifest(out) if r["page"] is None]) == 1  # one record per document, kept up to date


def test_join_with_a_page_selection_joins_every_page_done_so_far(docs, tmp_path, register_engine):
    register_engine(FlakyEngine)
    FlakyEngine.fail = set()
    out = tmp_path / "out"
    from ocrbatch.config import PageSelection

    _convert(docs, out, pages=PageSelection.parse("3"))
    assert _pages((out / "report.md").read_text()) == ["<!-- page 3 -->"]
    _convert(docs, out, pages=PageSelection.parse("1"))
    assert _pages((out / "report.md").read_text()) == ["<!-- page 1 -->", "<!-- page 3 -->"]


# -- --format md,json ---------------------------------------------------------------------------------------

def test_format_json_writes_a_page_json_beside_each_page_and_resume_asks_for_it(docs, tmp_path):
    out = tmp_path / "out"
    r = run_cli("convert", str(docs), "-o", str(out), "--engine", "fake", "--format", "md,json")
    assert r.returncode == 0, r.stderr
    for md, number in (("report/page-0001.md", 1), ("report/page-0002.md", 2), ("report/page-0003.md", 3),
                       ("receipt.md", 1)):
        page = json.loads((out / md).with_suffix(".json").read_text())
        jsonschema.validate(page, pagejson.SCHEMA)
        source = docs / ("receipt.png" if md == "receipt.md" else "report.pdf")
        assert (page["page"], page["source"], page["engine"]) == (number, str(source), "fake"), page
        assert page["dpi"] == (150 if "report" in md else None)
    recs = {r["output"]: r for r in manifest(out)}
    assert recs["receipt.md"]["attachments"] == ["receipt.json"]

    (out / "report" / "page-0002.json").unlink()
    again = run_cli("convert", str(docs), "-o", str(out), "--engine", "fake", "--format", "md,json", "--json")
    summary = json.loads(again.stdout)
    assert (summary["pages_ok"], summary["pages_skipped"]) == (1, 3)  # the page without its JSON is redone
    assert (out / "report" / "page-0002.json").is_file()
    bad = run_cli("convert", str(docs), "-o", str(out), "--engine", "fake", "--format", "json,docx")
    assert bad.returncode == 2 and "--format json,docx" in bad.stderr and "md,json,txt,hocr,pdf" in bad.stderr


# -- --review-below -----------------------------------------------------------------------------------------

class ScoredEngine(FakeEngine):
    """The fake engine, giving each page the confidence score written in its file name (p0.42.png)."""

    name = "scored"

    def infer(self, pages):
        outs = super().infer(pages)
        for p, o in zip(pages, outs):
            score = float(p.ref.source.path.stem[1:])
            o.info["confidence"] = {"method": "recognizer", "score": score, "lines": 3, "mean": score,
                                    "low_lines": 0}
        return outs


def test_the_plain_finished_line_counts_the_review_list_only_with_review_below(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    draw_page("Harbour report").save(d / "scan.png")
    with_it = run_cli("convert", str(d), "-o", str(tmp_path / "a"), "--review-below", "1")
    without = run_cli("convert", str(d), "-o", str(tmp_path / "b"))
    assert with_it.returncode == without.returncode == 0, with_it.stderr + without.stderr
    finished = [l for l in with_it.stderr.splitlines() if "ocrbatch: finished " in l]
    assert len(finished) == 1 and " review=" in finished[0], with_it.stderr
    assert "ocrbatch: finished " in without.stderr and " review=" not in without.stderr


def test_review_below_lists_the_pages_under_it_lowest_first_also_when_skipped(tmp_path, register_engine):
    register_engine(ScoredEngine)
    d = tmp_path / "in"
    d.mkdir()
    for score in ("0.99", "0.42", "0.88", "0.95"):
        draw_page("x", size=(100, 100)).save(d / f"p{score}.png")
    config = RunConfig(inputs=(str(d),), output=tmp_path / "out", engine="scored", review_below=0.9)
    for _ in range(2):  # the second run skips every page: the list comes from the manifest
        summary = run(config).as_dict()
        assert summary["review_below"] == 0.9
        assert [(Path(r["source"]).name, r["page"], r["output"], r["score"]) for r in summary["review"]] == [
            ("p0.42.png", 1, "p0.42.md", 0.42), ("p0.88.png", 1, "p0.88.md", 0.88)]
    assert "review" not in run(RunConfig(inputs=(str(d),), output=tmp_path / "out", engine="scored")).as_dict()


def test_a_degraded_scan_scores_under_a_clean_one(rapid):
    """The real engine: the confidence a review list is made from falls with the page's quality."""
    import numpy as np
    from PIL import Image, ImageFilter

    from ocrbatch.records import PageImage

    clean = draw_page("The harbour report for May\nCargo landed rose by a tenth\nFerries ran on time",
                      size=(900, 400), font_size=30)
    small = clean.convert("L").resize((225, 100)).resize((900, 400)).filter(ImageFilter.GaussianBlur(1.6))
    noisy = np.asarray(small, np.float32) + np.random.default_rng(0).normal(0, 48, (400, 900))
    degraded = Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8)).convert("RGB")
    good, bad = rapid.infer([PageImage(ref=None, image=clean), PageImage(ref=None, image=degraded)])
    assert "Cargo landed rose by a tenth" in good.markdown and "Cargo landed" not in bad.markdown  # misread
    assert good.info["confidence"]["score"] > 0.95 and bad.info["confidence"]["score"] < 0.9
    assert bad.info["confidence"]["low_lines"] >= 1 and good.info["confidence"]["low_lines"] == 0
