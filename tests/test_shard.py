"""--shard I/N: N parts over one input folder and one output folder, each under its own lock and manifest; their
union is one run's output, page for page, and `ocrbatch merge-manifests` gives one manifest."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path, PurePosixPath

import pytest

from conftest import ROOT, draw_page, manifest, run_cli, save_pdf
from ocrbatch.config import Shard

RUNNER = Path(__file__).resolve().parent / "run_with_engines.py"
PARTS = 3


@pytest.fixture
def mixed(tmp_path) -> Path:
    """PDFs of 1-3 pages, PNGs and JPEGs, in a folder and a subfolder; two files that want one output name."""
    d = tmp_path / "in"
    for i in range(5):
        save_pdf(d / ("sub" if i % 2 else "") / f"doc{i}.pdf",
                 [draw_page(f"doc {i} page {k}", size=(240, 320), font_size=18) for k in range(1 + i % 3)])
    for i in range(10):
        folder = d / "sub" if i % 3 == 0 else d
        folder.mkdir(parents=True, exist_ok=True)
        draw_page(f"image {i}", size=(200, 120), font_size=18).save(folder / f"img{i:02d}.{'jpg' if i % 4 else 'png'}")
    draw_page("report, the image", size=(200, 120)).save(d / "report.png")
    save_pdf(d / "report.pdf", [draw_page("report, the pdf", size=(200, 120))])
    return d


def tree(out: Path) -> dict[str, bytes]:
    """Every file a user reads (not the manifests, not hidden files), by relative path."""
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and not p.name.startswith((".", "manifest"))}


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def keys(recs: list[dict]) -> set[tuple[str, int]]:
    return {(r["source"], r["page"]) for r in recs}


def part_manifest(out: Path, i: int) -> Path:
    return out / f"manifest.shard-{i}-of-{PARTS}.jsonl"


def test_three_parts_convert_what_one_run_does_each_page_once(mixed, tmp_path):
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    assert run_cli("convert", str(mixed), "-o", str(whole), "--engine", "fake").returncode == 0
    totals = []
    for i in range(1, PARTS + 1):
        r = run_cli("convert", str(mixed), "-o", str(parts), "--engine", "fake", "--shard", f"{i}/{PARTS}", "--json")
        assert r.returncode == 0, r.stderr
        totals.append(json.loads(r.stdout)["pages"])
    assert tree(parts) == tree(whole)  # the same files, the same bytes: report.png and report.pdf told apart too
    seen: list[tuple[str, int]] = []
    for i in range(1, PARTS + 1):
        recs = records(part_manifest(parts, i))
        assert all(r["status"] == "ok" for r in recs)
        seen += [(r["source"], r["page"]) for r in recs]
    assert len(seen) == len(set(seen))  # no page in two parts
    assert set(seen) == keys(manifest(whole))  # and none left out
    assert totals == [len(records(part_manifest(parts, i))) for i in range(1, PARTS + 1)]  # each part's own total
    assert sum(1 for t in totals if t) >= 2  # the parts really split the work

    r = run_cli("merge-manifests", str(parts))
    assert r.returncode == 0, r.stderr
    assert not list(parts.glob("manifest.shard-*")) and not list(parts.glob(".*"))
    mine = {(x["source"], x["page"]): (x["output"], x["status"]) for x in manifest(parts)}
    assert mine == {(x["source"], x["page"]): (x["output"], x["status"]) for x in manifest(whole)}
    again = run_cli("convert", str(mixed), "-o", str(parts), "--engine", "fake", "--shard", f"2/{PARTS}", "--json")
    summary = json.loads(again.stdout)
    assert again.returncode == 0 and summary["pages_ok"] == 0 and summary["pages_skipped"] == totals[1]  # resumed


def test_a_part_killed_with_kill_9_is_rerun_to_completion_and_the_others_are_untouched(mixed, tmp_path):
    out, marks = tmp_path / "out", tmp_path / "marks"
    marks.mkdir()
    sizes = {i: 0 for i in range(1, PARTS + 1)}  # pages per part, as the documented rule assigns them
    for f in mixed.rglob("*.*"):
        rel = PurePosixPath(f.relative_to(mixed).as_posix())
        part = next(i for i in sizes if Shard(i, PARTS).takes(rel.with_suffix("").as_posix()))
        sizes[part] += _pages(f)
    victim = max(sizes, key=sizes.get)
    assert sizes[victim] >= 4
    env = {**os.environ, "OCRBATCH_TEST_MARKS": str(marks), "OCRBATCH_TEST_BATCH_S": "1.5",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    args = [sys.executable, str(RUNNER), "convert", str(mixed), "-o", str(out), "-e", "marking", "--max-batch", "2",
            "--max-wait-ms", "50", "-q"]
    proc = subprocess.Popen([*args, "--shard", f"{victim}/{PARTS}"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    while not (marks / "batch-2").exists():  # a condition, not a timing: the second batch is in the engine
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    lock = out / f".ocrbatch.shard-{victim}-of-{PARTS}.lock"
    pid, token = lock.read_text().split()
    assert int(pid) == proc.pid
    before = keys(records(part_manifest(out, victim)))  # pages finished before the kill
    assert len(before) < sizes[victim]
    mine, theirs = out / f".img00.md.{token}.a1b2c3d4.tmp", out / ".img01.md.0f0f0f0f.a1b2c3d4.tmp"
    mine.write_text("half a pa")  # what the killed part left, and what another part is writing right now
    theirs.write_text("half a pa")

    rerun = subprocess.run([*args, "--shard", f"{victim}/{PARTS}"], env={**env, "OCRBATCH_TEST_BATCH_S": "0"},
                           capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    assert not mine.exists() and theirs.exists()  # only the killed run's temporary files are removed
    theirs.unlink()
    recs = records(part_manifest(out, victim))
    assert len(recs) == sizes[victim] and all(r["status"] in ("ok", "skipped") for r in recs)
    again = {(r["source"], r["page"]) for r in recs if r["status"] == "ok"}
    assert not before & again  # what was finished before the kill is not converted again
    for i in sizes:
        if i != victim:
            r = subprocess.run([*args, "--shard", f"{i}/{PARTS}"], env={**env, "OCRBATCH_TEST_BATCH_S": "0"},
                               capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
    whole = tmp_path / "whole"
    assert run_cli("convert", str(mixed), "-o", str(whole), "--engine", "fake").returncode == 0
    assert tree(out) == tree(whole)


def _pages(f: Path) -> int:
    if f.suffix == ".pdf":
        from ocrbatch import pdfium

        return pdfium.page_count(f)
    return 1


@pytest.mark.parametrize("spec", ["0/3", "4/3", "a/b", "1/0", "3", "-1/3"])
def test_a_shard_that_is_not_i_of_n_is_a_usage_error(mixed, tmp_path, spec):
    r = run_cli("convert", str(mixed), "-o", str(tmp_path / "out"), "--engine", "fake", "--shard", spec)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "--shard" in r.stderr
    r = run_cli("convert", str(mixed), "-o", str(tmp_path / "out"), "--engine", "fake", env={"OCRBATCH_SHARD": spec})
    assert r.returncode == 2 and "OCRBATCH_SHARD" in r.stderr
    assert not (tmp_path / "out").exists()


def test_a_shard_is_refused_with_ray(mixed, tmp_path):
    r = run_cli("convert", str(mixed), "-o", str(tmp_path / "out"), "--engine", "fake", "--shard", "1/2",
                "--ray", "local")
    assert r.returncode == 2 and "--shard" in r.stderr and "--ray" in r.stderr


def _hold(path: Path, how: int) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, how | fcntl.LOCK_NB)
    return fd


@pytest.mark.parametrize("held, how, args", [
    (".ocrbatch.lock", fcntl.LOCK_EX, ["--shard", "1/3"]),  # a whole run writes: no part starts
    (".ocrbatch.lock", fcntl.LOCK_SH, []),  # a part writes: no whole run starts
    (".ocrbatch.shard-1-of-3.lock", fcntl.LOCK_EX, ["--shard", "1/3"]),  # the same part twice
    (".ocrbatch.shard-3-of-4.lock", fcntl.LOCK_EX, ["--shard", "1/3"]),  # a part of another split: they overlap
])
def test_a_part_and_a_whole_run_or_the_same_part_twice_exclude_each_other(mixed, tmp_path, held, how, args):
    out = tmp_path / "out"
    fd = _hold(out / held, how)
    try:
        r = run_cli("convert", str(mixed), "-o", str(out), "--engine", "fake", *args)
    finally:
        os.close(fd)
    assert r.returncode == 6, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and str(out) in r.stderr
    assert not list(out.glob("manifest*"))
    assert not (out / ".ocrbatch.shard-1-of-3.lock").exists() or held == ".ocrbatch.shard-1-of-3.lock"


def test_two_parts_run_side_by_side(mixed, tmp_path):
    out = tmp_path / "out"
    fd = _hold(out / ".ocrbatch.shard-2-of-3.lock", fcntl.LOCK_EX)  # part 2 is running
    held = _hold(out / ".ocrbatch.lock", fcntl.LOCK_SH)
    try:
        r = run_cli("convert", str(mixed), "-o", str(out), "--engine", "fake", "--shard", "1/3")
        assert r.returncode == 0, r.stderr
        assert run_cli("merge-manifests", str(out)).returncode == 6  # not while a part writes
    finally:
        os.close(fd)
        os.close(held)
    assert part_manifest(out, 1).exists()


def test_the_part_a_path_goes_to_never_changes():
    """Machines of a fleet may run different versions: the rule is fixed (config.Shard's docstring)."""
    assert [i for i in range(1, 4) if Shard(i, 3).takes("scans/2024/a")] == [1]
    assert [i for i in range(1, 4) if Shard(i, 3).takes("report")] == [2]
    assert [i for i in range(1, 8) if Shard(i, 7).takes("report")] == [7]
    assert Shard(1, 3).takes("Scans/2024/A") == Shard(1, 3).takes("scans/2024/a")  # casefolded
    assert sum(Shard(i, 7).takes("x") for i in range(1, 8)) == 1


def test_an_input_that_is_no_file_is_recorded_by_part_1_alone(mixed, tmp_path):
    (mixed / "gone.pdf").symlink_to(tmp_path / "nowhere.pdf")  # a link to nothing, named like a document
    out = tmp_path / "out"
    codes = [run_cli("convert", str(mixed), "-o", str(out), "--engine", "fake", "--shard", f"{i}/{PARTS}").returncode
             for i in range(1, PARTS + 1)]
    assert codes == [3, 0, 0]  # part 1 records the failure (a partial run); the others do not see it
    failed = [(i, r["error"]) for i in range(1, PARTS + 1) for r in records(part_manifest(out, i))
              if r["status"] == "failed"]
    assert len(failed) == 1 and failed[0][0] == 1 and "dangling symlink" in failed[0][1]
