"""`ocrbatch throughput --arch tiny`: a random tiny DeepSeek-OCR-2 built on the fly, the per-page loop, then the real
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

ARGS = ["throughput", "--arch", "tiny", "--batch-sizes", "1,2", "--pages", "2", "--max-new-tokens", "2",
        "--loop-pages", "1", "-j", "1", "--lengths", "fixed", "--schedules", "static"]


@pytest.fixture
def one_thread():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)  # the bench sets one thread for the tiny model on a CPU


def test_bench_tiny_prints_a_row_per_batch_size(one_thread):
    r = CliRunner().invoke(app, ARGS)
    assert r.exit_code == 0, (r.stderr, r.exception)
    lines = r.stdout.splitlines()
    assert re.match(r"ocrbatch throughput: random DeepSeek-OCR-2 \(tiny, 0\.4M parameters\) on cpu, float32; "
                    r"2 tokens per page; pages 740x560$", lines[0])
    assert re.match(r"per-page loop: 1 pages, [\d.]+ pages/s", lines[1])
    header = lines[3].split()
    assert header[:5] == ["batch", "schedule", "pages", "pages/s", "tokens/s"] and "loop" in header
    rows = [line.split() for line in lines[4:]]
    assert [row[:3] for row in rows] == [["1", "static", "2"], ["2", "static", "2"]]
    for row in rows:  # pages/s, tokens/s, slot efficiency and the ratio are numbers; no GPU: no utilization, VRAM
        float(row[3]), float(row[4]), float(row[5]), float(row[-1])
        assert row[6:8] == ["-", "-"]
        assert float(row[5]) == 1.0  # fixed lengths: every row of a batch decodes to the end
    assert rows[0][8].isdigit()  # two batches of one page: warm-up over; one batch of two: "-", not over
    assert "building a random tiny DeepSeek-OCR-2" in r.stderr


def test_bench_on_the_length_mix_continuous_wastes_fewer_rows_than_static(one_thread):
    r = CliRunner().invoke(app, ["throughput", "--arch", "tiny", "--batch-sizes", "4", "--pages", "12",
                                 "--max-new-tokens", "48", "--median-tokens", "12", "--loop-pages", "1", "-j", "1",
                                 "--json", "-q"])
    assert r.exit_code == 0, (r.stderr, r.exception)
    result = json.loads(r.stdout)
    assert result["lengths"] == "mix" and result["mix_median"] == 12 and 6 <= result["median_tokens"] <= 24
    assert result["pages_drawn"] == 12 and 0 <= result["pages_to_limit"] <= 12
    rows = {row["schedule"]: row for row in result["rows"]}
    assert set(rows) == {"static", "continuous"} and all(row["pages"] == 12 for row in rows.values())
    # The same pages and lengths: the same useful tokens; static pads every batch to its longest page.
    assert rows["static"]["slot_efficiency"] < rows["continuous"]["slot_efficiency"] <= 1.0


def test_bench_mix_heading_says_the_mix_it_drew_and_refuses_a_median_past_the_limit(one_thread):
    r = CliRunner().invoke(app, ["throughput", "--arch", "tiny", "--batch-sizes", "2", "--pages", "2",
                                 "--max-new-tokens", "16", "--loop-pages", "1", "-j", "1", "--schedules", "continuous"])
    assert r.exit_code == 0, (r.stderr, r.exception)
    assert re.search(r"; lengths log-normal, median 2 tokens, sigma 0\.6, 1 page in 20 to the limit of 16 "
                     r"\(drawn: median \d+, \d of 2 pages to the limit\); pages 740x560$", r.stdout.splitlines()[0])
    r = CliRunner().invoke(app, ["throughput", "--arch", "tiny", "--max-new-tokens", "16", "--median-tokens", "16"])
    assert r.exit_code == 2 and "--median-tokens must be at least 1 and below --max-new-tokens (16)" in r.stderr


def test_bench_json_and_a_budget_that_skips_the_rest(one_thread):
    r = CliRunner().invoke(app, ARGS + ["--json", "--budget-s", "0", "-q"])
    assert r.exit_code == 0, (r.stderr, r.exception)
    result = json.loads(r.stdout)
    assert result["arch"] == "tiny" and result["tokens"] == 2 and result["loop_pages_per_s"] > 0
    assert [row["skipped"] for row in result["rows"]] == ["over the 0 s budget"] * 2
    assert [row["schedule"] for row in result["rows"]] == ["static"] * 2
    assert r.stderr == ""


def test_bench_full_needs_a_gpu():
    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    r = CliRunner().invoke(app, ["throughput", "--arch", "full"])
    assert r.exit_code == 5 and "no CUDA GPU" in r.stderr and "--arch tiny" in r.stderr


def test_bench_is_the_old_hidden_name_of_throughput():
    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    r = CliRunner().invoke(app, ["bench", "--arch", "full"])  # scripts and habits that say `ocrbatch bench`
    assert r.exit_code == 5 and "no CUDA GPU" in r.stderr
    listed = CliRunner().invoke(app, ["--help"]).stdout
    assert "throughput" in listed and not re.search(r"\bbench\b", listed)
