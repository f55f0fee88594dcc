"""Hostile inputs, a second run, a full disk and signals: each fails what it must and nothing more.

Every test mixes good pages with the bad case and runs the real CLI on files it makes: the good pages are
converted, the bad one gets one line and a failed record, and the exit code is the documented one.
"""

from __future__ import annotations

import fcntl
import json
import os
import resource
import signal
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from conftest import ROOT, draw_page, manifest, run_cli, save_pdf

RUNNER = Path(__file__).resolve().parent / "run_with_engines.py"


@pytest.fixture
def good(tmp_path) -> Path:
    """A folder of two good pages."""
    d = tmp_path / "docs"
    d.mkdir()
    draw_page("first good page").save(d / "good1.png")
    draw_page("second good page", size=(640, 480)).save(d / "good2.png")
    return d


def lines_naming(stderr: str, needle: str) -> list[str]:
    return [line for line in stderr.splitlines() if needle in line]


def statuses(out: Path) -> dict[str, str]:
    return {Path(r["source"]).name: r["status"] for r in manifest(out)}


def assert_whole_json_lines(path: Path) -> list[dict]:
    data = path.read_bytes()
    assert data.endswith(b"\n")
    return [json.loads(line) for line in data.decode("utf-8").splitlines()]


def leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.rglob(".*"))


# -- names, special files, links ---------------------------------------------------------------------------

def test_a_name_that_is_not_utf8_is_converted_recorded_and_resumed(good, tmp_path):
    odd = os.fsdecode(bytes(good) + b"/scan-\xff\xfe.png")
    draw_page("odd name").save(odd)
    out = tmp_path / "out"
    r = run_cli("convert", str(good), "-o", str(out), "--engine", "fake")
    assert r.returncode == 0, r.stderr
    assert os.path.isfile(os.fsdecode(bytes(out) + b"/scan-\xff\xfe.md"))
    raw = (out / "manifest.jsonl").read_bytes()
    raw.decode("utf-8")  # the manifest stays valid UTF-8 ...
    rec = next(r for r in manifest(out) if "scan-" in r["source"])
    assert os.fsencode(rec["source"]).endswith(b"/scan-\xff\xfe.png")  # ... and gives the exact bytes back
    again = run_cli("convert", str(good), "-o", str(out), "--engine", "fake", "--json")
    assert again.returncode == 0, again.stderr
    assert (json.loads(again.stdout)["pages_skipped"], json.loads(again.stdout)["pages_ok"]) == (3, 0)


def test_a_listed_name_that_is_not_utf8_is_read_from_stdin_as_bytes(good, tmp_path):
    odd = bytes(good) + b"/\xe9t\xe9.png"
    draw_page("latin-1 name").save(os.fsdecode(odd))
    out = tmp_path / "out"
    r = run_cli("convert", "-", "-0", "-o", str(out), "--engine", "fake", "--json",
                stdin=odd + b"\0" + bytes(good / "good1.png") + b"\0")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["pages_ok"] == 2


@pytest.mark.parametrize("where", ["argument", "stdin"])
def test_a_fifo_is_refused_without_opening_it(good, tmp_path, where):
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    out = tmp_path / "out"
    if where == "argument":
        args, stdin = [str(good), str(fifo)], None
    else:
        args, stdin = ["-"], f"{good / 'good1.png'}\n{good / 'good2.png'}\n{fifo}\n"
    # Opening the FIFO would wait for a writer forever: the timeout turns such a hang into a failure.
    r = subprocess.run([sys.executable, "-m", "ocrbatch", "convert", *args, "-o", str(out), "--engine", "fake"],
                       input=stdin, capture_output=True, text=True, timeout=120)
    assert r.returncode == 3, r.stderr
    assert len(lines_naming(r.stderr, "pipe.png")) == 1
    assert "FIFO" in lines_naming(r.stderr, "pipe.png")[0]
    assert statuses(out) == {"good1.png": "ok", "good2.png": "ok", "pipe.png": "failed"}


