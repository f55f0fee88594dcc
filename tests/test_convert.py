"""`ocrbatch convert` end to end: outputs, manifest, resume, bad input, exit codes."""

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import draw_page, manifest, run_cli, save_pdf
from engines import CrashOnPage, FigureEngine, NoLoadEngine, RecordingEngine
from ocrbatch.cli import app
from ocrbatch.config import RunConfig
from ocrbatch.pipeline.run import run


@pytest.fixture
def docs(tmp_path) -> Path:
    d = tmp_path / "docs"
    d.mkdir()
    draw_page("first page").save(d / "a.png")
    draw_page("second page", size=(800, 600)).save(d / "b.jpg")
    save_pdf(d / "c.pdf", [draw_page("pdf one"), draw_page("pdf two")])
    return d


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def test_bad_files_are_recorded_and_the_run_goes_on(dev_corpus, tmp_path):
    out = tmp_path / "p"
    d = dev_corpus
    r = run_cli("convert", str(d / "pages"), str(d / "pdfs"), str(d / "bad"), "-o", str(out), "--engine", "fake")
    assert r.returncode == 3  # partial
    assert "Traceback" not in r.stderr
    recs = manifest(out)
    failed = {Path(rec["source"]).name: rec["error"] for rec in recs if rec["status"] == "failed"}
    assert set(failed) == {"empty.png", "readme-renamed.pdf", "truncated-doc.pdf"}
    for name in failed:  # one line per bad file, naming it
        assert sum(name in line for line in r.stderr.splitlines()) == 1
    ok = [rec for rec in recs if rec["status"] == "ok"]
    assert len(ok) == 30
    truth = sorted(p.relative_to(d / "truth").with_suffix(".md").as_posix() for p in (d / "truth").rglob("*.txt"))
    assert sorted(rec["output"] for rec in ok) == truth  # the names score.py reads
    assert all((out / rec["output"]).read_text().strip() for rec in ok)


