"""The live panel, the plain log line and the summary table, rendered from made-up snapshots."""

from __future__ import annotations

import io
import re
from types import SimpleNamespace

from rich.console import Console

from ocrbatch.gpu.nvml import GpuReading, HostReading, ResourceSample
from ocrbatch.pipeline.stats import Snapshot, Stats, Summary
from ocrbatch.ui import Reporter, summary_table
from ocrbatch.ui.panel import render_panel
from ocrbatch.ui.plain import figures, line

GIB = 2**30


def fake_snapshot(**changes) -> Snapshot:
    """A run 1,234 pages into 10,000 on one GPU, infer the bottleneck."""
    values = dict(
        elapsed_s=588.0, pages_total=10_000, discovering=False,
        done={"ok": 1230, "skipped": 0, "failed": 4, "truncated": 0},
        queue_depth={"decode": 12, "batch": 17, "infer": 2, "write": 0},
        busy_s={"decode": 900.0, "batch": 1.0, "infer": 570.0, "write": 6.0},
        batches=162, batch_pages=1234, last_batch=8, last_error="scan [bold].pdf page 3: InferenceError: CUDA oops",
        workers={"decode": 4, "batch": 1, "infer": 1, "write": 1},
        queue_max={"decode": 64, "batch": 20, "infer": 2, "write": 256},
        rate_now=2.31, busy_now={"decode": 0.38, "batch": 0.0, "infer": 0.98, "write": 0.01},
        resources=ResourceSample(
            gpus=(GpuReading(0, "NVIDIA H200", 95.0, int(30.0 * GIB), int(139.8 * GIB), 91.5, int(31.2 * GIB)),),
            host=HostReading(180.0, int(1.2 * GIB), 150.0, int(1.5 * GIB), 16)),
        started_at=1_700_000_000.0,
    )
    values.update(changes)
    return Snapshot(**values)


NO_GPU = ResourceSample(gpus=(), host=HostReading(180.0, int(1.2 * GIB), 150.0, int(1.5 * GIB), 2),
                        gpu_note="NVML: NVML Shared Library Not Found")


def render(renderable, width: int = 120, **console_args) -> str:
    console = Console(record=True, file=io.StringIO(), width=width, **console_args)
    console.print(renderable)
    return console.export_text()


def test_panel_shows_progress_rates_stages_gpu_and_last_error():
    text = render(render_panel(fake_snapshot(), "ocrbatch · engine test"))
    for figure in ("ocrbatch · engine test", "1,234/10,000 pages", "12%",
                   "ETA 1h03m",  # 8,766 pages left at 2.31 pages/s
                   "2.31 pages/s now", "2.10 average", "9m48s elapsed",
                   "ok 1,230", "skipped 0", "failed 4",
                   "8 now", "7.6 mean", "162 batches",
                   "decode ×4", "98%", "38%",
                   "gpu0", "NVIDIA H200", "95%", "30.0/139.8 GiB",
                   "last error", "scan [bold].pdf page 3: InferenceError: CUDA oops"):
        assert figure in text, figure
    assert "RSS" not in text  # the GPU takes the place of CPU and RSS
    assert "waiting" not in text and "12/64 pages" not in text  # the queues are for -v
    verbose = render(render_panel(fake_snapshot(), "ocrbatch · engine test", verbose=True))
    for figure in ("waiting", "12/64 pages", "17/20 pages", "2/2 batches"):
        assert figure in verbose, figure


def test_panel_without_gpu_shows_cpu_figures_not_why_there_are_none():
    text = render(render_panel(fake_snapshot(resources=NO_GPU)))
    assert "1.8 of 2 cores busy" in text and "RSS 1.2 GiB" in text and "2.31 pages/s" in text
    assert "NVML" not in text and "no GPU data" not in text and "gpu0" not in text
    assert "NVML Shared Library Not Found" in render(render_panel(fake_snapshot(resources=NO_GPU), verbose=True))


def test_panel_moves_within_a_batch_before_any_page_of_it_finishes():
    from ocrbatch.pipeline.stats import WorkerFigures

    cpu = WorkerFigures("cpu", 0, 0, 0.0, 5.0, 0.0, 0.0, None, None, None, running=6, running_done=0.5)
    snap = fake_snapshot(pages_total=7, done={"ok": 0, "skipped": 0, "failed": 0}, rate_now=0.0, elapsed_s=5.0,
                         batches=0, batch_pages=0, infer_workers=(cpu,), partial=3.0, resources=NO_GPU)
    text = render(render_panel(snap))
    assert "0/7 pages  43%" in text and "ETA 7s" in text  # 3 of 7 pages' worth in 5 s: 4 more in about 7 s
    assert "6 in the engine, 50% read" in text


def test_panel_while_pages_are_still_being_found_and_before_anything_finished():
    snap = fake_snapshot(discovering=True, pages_total=40, done={"ok": 0, "skipped": 0, "failed": 0},
                         rate_now=0.0, elapsed_s=0.0, batches=0, batch_pages=0, last_batch=0, last_error=None,
                         resources=None)
    text = render(render_panel(snap))
    assert "0/40+ pages (finding more)" in text and "ETA ?" in text
    assert "last error" not in text