def test_a_file_symlink_loop_fails_only_itself(good, tmp_path):
    os.symlink("b.png", good / "a.png")
    os.symlink("a.png", good / "b.png")
    out = tmp_path / "out"
    r = run_cli("convert", str(good), str(good / "a.png"), "-o", str(out), "--engine", "fake")
    assert r.returncode == 3, r.stderr
    assert "Traceback" not in r.stderr
    assert len(lines_naming(r.stderr, "a.png")) == 1 and "symlink loop" in r.stderr
    assert statuses(out) == {"good1.png": "ok", "good2.png": "ok", "a.png": "failed", "b.png": "failed"}


# -- images ------------------------------------------------------------------------------------------------

def png_declaring(path: Path, width: int, height: int) -> Path:
    """A tiny PNG whose header claims width x height pixels (a decompression bomb's shape)."""
    Image.new("1", (8, 8), 1).save(path)
    data = bytearray(path.read_bytes())
    data[16:24] = struct.pack(">II", width, height)
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])))
    path.write_bytes(bytes(data))
    return path


def test_an_image_over_max_pixels_is_a_failed_page_not_a_crash(good, tmp_path):
    png_declaring(good / "bomb.png", 30000, 30000)
    draw_page("a big scan", size=(1300, 1000)).save(good / "big.png")
    out = tmp_path / "out"
    r = run_cli("convert", str(good), "-o", str(out), "--engine", "fake", "--max-pixels", "1200000")
    assert r.returncode == 3, r.stderr
    assert statuses(out) == {"good1.png": "ok", "good2.png": "ok", "bomb.png": "failed", "big.png": "failed"}
    (line,) = lines_naming(r.stderr, "bomb.png")
    assert "30000x30000" in line and "--max-pixels" in line
    default = run_cli("convert", str(good), "-o", str(tmp_path / "out2"), "--engine", "fake")
    assert default.returncode == 3  # the 900 MP header is over the default 200 MP; big.png is not
    assert statuses(tmp_path / "out2")["big.png"] == "ok"


def test_a_16_bit_grayscale_page_is_scaled_not_clipped_to_white(tmp_path):
    from ocrbatch.pipeline.decode import PdfCache, decode_page
    from ocrbatch.records import Kind, PageRef, Source

    a = np.full((200, 300), 52000, np.uint16)  # light gray paper
    a[80:120, 30:270] = 20000  # mid-gray "text": above 255, so an 8-bit conversion would clip it to white
    path = tmp_path / "gray16.png"
    Image.fromarray(a).save(path)
    assert Image.open(path).mode.startswith("I")
    src = Source(path, "gray16.png", Kind.PNG, Path("gray16"), 1, 1, 1, False)
    page = np.asarray(decode_page(PageRef(src, 1), 150, PdfCache(1)).image.convert("L"))
    assert page[100, 150] == pytest.approx(20000 / 257, abs=2)  # the text stays mid-gray
    assert page[10, 10] == pytest.approx(52000 / 257, abs=2)


def test_every_frame_of_an_animated_gif_and_webp_is_a_page(good, tmp_path):
    frames = [draw_page(f"frame {i}", size=(300, 200)) for i in range(1, 4)]
    frames[0].save(good / "anim.gif", save_all=True, append_images=frames[1:])
    frames[0].save(good / "slides.webp", save_all=True, append_images=frames[1:])
    out = tmp_path / "out"
    r = run_cli("convert", str(good), "-o", str(out), "--engine", "fake")
    assert r.returncode == 0, r.stderr
    for stem in ("anim", "slides"):
        assert sorted(p.name for p in (out / stem).iterdir()) == ["page-0001.md", "page-0002.md", "page-0003.md"]
    digests = {(out / "anim" / f"page-000{i}.md").read_text().split("digest ")[1] for i in (1, 2, 3)}
    assert len(digests) == 3  # three different frames, not the first one thrice


def test_a_pdf_with_no_pages_says_so(good, tmp_path):
    import pypdfium2

    doc = pypdfium2.PdfDocument.new()
    doc.save(str(good / "empty.pdf"))
    doc.close()
    out = tmp_path / "out"
    r = run_cli("convert", str(good), "-o", str(out), "--engine", "fake")
    assert r.returncode == 3
    (line,) = lines_naming(r.stderr, "empty.pdf")
    assert "no pages" in line and "Success" not in line
    assert statuses(out)["empty.pdf"] == "failed"