def test_rerun_skips_finished_pages_and_force_redoes_them(docs, tmp_path):
    out = tmp_path / "md"
    first = run_cli("convert", str(docs), "-o", str(out), "--engine", "fake", "--json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["pages_ok"] == 4
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*.md")}

    second = run_cli("convert", str(docs), "-o", str(out), "--engine", "fake", "--json")
    summary = json.loads(second.stdout)
    assert (summary["pages_ok"], summary["pages_skipped"]) == (0, 4)
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*.md")} == before
    assert len(manifest(out)) == 4  # one record per page, not one per run
    assert {rec["status"] for rec in manifest(out)} == {"skipped"}

    forced = json.loads(run_cli("convert", str(docs), "-o", str(out), "--engine", "fake", "--json",
                                "--force").stdout)
    assert (forced["pages_ok"], forced["pages_skipped"]) == (4, 0)


def test_rerun_redoes_a_changed_file_a_deleted_output_and_another_engine(docs, tmp_path):
    out = tmp_path / "md"
    run_cli("convert", str(docs), "-o", str(out), "--engine", "fake")
    draw_page("first page, edited").save(docs / "a.png")
    (out / "c" / "page-0002.md").unlink()
    r = json.loads(run_cli("convert", str(docs), "-o", str(out), "--engine", "fake", "--json").stdout)
    assert (r["pages_ok"], r["pages_skipped"]) == (2, 2)
    rec_a = next(rec for rec in manifest(out) if rec["source"].endswith("a.png"))
    assert rec_a["status"] == "ok" and rec_a["source_size"] == (docs / "a.png").stat().st_size
    assert (out / "c" / "page-0002.md").exists()


def test_stdout_is_clean_and_json_is_the_only_thing_on_it(docs, tmp_path):
    r = run_cli("convert", str(docs), "-o", str(tmp_path / "md"), "--engine", "fake", "--json")
    summary = json.loads(r.stdout)
    assert summary["exit_code"] == 0 and summary["pages"] == 4
    plain = run_cli("convert", str(docs), "-o", str(tmp_path / "md2"), "--engine", "fake")
    assert plain.stdout == ""
    assert "ok=4" in plain.stderr  # the one summary line (off a terminal, without -v)
    quiet = run_cli("convert", str(docs), "-o", str(tmp_path / "md3"), "--engine", "fake", "-q")
    assert quiet.stdout == "" and quiet.stderr == ""


def test_exit_codes_for_usage_no_inputs_and_missing_paths(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("nothing to convert")
    assert run_cli("convert", str(empty), "-o", str(tmp_path / "o"), "--engine", "fake").returncode == 4
    assert run_cli("convert", str(tmp_path / "nope"), "-o", str(tmp_path / "o")).returncode == 4
    assert run_cli("convert", str(empty), "-o", str(tmp_path / "o"), "--pages", "x").returncode == 2
    assert run_cli("convert", str(empty), "-o", str(tmp_path / "o"), "--engine", "nope").returncode == 2
    assert run_cli("convert", str(empty)).returncode == 2  # -o is required
    assert run_cli("convert", str(empty), "-o", str(tmp_path / "o"), "--threads", "0").returncode == 2
    assert run_cli("convert", str(empty), "-o", str(tmp_path / "o"), "--ray-workers", "2").returncode == 2
    draw_page("here").save(tmp_path / "here.png")
    r = run_cli("convert", str(tmp_path / "here.png"), str(tmp_path / "gone.png"), "-o", str(tmp_path / "o"),
                "--engine", "fake")
    assert r.returncode == 3 and "gone.png: no such file" in r.stderr
    assert (tmp_path / "o" / "here.md").exists()
    (tmp_path / "taken").write_text("a file where the output folder should go")
    r = run_cli("convert", str(tmp_path / "here.png"), "-o", str(tmp_path / "taken"), "--engine", "fake")
    assert r.returncode == 2 and r.stderr.strip() == f"ocrbatch: error: output {tmp_path / 'taken'} is a file, not a folder"


@pytest.mark.parametrize("engine", [NoLoadEngine], indirect=True)
def test_engine_that_cannot_load_exits_5_with_one_line(engine, docs, tmp_path):
    r = invoke("convert", str(docs), "-o", str(tmp_path / "md"), "--engine", engine)
    assert r.exit_code == 5
    assert "weights not found at /nowhere" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("engine", [CrashOnPage], indirect=True)
def test_a_page_that_crashes_the_engine_fails_alone(engine, docs, tmp_path):
    draw_page("bad page").save(docs / "poison.png")
    out = tmp_path / "md"
    r = invoke("convert", str(docs), "-o", str(out), "--engine", engine, "--max-batch", "8",
               "--max-wait-ms", "2000")
    assert r.exit_code == 3
    by_name = {Path(rec["source"]).name + str(rec["page"]): rec["status"] for rec in manifest(out)}
    assert by_name == {"a.png1": "ok", "b.jpg1": "ok", "c.pdf1": "ok", "c.pdf2": "ok", "poison.png1": "failed"}
    assert "poison.png: RuntimeError: engine exploded on this input" in r.stderr


@pytest.mark.parametrize("engine", [RecordingEngine], indirect=True)
def test_pages_of_one_size_share_batches_up_to_max_batch(engine, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(7):
        draw_page(f"page {i}").save(docs / f"p{i}.png")
    RecordingEngine.batches = []
    # A window of ten minutes: however slow the machine, a batch closes when full, and the last one as soon as
    # the run has no more pages to send (it never waits out its window for company that will not come).
    done: list = []
    run = threading.Thread(target=lambda: done.append(invoke(
        "convert", str(docs), "-o", str(tmp_path / "md"), "--engine", engine, "--max-batch", "3",
        "--max-wait-ms", "600000")), daemon=True)
    run.start()
    run.join(120)
    assert done, "the run's last batch waited out its window after the last page was decoded"
    assert done[0].exit_code == 0, done[0].stderr
    assert sorted(RecordingEngine.batches) == [1, 3, 3]


def test_help_does_not_import_torch():
    code = "import sys; from ocrbatch.cli import app; import typer.testing as t; " \
           "r = t.CliRunner().invoke(app, ['convert', '--help']); assert r.exit_code == 0; " \
           "print('torch' in sys.modules, 'transformers' in sys.modules, 'ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False False False"


def test_writes_are_atomic_no_temporary_files_left(docs, tmp_path):
    out = tmp_path / "md"
    run_cli("convert", str(docs), "-o", str(out), "--engine", "fake")
    leftovers = [p for p in out.rglob("*") if p.name.startswith(".")]
    assert leftovers == []
    assert os.listdir(out) and (out / "manifest.jsonl").exists()


def test_two_cpu_workers_give_the_same_output_as_one(docs, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    assert run_cli("convert", str(docs), "-o", str(one), "--engine", "fake", "--devices", "cpu").returncode == 0
    r = run_cli("convert", str(docs), "-o", str(two), "--engine", "fake", "--devices", "cpu,cpu",
                "--max-batch", "1", "--json")
    assert r.returncode == 0, r.stderr
    files = sorted(p.relative_to(one) for p in one.rglob("*.md"))
    assert files == sorted(p.relative_to(two) for p in two.rglob("*.md")) and len(files) == 4
    assert all((one / f).read_bytes() == (two / f).read_bytes() for f in files)


def test_a_gpu_that_is_not_there_is_an_engine_load_error(docs, tmp_path):
    r = run_cli("convert", str(docs), "-o", str(tmp_path / "md"), "--engine", "fake", "--devices", "7")
    assert r.returncode == 5 and "cuda:7 not available" in r.stderr


@pytest.mark.parametrize("engine", [FigureEngine], indirect=True)
def test_a_page_redone_with_fewer_figures_leaves_no_stale_image_behind(engine, tmp_path, monkeypatch):
    draw_page("a page with pictures").save(tmp_path / "scan.png")
    out = tmp_path / "out"
    run(RunConfig(inputs=(str(tmp_path / "scan.png"),), output=out, engine=engine))
    assert sorted(p.name for p in (out / "images").iterdir()) == ["scan-1.png", "scan-2.png"]
    monkeypatch.setattr(FigureEngine, "figures", 1)
    run(RunConfig(inputs=(str(tmp_path / "scan.png"),), output=out, engine=engine, force=True))
    assert sorted(p.name for p in (out / "images").iterdir()) == ["scan-1.png"]
    assert manifest(out)[0]["attachments"] == ["images/scan-1.png"]


def test_a_poster_sized_pdf_page_is_rendered_within_a_pixel_budget(tmp_path):
    from ocrbatch import pdfium

    # 1000 px at 5 dpi: a page 200 inches square, 30000 x 30000 px (2.7 GB) at the default 150 dpi.
    poster = tmp_path / "poster.pdf"
    draw_page("A very large poster", (1000, 1000)).save(poster, resolution=5)
    handle = pdfium.PdfHandle(poster)
    try:
        width, height = handle.render(0, 150).size
        assert width * height <= pdfium.MAX_RENDER_PIXELS and width > 7000
    finally:
        handle.close()


# -- output names keep their owner ------------------------------------------------------------------------

def convert_fake(src: Path, out: Path, *extra: str) -> dict:
    r = run_cli("convert", str(src), "-o", str(out), "--engine", "fake", "--json", *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def assert_each_output_holds_its_own_source(out: Path) -> dict[str, str]:
    """Every page the manifest lists as done is in its file, and that file holds that source's text (the fake
    engine's Markdown starts with the source's name); returns {source name: output}."""
    found = {}
    for rec in manifest(out):
        if rec["status"] != "failed":
            name = Path(rec["source"]).name
            assert (out / rec["output"]).read_text().startswith(f"# {name}, page {rec['page']}\n"), rec
            found[name] = rec["output"]
    return found


def test_a_source_keeps_its_output_name_and_a_newcomer_gets_another(tmp_path):
    docs, out = tmp_path / "docs", tmp_path / "md"
    docs.mkdir()
    draw_page("the png").save(docs / "report.png")
    convert_fake(docs, out)
    draw_page("the jpeg, added later").save(docs / "report.jpg")  # sorts first, yet report.md is taken
    r = run_cli("convert", str(docs), "-o", str(out), "--engine", "fake", "--json")
    summary = json.loads(r.stdout)
    assert (summary["pages_skipped"], summary["pages_ok"]) == (1, 1)
    assert summary["renamed"] == [{"source": str(docs / "report.jpg"), "output": "report.jpg"}]
    assert "report.jpg" in r.stderr and "same output name" in r.stderr
    assert assert_each_output_holds_its_own_source(out) == {"report.png": "report.md", "report.jpg": "report.jpg.md"}


def test_a_file_moved_away_and_back_finds_its_own_text_where_it_left_it(tmp_path):
    docs, away, out = tmp_path / "docs", tmp_path / "away", tmp_path / "md"
    docs.mkdir()
    away.mkdir()
    draw_page("the jpeg").save(docs / "report.jpg")
    draw_page("the png").save(docs / "report.png")
    convert_fake(docs, out)
    assert assert_each_output_holds_its_own_source(out) == {"report.jpg": "report.md", "report.png": "report.png.md"}
    os.rename(docs / "report.jpg", away / "report.jpg")
    assert convert_fake(docs, out)["pages_skipped"] == 1  # the png keeps its name: report.md is not its own
    os.rename(away / "report.jpg", docs / "report.jpg")
    assert convert_fake(docs, out)["pages_skipped"] == 2
    assert assert_each_output_holds_its_own_source(out) == {"report.jpg": "report.md", "report.png": "report.png.md"}


def test_a_symlink_pointed_elsewhere_and_back_finds_its_own_text(tmp_path):
    store, docs, out = tmp_path / "store", tmp_path / "docs", tmp_path / "md"
    store.mkdir()
    docs.mkdir()
    draw_page("scan a").save(store / "a.png")
    draw_page("scan b").save(store / "b.png")
    os.symlink(store / "a.png", docs / "scan.png")
    convert_fake(docs, out)
    os.unlink(docs / "scan.png")
    os.symlink(store / "b.png", docs / "scan.png")
    assert convert_fake(docs, out)["pages_ok"] == 1  # b is new here: a name of its own
    os.unlink(docs / "scan.png")
    os.symlink(store / "a.png", docs / "scan.png")
    assert convert_fake(docs, out)["pages_skipped"] == 1
    assert assert_each_output_holds_its_own_source(out) == {"a.png": "scan.md", "b.png": "scan.png.md"}


def test_resume_redoes_a_page_whose_file_another_source_wrote_over(tmp_path):
    """A manifest from an earlier version, which let a newcomer take a name: the jpg's record says report.md is
    done, but the png wrote report.md after it. The jpg is redone under a name of its own."""
    docs, out = tmp_path / "docs", tmp_path / "md"
    docs.mkdir()
    draw_page("the jpeg").save(docs / "report.jpg")
    draw_page("the png").save(docs / "report.png")
    convert_fake(docs, out)
    recs = manifest(out)
    for rec in recs:
        if rec["source"].endswith("report.png"):
            rec["output"], rec["finished_at"] = "report.md", "2999-01-01T00:00:00+0000"
    (out / "manifest.jsonl").write_text("".join(json.dumps(rec) + "\n" for rec in recs))
    (out / "report.png.md").rename(out / "report.md")
    summary = convert_fake(docs, out)
    assert (summary["pages_skipped"], summary["pages_ok"]) == (1, 1)
    assert assert_each_output_holds_its_own_source(out) == {"report.png": "report.md", "report.jpg": "report.jpg.md"}


# -- atomic writes -----------------------------------------------------------------------------------------

def test_a_page_redone_replaces_its_file_whole_and_a_reader_keeps_the_old_one(docs, tmp_path):
    out = tmp_path / "md"
    convert_fake(docs, out)
    old = (out / "a.md").read_bytes()
    draw_page("first page, edited", size=(640, 800)).save(docs / "a.png")
    with open(out / "a.md", "rb") as reader:  # opened before the rerun, read after it
        assert convert_fake(docs, out)["pages_ok"] == 1
        assert reader.read() == old  # the old file whole: the new one was written beside it, then renamed
    new = (out / "a.md").read_bytes()
    assert new != old and new.startswith(b"# a.png, page 1\n\nImage 640x800 px")
    assert [p.name for p in out.rglob(".*")] == []


# -- --json on every exit ----------------------------------------------------------------------------------

def test_json_prints_a_summary_with_the_error_on_every_exit(docs, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    locked = tmp_path / "locked"
    locked.mkdir()
    import fcntl

    fd = os.open(locked / ".ocrbatch.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        cases = {
            2: ["convert", str(docs), "-o", str(tmp_path / "o"), "--engine", "nope"],
            4: ["convert", str(empty), "-o", str(tmp_path / "o"), "--engine", "fake"],
            5: ["convert", str(docs), "-o", str(tmp_path / "o"), "--engine", "fake", "--devices", "7"],
            6: ["convert", str(docs), "-o", str(locked), "--engine", "fake"],
        }
        for code, args in cases.items():
            r = run_cli(*args, "--json")
            assert r.returncode == code, r.stderr
            summary = json.loads(r.stdout)
            assert summary["exit_code"] == code and summary["pages"] == 0
            assert summary["error"] and summary["error"] in r.stderr
        r = run_cli("convert", str(docs), "--json")  # found by the option parser: -o is missing
        assert r.returncode == 2
        assert json.loads(r.stdout)["exit_code"] == 2 and "--output" in json.loads(r.stdout)["error"]
    finally:
        os.close(fd)
    ok = json.loads(run_cli("convert", str(docs), "-o", str(tmp_path / "o"), "--engine", "fake", "--json").stdout)
    assert (ok["exit_code"], ok["error"]) == (0, None)


def test_bench_without_torch_says_what_to_install(tmp_path):
    code = ("import sys; sys.modules['torch'] = None; sys.argv = ['ocrbatch', 'throughput', '--arch', 'tiny']; "
            "from ocrbatch.cli import main; main()")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 5, r.stderr
    assert "needs torch" in r.stderr and "pip install" in r.stderr and "Traceback" not in r.stderr
