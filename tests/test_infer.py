"""The infer worker: splitting failed batches, out-of-memory handling, the adaptive cap."""

from pathlib import Path

from conftest import draw_page
from engines import CrashOnPage, OomAboveEngine
from ocrbatch.config import EngineOptions
from ocrbatch.gpu.adaptive import BatchSizeController
from ocrbatch.pipeline.infer import InferWorker
from ocrbatch.records import Kind, PageImage, PageRef, Source


def pages(n: int, poison: int | None = None) -> list[PageImage]:
    out = []
    for i in range(n):
        name = "poison.png" if i == poison else f"p{i}.png"
        src = Source(Path("/docs") / name, name, Kind.PNG, Path(name).with_suffix(""), 1, 1, 1, False)
        out.append(PageImage(PageRef(src, 1), draw_page(f"page {i}", size=(200, 260), font_size=18)))
    return out


def run(engine, batch, controller=None):
    results = []
    engine.load("cpu")
    InferWorker(engine, results.append, controller).run_batch(batch)
    return results


def test_out_of_memory_splits_the_batch_and_lowers_the_cap():
    OomAboveEngine.seen = []
    controller = BatchSizeController(max_batch=8)
    results = run(OomAboveEngine(EngineOptions()), pages(8), controller)
    assert [r.status.value for r in results] == ["ok"] * 8
    assert [r.ref.source.display for r in results] == [f"p{i}.png" for i in range(8)]  # order kept
    assert controller.cap == 2 and controller.ooms == 2  # 8 → 4 (still too big) → 2
    assert OomAboveEngine.seen == [8, 4, 2, 2, 2, 2]  # once the cap drops, batches keep to it


def test_a_page_that_fails_alone_is_recorded_once_never_retried_forever():
    OomAboveEngine.seen = []
    engine = OomAboveEngine(EngineOptions())
    engine.limit = 0  # even one page is too much
    results = run(engine, pages(3))
    assert [r.status.value for r in results] == ["failed"] * 3
    assert "out of memory" in results[0].error
    assert len(OomAboveEngine.seen) == 5  # 3 → 1 + 2 → 1 + 1: each page tried alone exactly once


def test_one_bad_page_fails_alone_and_its_neighbours_are_kept():
    results = run(CrashOnPage(EngineOptions()), pages(5, poison=3))
    assert [r.status.value for r in results] == ["ok", "ok", "ok", "failed", "ok"]


def test_cap_grows_back_while_the_device_is_idle_and_stops_at_max_batch():
    c = BatchSizeController(max_batch=8, patience=2)
    c.on_out_of_memory(8)
    assert c.cap == 4
    for _ in range(2):
        c.on_batch_done(4, util_pct=50.0, mem_frac=0.5)
    assert c.cap == 5
    for _ in range(4):
        c.on_batch_done(5, util_pct=99.0, mem_frac=0.5)  # busy enough: stay
    assert c.cap == 5
    for _ in range(4):
        c.on_batch_done(5, util_pct=50.0, mem_frac=0.95)  # memory nearly full: stay
    assert c.cap == 5
    for _ in range(40):
        c.on_batch_done(c.cap, util_pct=10.0, mem_frac=0.2)
    assert c.cap == 8


def test_the_next_batch_is_staged_before_this_one_runs_and_every_batch_is_released():
    from engines import StagingRecorder
    from ocrbatch.records import Batch

    queue = [Batch((p,)) for p in pages(3)]
    StagingRecorder.calls = []
    engine = StagingRecorder(EngineOptions())
    engine.load("cpu")
    results = []
    InferWorker(engine, results.append).run(lambda block: queue.pop(0) if queue else None, busy=lambda s: None)
    assert StagingRecorder.calls == ["stage p0", "stage p1", "infer p0", "release p0",
                                     "stage p2", "infer p1", "release p1", "infer p2", "release p2"]
    assert len(results) == 3


def test_the_cap_reads_its_own_gpu_from_the_sampler():
    from ocrbatch.gpu.device import load_reader, reading_for
    from ocrbatch.gpu.nvml import GpuReading, ResourceSample

    gib = 2**30
    sample = ResourceSample(gpus=(GpuReading(0, "A", 30.0, 10 * gib, 80 * gib, 30.0, 10 * gib, "GPU-aaa"),
                                  GpuReading(1, "B", 70.0, 60 * gib, 80 * gib, 70.0, 60 * gib, "GPU-bbb")),
                            host=None)
    assert reading_for("cuda:1", sample).name == "B"  # by position without a UUID
    assert reading_for("cuda:0", sample, uuid="bbb").name == "B"  # by UUID (torch writes it without "GPU-")
    assert reading_for("cuda:5", sample) is None and reading_for("cpu", sample) is None
    assert load_reader("cpu", lambda: sample) is None  # no readings off GPU: the cap never grows back
    load = load_reader("cuda:1", lambda: sample)
    assert load() == (70.0, 0.75)
    assert load_reader("cuda:0", lambda: None)() == (None, None)  # NVML gone: no data, no crash