# -- the output folder: lock, umask, compaction ------------------------------------------------------------

def test_a_second_run_into_the_same_folder_is_refused(good, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    fd = os.open(out / ".ocrbatch.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as a run in progress holds it
    os.write(fd, b"4242\n")
    try:
        metrics = tmp_path / "m.prom"
        metrics.write_text("ocrbatch_running 1\n")  # the running run's metrics
        r = run_cli("convert", str(good), "-o", str(out), "--engine", "fake", "--metrics-file", str(metrics))
    finally:
        os.close(fd)
    assert r.returncode == 6
    assert len(r.stderr.strip().splitlines()) == 1 and "pid 4242" in r.stderr
    assert not (out / "manifest.jsonl").exists()
    assert metrics.read_text() == "ocrbatch_running 1\n"  # left to the run that holds the folder


def test_a_lock_left_by_a_killed_run_is_taken_over_and_its_temporary_files_removed(good, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / ".ocrbatch.lock").write_text("999999\n")  # the PID of a run killed with kill -9: no flock held
    (out / ".good1.md.ab12cd34.tmp").write_text("half a pa")
    r = run_cli("convert", str(good), "-o", str(out), "--engine", "fake")
    assert r.returncode == 0, r.stderr
    assert leftovers(out) == []
    assert statuses(out) == {"good1.png": "ok", "good2.png": "ok"}


def test_compaction_keeps_records_another_run_added(good, tmp_path):
    from ocrbatch.manifest import Manifest

    out = tmp_path / "out"
    assert run_cli("convert", str(good / "good1.png"), "-o", str(out), "--engine", "fake").returncode == 0
    mine = Manifest(out, "fake")  # a run that read the manifest before another one wrote to it
    assert run_cli("convert", str(good / "good2.png"), "-o", str(out), "--engine", "fake").returncode == 0
    mine.close()
    assert statuses(out) == {"good1.png": "ok", "good2.png": "ok"}


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640)])
def test_output_files_honour_the_umask(good, tmp_path, umask, mode):
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "ocrbatch", "convert", str(good), "-o", str(out), "--engine", "fake"],
                       capture_output=True, text=True, preexec_fn=lambda: os.umask(umask))
    assert r.returncode == 0, r.stderr
    files = [out / "good1.md", out / "good2.md", out / "manifest.jsonl"]
    assert {oct(p.stat().st_mode & 0o777) for p in files} == {oct(mode)}


# -- a full disk -------------------------------------------------------------------------------------------

def _file_size_limit(limit: int):
    def apply() -> None:  # a real per-file size limit: writes past it fail with EFBIG, as on a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    return apply


def test_a_full_disk_stops_the_run_cleanly_and_the_rerun_finishes(good, tmp_path):
    for i in range(10):
        draw_page(f"page {i}", size=(300, 200 + i)).save(good / f"p{i:02d}.png")
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "ocrbatch", "convert", str(good), "-o", str(out), "--engine", "fake"]
    r = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=_file_size_limit(2500))
    assert r.returncode == 7, r.stderr
    assert "Traceback" not in r.stderr
    assert lines_naming(r.stderr, "File too large")
    done = assert_whole_json_lines(out / "manifest.jsonl")  # never a cut line
    assert 0 < len(done) < 12
    assert leftovers(out) == []
    for rec in done:  # what the manifest says is done is there
        assert (out / rec["output"]).is_file()

    again = subprocess.run([*cmd, "--json"], capture_output=True, text=True)  # space is back
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert (summary["pages_skipped"], summary["pages_ok"]) == (len(done), 12 - len(done))
    clean = tmp_path / "clean"
    assert run_cli("convert", str(good), "-o", str(clean), "--engine", "fake").returncode == 0
    assert {p.relative_to(out): p.read_text() for p in out.rglob("*.md")} == \
        {p.relative_to(clean): p.read_text() for p in clean.rglob("*.md")}