def _color_codes(ansi: str) -> list[int]:
    """Foreground/background colour parameters in the SGR escape sequences of `ansi`."""
    codes = []
    for params in re.findall(r"\x1b\[([0-9;]*)m", ansi):
        codes += [int(p) for p in params.split(";") if p and (30 <= int(p) <= 49 or 90 <= int(p) <= 107)]
    return codes


def test_no_color_is_honoured(monkeypatch):
    def ansi() -> str:
        console = Console(file=io.StringIO(), width=120, force_terminal=True)
        console.print(render_panel(fake_snapshot()))
        return console.file.getvalue()

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert _color_codes(ansi())  # the check can fail
    monkeypatch.setenv("NO_COLOR", "1")
    assert _color_codes(ansi()) == []


def test_plain_line_is_timestamped_logfmt_with_the_key_figures():
    text = line("progress", figures(fake_snapshot()))
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} ocrbatch: progress ", text)
    fields = dict(kv.split("=", 1) for kv in text.split(" ocrbatch: progress ")[1].split(" "))
    assert fields["pages"] == "1234/10000"
    assert (fields["ok"], fields["skipped"], fields["failed"]) == ("1230", "0", "4")
    assert fields["rate"] == "2.31/s" and fields["avg_rate"] == "2.10/s" and fields["eta"] == "1h03m"
    assert fields["queue"] == "decode:12,batch:17,infer:2,write:0"
    assert fields["busy"] == "decode:38%,batch:0%,infer:98%,write:1%"
    assert fields["gpu0"] == "95%,30.0/139.8GiB"
    no_gpu = figures(fake_snapshot(resources=NO_GPU))
    assert no_gpu["cpu"] == "180%" and no_gpu["rss"] == "1.2GiB"


def test_plain_values_with_spaces_are_quoted():
    assert line("started", {"output": "/tmp/my out"}).endswith('started output="/tmp/my out"')


def test_summary_table_lists_counts_rates_stages_devices_and_engine():
    summary = Summary(
        counts={"ok": 28, "skipped": 1, "failed": 1, "truncated": 2}, pages_total=32, sources=9,
        missing_inputs=[], renamed=[], output="/tmp/out",
        engine={"engine": "deepseek-ocr2", "dtype": "bfloat16", "attention": "sdpa"},
        figures={"wall_s": 75.5, "pages_per_s": 0.41, "batches": 5, "mean_batch": 6.2,
                 "stage_busy_pct": {"decode": 3.0, "batch": 0.0, "infer": 97.4, "write": 0.2},
                 "gpus": [{"index": 0, "name": "NVIDIA H200", "util_mean_pct": 88.0, "vram_peak_mib": 31 * 1024,
                           "vram_total_mib": 143 * 1024}],
                 "cpu_mean_pct": 120.0, "rss_peak_mib": 2048},
        review_below=0.9, review=[{"source": "scans/receipt.jpg", "page": 1, "output": "receipt.md", "score": 0.71},
                                  {"source": "scans/a.pdf", "page": 3, "output": "a/page-0003.md", "score": 0.86}])
    text = render(summary_table(summary))
    assert "2 pages under confidence 0.9 (lowest: scans/receipt.jpg page 1, 0.710)" in text
    for figure in ("32 in 9 files: 28 ok, 1 skipped, 1 failed, 2 truncated", "0.41 pages/s", "1m16s",
                   "decode 3% · batch 0% · infer 97% · write 0%", "5, mean 6.2 pages",
                   "NVIDIA H200: utilization mean 88%, peak VRAM 31.0 of 143.0 GiB", "peak RSS 2.0 GiB",
                   "deepseek-ocr2 (dtype: bfloat16; attention: sdpa)", "/tmp/out"):
        assert figure in text, figure


def test_reporter_draws_the_panel_from_the_snapshot_function():
    console = Console(record=True, file=io.StringIO(), width=120, force_terminal=True)
    reporter = Reporter(mode="panel", about={"engine": "test"}, console=console)
    with reporter:
        reporter.watch(fake_snapshot)
        reporter.finish(SimpleNamespace(exit_code=0))
    text = console.export_text()
    assert "ocrbatch · engine test" in text and "1,234/10,000 pages" in text


def test_stats_rates_and_busy_cover_recent_work_and_work_in_progress():
    stats = Stats(workers={"decode": 2})
    stats.add_busy("decode", 0.0)
    stats.begin("infer")  # a batch that has not finished yet still shows as busy
    stats.add_batch(4)
    snap = stats.snapshot(pages_total=10, discovering=False, done={"ok": 4, "skipped": 2},
                          queue_depth={}, last_error=None)
    assert snap.busy_now["infer"] > 0 and snap.busy_s["infer"] > 0
    assert snap.processed == 4 and snap.remaining == 4 and snap.mean_batch == 4
    assert snap.rate_now > 0 and snap.eta_s is not None
    stats.add_busy("infer", 0.5)  # the batch ends: its measured time replaces the running estimate
    assert stats.snapshot(pages_total=10, discovering=False, done={}, queue_depth={},
                          last_error=None).busy_s["infer"] == 0.5


