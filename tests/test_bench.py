"""`ocrbatch bench --arch tiny`: a random tiny DeepSeek-OCR-2 built on the fly, the per-page loop, then the real
pipeline per batch size; it prints its table. On a CPU the figures are not the point (no timing is checked)."""

import json
import re

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "DeepseekOcr2ForConditionalGeneration"):
    pytest.skip("transformers has no DeepSeek-OCR-2 model", allow_module_level=True)

from typer.testing import CliRunner  # noqa: E402

from ocrbatch.cli import app  # noqa: E402

ARGS = ["bench", "--arch", "tiny", "--batch-sizes", "1,2", "--pages", "2", "--max-new-tokens", "2",
        "--loop-pages", "1", "-j", "1"]


@pytest.fixture
def one_thread():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)  # the bench sets one thread for the tiny model on a CPU


def test_bench_tiny_prints_a_row_per_batch_size(one_thread):
    r = CliRunner().invoke(app, ARGS)
    assert r.exit_code == 0, (r.stderr, r.exception)
    lines = r.stdout.splitlines()
    assert re.match(r"ocrbatch bench: random DeepSeek-OCR-2 \(tiny, 0\.4M parameters\) on cpu, float32; "
                    r"2 tokens per page; pages 1241x1754$", lines[0])
    assert re.match(r"per-page loop: 1 pages, [\d.]+ pages/s", lines[1])
    header = lines[3].split()
    assert header[:4] == ["batch", "pages", "pages/s", "util"] and "loop" in header
    rows = [line.split() for line in lines[4:]]
    assert [row[:2] for row in rows] == [["1", "2"], ["2", "2"]]
    for row in rows:  # pages/s and the ratio are numbers; no GPU: no utilization, no VRAM
        float(row[2]), float(row[-1])
        assert row[3:5] == ["-", "-"]
    assert rows[0][5].isdigit()  # two batches of one page: warm-up over; one batch of two: "-", not over
    assert "building a random tiny DeepSeek-OCR-2" in r.stderr


def test_bench_json_and_a_budget_that_skips_the_rest(one_thread):
    r = CliRunner().invoke(app, ARGS + ["--json", "--budget-s", "0", "-q"])
    assert r.exit_code == 0, (r.stderr, r.exception)
    result = json.loads(r.stdout)
    assert result["arch"] == "tiny" and result["tokens"] == 2 and result["loop_pages_per_s"] > 0
    assert [row["skipped"] for row in result["rows"]] == ["over the 0 s budget"] * 2
    assert r.stderr == ""


def test_bench_full_needs_a_gpu():
    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    r = CliRunner().invoke(app, ["bench", "--arch", "full"])
    assert r.exit_code == 5 and "no CUDA GPU" in r.stderr and "--arch tiny" in r.stderr