def test_a_cut_last_line_from_an_older_crash_is_ignored_with_a_warning(good, tmp_path):
    out = tmp_path / "out"
    assert run_cli("convert", str(good / "good1.png"), "-o", str(out), "--engine", "fake").returncode == 0
    with open(out / "manifest.jsonl", "a") as fh:
        fh.write('{"source": "' + str(good / "good2.png") + '", "page": 1, "stat')  # killed mid-line
    r = run_cli("convert", str(good), "-o", str(out), "--engine", "fake")
    assert r.returncode == 0, r.stderr
    assert lines_naming(r.stderr, "not whole JSON")
    recs = assert_whole_json_lines(out / "manifest.jsonl")
    assert {Path(x["source"]).name: x["status"] for x in recs} == {"good1.png": "skipped", "good2.png": "ok"}


# -- signals -----------------------------------------------------------------------------------------------

def _start_marking(good: Path, tmp_path: Path, *extra: str,
                   env: dict | None = None) -> tuple[subprocess.Popen, Path, Path]:
    for i in range(12):
        draw_page(f"page {i}", size=(300, 200)).save(good / f"p{i:02d}.png")
    marks, out = tmp_path / "marks", tmp_path / "out"
    marks.mkdir()
    env = {"OCRBATCH_TEST_BATCH_S": "1.5", **(env or os.environ), "OCRBATCH_TEST_MARKS": str(marks),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, str(RUNNER), "convert", str(good), "-o", str(out), "-e", "marking",
                             "--max-batch", "4", "--max-wait-ms", "50", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    return proc, marks, out


def _wait_for(path: Path, proc: subprocess.Popen) -> None:
    while not path.exists():  # a condition, not a timing: the test's own timeout bounds it
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)])
def test_a_signal_keeps_the_batch_in_progress_and_ends_with_a_summary(good, tmp_path, signum, code):
    """SIGHUP (a terminal closed, an ssh session killed) is handled as SIGTERM is, with its own code (issue 27)."""
    proc, marks, out = _start_marking(good, tmp_path, "--metrics-file", str(tmp_path / "m.prom"))
    _wait_for(marks / "batch-2", proc)  # the first batch is written, the second in the engine
    in_progress = (marks / "batch-2").read_text().splitlines()
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    assert "ocrbatch: finished " in err and f"stopped by {signal.Signals(signum).name}" in err
    done = {(Path(r["source"]).name, r["page"]) for r in manifest(out) if r["status"] == "ok"}
    for line in in_progress:  # the batch that was in the engine when the signal came is kept
        name, page = line.rsplit(" ", 1)
        assert (Path(name).name, int(page)) in done
    assert len(done) < 14  # and the run stopped taking pages
    assert leftovers(out) == []
    metrics = (tmp_path / "m.prom").read_text()
    assert "ocrbatch_running 0" in metrics and f"ocrbatch_exit_code {code}" in metrics
    rerun = run_cli("convert", str(good), "-o", str(out), "--engine", "fake")
    assert rerun.returncode == 0, rerun.stderr


def test_a_second_signal_exits_at_once_without_partial_files(good, tmp_path):
    """...and still records every page taken (the batch in the engine as cancelled) and prints --json (issue 27)."""
    proc, marks, out = _start_marking(good, tmp_path, "--json")
    _wait_for(marks / "batch-2", proc)
    proc.send_signal(signal.SIGTERM)
    seen = []
    for line in proc.stderr:  # the run says it is stopping: the first signal has arrived
        seen.append(line)
        if "taking no more pages" in line:
            break
    proc.send_signal(signal.SIGTERM)
    stdout, err = proc.communicate(timeout=120)
    err = "".join(seen) + err
    assert proc.returncode == 143, err
    assert "second SIGTERM" in err
    assert [p.name for p in out.rglob(".*") if p.name != ".ocrbatch.lock"] == []
    records = assert_whole_json_lines(out / "manifest.jsonl")
    for rec in records:
        if rec["status"] == "ok":
            assert (out / rec["output"]).read_text().startswith("# ")
    in_engine = (marks / "batch-2").read_text().splitlines()  # taken, not finished: recorded as cancelled
    recorded = {(Path(r["source"]).name, r["page"]): r["status"] for r in records}
    for line in in_engine:
        name, page = line.rsplit(" ", 1)
        assert recorded.get((Path(name).name, int(page))) in ("ok", "cancelled"), recorded
    summary = json.loads(stdout)
    assert summary["exit_code"] == 143 and summary["pages_cancelled"] >= 1, summary