def test_worker_figures_show_in_the_panel_and_the_summary():
    from ocrbatch.pipeline.stats import WorkerFigures, summary_dict

    worker = WorkerFigures(device="cuda:0", batches=154, pages=1170, busy_s=560.0, wall_s=571.0, compute_s=540.2,
                           copy_s=1.23, cap=8, allocations=24, allocations_after_warmup=0, slot_efficiency=0.91234,
                           tokens=120000, kv_cache=0.4213, kv_cache_peak=0.8127)
    snap = fake_snapshot(infer_workers=(worker,))
    text = render(render_panel(snap, verbose=True), width=170)
    assert ("cuda:0  154 batches · 7.6 mean · busy 98% · compute 9m00s · copy 1.2 s · cap 8 · "
            "buffers 24 made, 0 after warm-up · KV cache 42% (peak 81%)") in text
    figures = summary_dict(snap)
    assert figures["infer_workers"] == [{
        "device": "cuda:0", "batches": 154, "pages": 1170, "mean_batch": 7.6, "busy_pct": 98.1, "wall_s": 571.0,
        "compute_s": 540.2, "copy_s": 1.23, "batch_cap": 8, "buffer_allocations": 24,
        "buffer_allocations_after_warmup": 0, "slot_efficiency": 0.9123, "tokens": 120000,
        "kv_cache_pct": 42.1, "kv_cache_peak_pct": 81.3}]
    summary = Summary(counts={"ok": 1170, "skipped": 0, "failed": 0}, pages_total=1170, sources=1,
                      missing_inputs=[], renamed=[], output="/tmp/out", engine={"engine": "deepseek-ocr2"},
                      figures=figures)
    assert re.search(r"cuda:0 +154 batches, mean 7\.6 · busy 98% · compute 9m00s · copy 1\.2 s · cap 8 · "
                     r"buffers 24 made, 0 after warm-up · KV cache peak 81%", render(summary_table(summary), width=160))
    # Without buffers (e.g. rapidocr) or a controller, those parts are left out.
    bare = WorkerFigures("cpu", 3, 6, 1.0, 2.0, 0.9, 0.0, None, None, None)
    bare_text = render(render_panel(fake_snapshot(infer_workers=(bare,))), width=140)
    assert "buffers" not in bare_text and "KV cache" not in bare_text


def test_a_cpu_run_shows_progress_before_its_first_batch_ends(tmp_path, register_engine):
    """A batch of 6 pages on a CPU ends all at once: the panel moves while it runs, from what the engine says."""
    import threading

    from conftest import draw_page
    from engines import HalfwayEngine
    from ocrbatch.config import RunConfig
    from ocrbatch.pipeline.run import run

    for i in range(6):
        draw_page(f"page {i}", size=(200, 260)).save(tmp_path / f"p{i}.png")
    register_engine(HalfwayEngine)
    HalfwayEngine.halfway.clear()
    HalfwayEngine.go.clear()
    seen: list[str] = []

    def watch(snapshot) -> None:
        def look() -> None:
            try:
                if HalfwayEngine.halfway.wait(120):
                    seen.append(render(render_panel(snapshot())))
            finally:
                HalfwayEngine.go.set()
        threading.Thread(target=look, daemon=True).start()

    config = RunConfig(inputs=(str(tmp_path),), output=tmp_path / "out", engine="halfway", max_batch=6,
                       max_wait_ms=30_000)
    summary = run(config, watch=watch)
    assert summary.counts["ok"] == 6 and seen
    m = re.search(r"(\d+)/6 pages\s+(\d+)%", seen[0])
    assert m and int(m.group(1)) < 6 and int(m.group(2)) > 100 * int(m.group(1)) / 6, seen[0]
    assert "in the engine" in seen[0] and "BatchCap" not in seen[0]


def test_no_repr_of_the_batch_cap_in_the_panel_or_the_summary():
    from ocrbatch.config import BatchCap
    from ocrbatch.pipeline.stats import WorkerFigures, summary_dict

    worker = WorkerFigures("cuda:0", 3, 24, 1.0, 2.0, 0.9, 0.0, BatchCap(8, auto=True), None, None)
    snap = fake_snapshot(infer_workers=(worker,))
    summary = Summary(counts={"ok": 24, "skipped": 0, "failed": 0}, pages_total=24, sources=1, missing_inputs=[],
                      renamed=[], output="/tmp/out", engine={"engine": "fake"}, figures=summary_dict(snap))
    for text in (render(render_panel(snap), width=160), render(summary_table(summary), width=160)):
        assert "cap 8" in text and "BatchCap" not in text, text


def test_a_batch_progress_share_never_goes_back_as_more_work_becomes_known():
    from ocrbatch.engines.base import BatchProgress

    progress = BatchProgress()
    assert progress.share() is None
    progress.begin(2)
    progress.advance()
    assert progress.share() == 0.5
    progress.more(8)  # a page's lines became known: 1 of 10 now, still shown as half
    assert progress.share() == 0.5
    progress.advance(7)
    assert progress.share() == 0.8
    progress.end()
    assert progress.share() is None
