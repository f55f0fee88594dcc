"""`ocrbatch convert` off a terminal, as cron sees it: plain timestamped lines on stderr, nothing else on stdout."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import draw_page

TESTS = Path(__file__).resolve().parent
STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4}"

# The slow test engine, registered before the real command line runs (stderr stays a pipe).
_SLOW_CLI = (f"import sys; sys.path.insert(0, {str(TESTS)!r}); from engines import SlowEngine; "
             "from ocrbatch.engines import registry; SlowEngine.delay_s = 0.15; "
             "registry.register('slow', SlowEngine); from ocrbatch.cli import main; main()")


def run_slow(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _SLOW_CLI, *args], capture_output=True, text=True)


@pytest.fixture
def pages(tmp_path) -> Path:
    d = tmp_path / "in"
    d.mkdir()
    for i in range(6):
        draw_page(f"page {i}", size=(300, 400)).save(d / f"p{i}.png")
    return d


def metrics(path: Path) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(path.read_text()) for s in family.samples}


def test_off_a_terminal_plain_lines_json_on_stdout_and_a_metrics_file(pages, tmp_path):
    prom = tmp_path / "ocrbatch.prom"
    r = run_slow("convert", str(pages), "-o", str(tmp_path / "out"), "--engine", "slow", "--max-batch", "2",
                 "--log-every", "0.05", "--metrics-file", str(prom), "--json")
    assert r.returncode == 0, r.stderr

    summary = json.loads(r.stdout)  # stdout holds the JSON and nothing else
    assert summary["pages_ok"] == 6 and summary["exit_code"] == 0
    assert set(summary["stage_busy_pct"]) == {"decode", "batch", "infer", "write"}
    assert summary["mean_batch"] > 0 and isinstance(summary["gpus"], list) and "cpu_mean_pct" in summary

    assert "\x1b" not in r.stderr  # no animation, no colour off a terminal
    lines = r.stderr.splitlines()
    progress = [ln for ln in lines if re.match(rf"{STAMP} ocrbatch: progress ", ln)]
    assert progress, r.stderr
    for key in ("pages=", "ok=", "failed=", "rate=", "avg_rate=", "eta=", "queue=decode:", "busy=decode:"):
        assert key in progress[-1]
    # without -v: the progress lines and one summary line; no `started` line, no table
    assert lines == progress + [lines[-1]], r.stderr
    assert re.match(rf"{STAMP} ocrbatch: finished pages=6/6 ok=6 skipped=0 failed=0 .*exit_code=0$", lines[-1])

    m = metrics(prom)
    assert m[("ocrbatch_pages", (("status", "ok"),))] == 6
    assert m[("ocrbatch_pages", (("status", "failed"),))] == 0
    assert m[("ocrbatch_running", ())] == 0 and m[("ocrbatch_exit_code", ())] == 0
    assert m[("ocrbatch_last_success_timestamp_seconds", ())] >= m[("ocrbatch_run_start_timestamp_seconds", ())]
    assert ("ocrbatch_pages_per_second", (("window", "run"),)) in m
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def test_off_a_terminal_a_short_run_says_one_line_and_v_adds_a_line_per_file_and_the_table(pages, tmp_path):
    (pages / "doc.pdf").write_bytes(b"")  # a file that fails whole gets its line too
    from conftest import save_pdf

    save_pdf(pages / "two.pdf", [draw_page("one"), draw_page("two")])
    quiet = run_slow("convert", str(pages), "-o", str(tmp_path / "a"), "--engine", "slow")
    assert quiet.returncode == 3
    lines = [ln for ln in quiet.stderr.splitlines() if not ln.startswith("ocrbatch: error: ")]
    assert len(lines) == 1 and re.match(rf"{STAMP} ocrbatch: finished pages=9/9 ok=8 skipped=0 failed=1 ", lines[0])

    loud = run_slow("convert", str(pages), "-o", str(tmp_path / "b"), "--engine", "slow", "-v")
    assert loud.returncode == 3
    lines = loud.stderr.splitlines()
    assert re.fullmatch(rf"{STAMP} ocrbatch: started engine=slow output=\S+", lines[0])
    files = [ln for ln in lines if re.match(rf"{STAMP} ocrbatch: file ", ln)]
    assert len(files) == 8, loud.stderr  # six images, one PDF of two pages, one empty file
    assert any(re.search(r"file=\S+two\.pdf pages=2 ok=2 output=two/$", ln) for ln in files), files
    assert any(re.search(r"file=\S+p0\.png pages=1 ok=1 output=p0\.md$", ln) for ln in files), files
    assert any(re.search(r"file=\S+doc\.pdf pages=0 failed=1$", ln) for ln in files), files
    assert "8 ok" in loud.stderr and "stage busy" in loud.stderr  # the summary table


def test_failed_pages_show_in_the_lines_and_keep_the_last_success(pages, tmp_path):
    prom = tmp_path / "ocrbatch.prom"
    ok = run_slow("convert", str(pages), "-o", str(tmp_path / "a"), "--engine", "slow", "--metrics-file", str(prom))
    assert ok.returncode == 0, ok.stderr
    before = metrics(prom)[("ocrbatch_last_success_timestamp_seconds", ())]

    (pages / "broken.png").write_bytes(b"not an image")
    bad = run_slow("convert", str(pages), "-o", str(tmp_path / "b"), "--engine", "slow", "--metrics-file", str(prom),
                   "-q")
    assert bad.returncode == 3 and bad.stdout == ""
    errors = bad.stderr.splitlines()
    assert errors and all(ln.startswith("ocrbatch: error: ") for ln in errors)  # -q: errors only
    assert any("broken.png" in ln for ln in errors)
    m = metrics(prom)
    assert m[("ocrbatch_exit_code", ())] == 3 and m[("ocrbatch_pages", (("status", "failed"),))] == 1
    assert m[("ocrbatch_last_success_timestamp_seconds", ())] == before


def test_bad_log_every_and_metrics_folder_are_usage_errors(pages, tmp_path):
    r = run_slow("convert", str(pages), "-o", str(tmp_path / "o"), "--engine", "slow", "--log-every", "0")
    assert r.returncode == 2 and "--log-every" in r.stderr
    r = run_slow("convert", str(pages), "-o", str(tmp_path / "o"), "--engine", "slow",
                 "--metrics-file", str(tmp_path / "nowhere" / "m.prom"))
    assert r.returncode == 2 and "does not exist" in r.stderr


def run_on_terminal(*args: str) -> tuple[int, str, str]:
    """Run with stderr on a pseudo-terminal; returns (exit code, what the terminal got, stdout)."""
    pty = pytest.importorskip("pty")
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_CLI, *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    screen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        screen += chunk
    os.close(master)
    stdout = proc.stdout.read().decode()
    proc.stdout.close()
    return proc.wait(), screen.decode(errors="replace"), stdout


def test_on_a_terminal_the_live_panel_shows_and_no_progress_turns_it_into_lines(pages, tmp_path):
    code, screen, stdout = run_on_terminal("convert", str(pages), "-o", str(tmp_path / "a"), "--engine", "slow",
                                           "--json")
    assert code == 0
    assert "ocrbatch · engine slow" in screen and "pages/s now" in screen and "busy now" in screen
    assert json.loads(stdout)["pages_ok"] == 6  # the panel never reaches stdout
    assert "ocrbatch: progress" not in screen

    code, screen, stdout = run_on_terminal("convert", str(pages), "-o", str(tmp_path / "b"), "--engine", "slow",
                                           "--no-progress", "--log-every", "0.05")
    assert code == 0 and stdout == ""
    assert "ocrbatch: finished" in screen and "pages/s now" not in screen