def test_the_first_ctrl_c_stops_a_run_whose_engine_never_returns(good, tmp_path):
    env = {**os.environ, "OCRBATCH_TEST_BATCH_S": "100000"}  # a batch that would take a day
    proc, marks, out = _start_marking(good, tmp_path, env=env)
    _wait_for(marks / "batch-1", proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)  # waits out the grace period, then leaves the stuck batch
    assert proc.returncode == 130, err
    assert "ocrbatch: finished " in err and "stopped by SIGINT" in err


# -- long names --------------------------------------------------------------------------------------------

def test_an_output_name_as_long_as_the_file_system_allows_is_written(good, tmp_path):
    name = "n" * 251 + ".png"  # 255 bytes; its Markdown's name is 254
    draw_page("a long name").save(good / name)
    out = tmp_path / "out"
    r = run_cli("convert", str(good), "-o", str(out), "--engine", "fake")
    assert r.returncode == 0, r.stderr
    assert (out / ("n" * 251 + ".md")).read_text().startswith(f"# {name}, page 1")
    assert leftovers(out) == []


def test_a_name_too_long_for_the_file_system_is_shortened_with_a_hash_and_the_manifest_says_so(good, tmp_path):
    name = "é" * 127 + "s"  # 255 bytes, no extension (the kind comes from the bytes): NAME.md would be 258
    draw_page("a longer name").save(good / name, format="PNG")
    out = tmp_path / "out"
    r = run_cli("convert", str(good), "-o", str(out), "--engine", "fake")
    assert r.returncode == 0, r.stderr
    (line,) = lines_naming(r.stderr, "longer than the file system allows")
    rec = next(x for x in manifest(out) if x["source"].endswith(name))
    written = out / rec["output"]
    assert rec["shortened_from"] == name + ".md"
    assert len(os.fsencode(written.name)) <= 255 and written.name.startswith("é" * 100)
    assert written.read_text().startswith(f"# {name}, page 1") and written.name in line
    again = run_cli("convert", str(good), "-o", str(out), "--engine", "fake", "--json")
    assert json.loads(again.stdout)["pages_skipped"] == 3  # the same short name: resume finds it


# -- a manifest edited by hand -----------------------------------------------------------------------------

def test_a_record_with_a_field_of_the_wrong_type_is_ignored_with_a_warning(good, tmp_path):
    out = tmp_path / "out"
    assert run_cli("convert", str(good), "-o", str(out), "--engine", "fake").returncode == 0
    recs = manifest(out)
    recs[1]["page"] = "1"  # a page number in quotes
    (out / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    redone = Path(recs[1]["source"]).name
    r = run_cli("convert", str(good), "-o", str(out), "--engine", "fake")
    assert r.returncode == 0, r.stderr
    assert lines_naming(r.stderr, "wrong type")
    recs = assert_whole_json_lines(out / "manifest.jsonl")
    assert {Path(x["source"]).name: (x["page"], x["status"]) for x in recs} == \
        {"good1.png": (1, "skipped"), "good2.png": (1, "skipped"), redone: (1, "ok")}
    again = run_cli("convert", str(good), "-o", str(out), "--engine", "fake")
    assert again.returncode == 0 and not lines_naming(again.stderr, "wrong type")


# -- folders that cannot be read, links to nothing ---------------------------------------------------------

def _without_file_permission_override() -> None:
    """preexec_fn: the process reads as any user does, even as root (it gives up CAP_DAC_OVERRIDE and
    CAP_DAC_READ_SEARCH for the program it runs), so that a folder with mode 000 cannot be read."""
    if os.geteuid() != 0:
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "cannot drop a capability")


@pytest.fixture
def locked_folder(tmp_path):
    """A folder holding a page, with mode 000; skipped where even then it can be read."""
    locked = tmp_path / "locked"
    locked.mkdir()
    draw_page("behind a lock").save(locked / "inside.png")
    locked.chmod(0)
    try:
        probe = subprocess.run([sys.executable, "-c", f"import os; os.listdir({str(locked)!r})"],
                               preexec_fn=_without_file_permission_override, capture_output=True, text=True)
    except subprocess.SubprocessError:
        probe = None
    if probe is None or probe.returncode == 0:
        locked.chmod(0o755)
        pytest.skip("cannot make a folder unreadable here")
    yield locked
    if locked.exists():
        locked.chmod(0o755)


def _convert_unprivileged(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ocrbatch", "convert", *args, "--engine", "fake"],
                          preexec_fn=_without_file_permission_override, capture_output=True, text=True)


@pytest.mark.parametrize("where", ["argument", "walk"])
def test_a_folder_that_cannot_be_read_is_a_failed_input(good, tmp_path, locked_folder, where):
    if where == "walk":
        inside = good / "sub"
        locked_folder.rename(inside)
        args = [str(good)]
    else:
        inside = locked_folder
        args = [str(good), str(locked_folder)]
    out = tmp_path / "out"
    try:
        r = _convert_unprivileged(*args, "-o", str(out))
    finally:
        inside.chmod(0o755)
    assert r.returncode == 3, r.stderr
    (line,) = lines_naming(r.stderr, str(inside))
    assert "cannot read the folder" in line and "Permission denied" in line
    assert statuses(out) == {"good1.png": "ok", "good2.png": "ok", inside.name: "failed"}


def test_a_dangling_symlink_in_a_walk_is_a_failed_input(good, tmp_path):
    os.symlink(tmp_path / "moved-away.png", good / "scan.png")
    os.symlink(tmp_path / "notes.txt", good / "notes")  # not named like a document: not one
    out = tmp_path / "out"
    r = run_cli("convert", str(good), "-o", str(out), "--engine", "fake")
    assert r.returncode == 3, r.stderr
    (line,) = lines_naming(r.stderr, "scan.png")
    assert "dangling symlink" in line and "moved-away.png" in line
    assert not lines_naming(r.stderr, "notes")
    assert statuses(out) == {"good1.png": "ok", "good2.png": "ok", "scan.png": "failed"}


# -- a read-only output, a disk that fills at the very end -------------------------------------------------

def _in_tmpfs(tmp_path: Path, size_kb: int, script: str) -> subprocess.CompletedProcess:
    """Run the shell `script` with a real tmpfs of `size_kb` mounted at $MNT (a mount namespace of its own:
    gone when the script ends, so the script copies out what the test looks at); skipped where that cannot be."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs {mnt}"],
                           capture_output=True, text=True) if _has("unshare") else None
    if probe is None or probe.returncode != 0:
        pytest.skip("cannot mount a tmpfs in a namespace here")
    env = {**os.environ, "MNT": str(mnt), "PY": sys.executable,
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(["unshare", "-rm", "sh", "-c",
                           f"set -e; mount -t tmpfs -o size={size_kb}k tmpfs \"$MNT\"; {script}"],
                          capture_output=True, text=True, env=env, timeout=300)


def _has(program: str) -> bool:
    import shutil

    return shutil.which(program) is not None


def test_a_read_only_output_is_exit_7(good, tmp_path):
    r = _in_tmpfs(tmp_path, 1024, f"""
        mkdir "$MNT/out"; mount -o remount,ro "$MNT"
        "$PY" -m ocrbatch convert {good} -o "$MNT/out" --engine fake --json && echo "exit 0" || echo "exit $?"
        "$PY" -m ocrbatch convert {good} -o "$MNT/new" --engine fake || echo "exit $?"
    """)
    exits = [line for line in r.stdout.splitlines() if line.startswith("exit ")]
    assert exits == ["exit 7", "exit 7"], r.stdout + r.stderr
    assert json.loads(r.stdout[:r.stdout.index("exit ")])["error"].endswith("Read-only file system")
    assert len(lines_naming(r.stderr, "Read-only file system")) == 2 and "Traceback" not in r.stderr


def test_a_disk_that_fills_during_the_final_manifest_rewrite_is_exit_7_and_keeps_whole_lines(good, tmp_path):
    out, kept = tmp_path / "out", tmp_path / "kept"
    assert run_cli("convert", str(good / "good1.png"), "-o", str(out), "--engine", "fake").returncode == 0
    (record,) = manifest(out)
    with open(out / "manifest.jsonl", "a") as fh:  # pages of files converted long ago: a large manifest
        for i in range(2000):
            fh.write(json.dumps({**record, "source": f"/archive/{i:05d}.png", "output": f"old/{i:05d}.md"}) + "\n")
    # The output on a disk with about 64 KB left: enough for a page and its record, not for the rewrite.
    r = _in_tmpfs(tmp_path, 4096, f"""
        cp -a {out} "$MNT/out"
        "$PY" -c "
import os
with open(os.environ['MNT'] + '/filler', 'wb') as fh:
    try:
        while True:
            fh.write(bytes(65536)); fh.flush()
    except OSError:
        pass
    fh.truncate(max(0, fh.tell() - 65536))"
        "$PY" -m ocrbatch convert {good} -o "$MNT/out" --engine fake --json > {tmp_path}/summary.json || echo "exit $?"
        cp -a "$MNT/out" {kept}
    """)
    assert "exit 7" in r.stdout, r.stdout + r.stderr
    (line,) = lines_naming(r.stderr, "No space left on device")
    assert "manifest.jsonl" in line and "Traceback" not in r.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert (summary["exit_code"], summary["pages_ok"], summary["pages_skipped"]) == (7, 1, 1)
    recs = assert_whole_json_lines(kept / "manifest.jsonl")  # as appended: whole lines, the new page's too
    assert len(recs) == 2001 + 2
    assert {Path(x["source"]).name: x["status"] for x in recs[-2:]} == {"good1.png": "skipped", "good2.png": "ok"}
    assert (kept / "good2.md").is_file() and leftovers(kept) == []


# -- stdin that trickles, signals that come early ----------------------------------------------------------

def test_paths_on_stdin_are_converted_as_they_arrive_and_sigterm_ends_the_wait(good, tmp_path):
    out, err = tmp_path / "out", tmp_path / "stderr"
    with open(err, "w") as errors:
        proc = subprocess.Popen([sys.executable, "-m", "ocrbatch", "convert", "-", "-o", str(out), "--engine", "fake"],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=errors)
        try:
            proc.stdin.write(f"{good / 'good1.png'}\n".encode())
            proc.stdin.flush()  # and the pipe stays open, as `inotifywait -m` keeps it
            deadline = time.monotonic() + 120  # a bound against a hang, not a timing
            while not (out / "good1.md").exists():
                assert proc.poll() is None and time.monotonic() < deadline, err.read_text()
                time.sleep(0.05)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=120) == 143, err.read_text()
        finally:
            proc.kill()
            proc.stdin.close()
    text = err.read_text()
    assert "stopped by SIGTERM" in text and "ocrbatch: finished " in text
    assert not lines_naming(text, "did not finish")  # it did not wait out the grace period for stdin
    assert statuses(out) == {"good1.png": "ok"}


def test_a_sigterm_that_comes_before_the_run_starts_ends_it_with_a_summary(good, tmp_path):
    def pending_sigterm() -> None:  # blocked, then sent: it waits for the moment the handler is there
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        os.kill(os.getpid(), signal.SIGTERM)

    metrics = tmp_path / "m.prom"
    r = subprocess.run([sys.executable, "-m", "ocrbatch", "convert", str(good), "-o", str(tmp_path / "out"),
                        "--engine", "fake", "--metrics-file", str(metrics), "--json"],
                       preexec_fn=pending_sigterm, capture_output=True, text=True, timeout=120)
    assert r.returncode == 143, r.stderr
    assert "stopped by SIGTERM" in r.stderr and json.loads(r.stdout)["exit_code"] == 143
    assert "ocrbatch_exit_code 143" in metrics.read_text()
