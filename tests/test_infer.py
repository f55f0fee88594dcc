"""The infer worker: splitting failed batches, out-of-memory handling, the adaptive cap."""

from pathlib import Path

from conftest import draw_page
from engines import CrashOnPage, OomAboveEngine
from ocrbatch.config import EngineOptions
from ocrbatch.gpu.throughput import ThroughputController
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
    controller = ThroughputController(8)
    results = run(OomAboveEngine(EngineOptions()), pages(8), controller)
    assert [r.status.value for r in results] == ["ok"] * 8
    assert [r.ref.source.display for r in results] == [f"p{i}.png" for i in range(8)]  # order kept
    assert controller.cap == 2 and controller.ooms == 2  # 8 → 4 (still too big) → 2
    assert controller.ceiling == 3  # below the smallest size that ran out: never tried again
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


class SimulatedDevice:
    """Tokens/s grow with the batch until `saturates` rows, then stay flat; each page takes `page_gib` of
    memory, and `fits` pages are all the memory holds."""

    def __init__(self, saturates=48, fits=100, page_gib=0.5):
        self.saturates, self.fits, self.page = saturates, fits, page_gib * 2**30
        self.tried = []

    def run(self, controller, batches=200):
        for _ in range(batches):
            size = controller.cap
            self.tried.append(size)
            if size > self.fits:
                controller.on_out_of_memory(size)
                continue
            tokens = 100 * size  # every page 100 tokens
            seconds = tokens / (1000 * min(size, self.saturates))  # 1000 tokens/s per row up to saturation
            controller.on_batch_done(size, seconds, tokens, used_bytes=size * self.page,
                                     free_bytes=(self.fits - size) * self.page if self.known_memory else None)
        return controller.cap

    known_memory = True


def test_the_cap_grows_while_tokens_per_second_gain_and_settles_where_they_stop():
    device = SimulatedDevice(saturates=48, fits=1000)
    cap = device.run(ThroughputController(8, ceiling=256, grow=True))
    assert 48 <= cap <= 72  # grew past the saturation point, then stopped: no gain beyond it
    assert device.tried[-50:] == [cap] * 50  # settled: no more probing


def test_the_cap_stops_where_free_memory_ends_without_running_out():
    device = SimulatedDevice(saturates=10_000, fits=40)
    controller = ThroughputController(8, ceiling=256, grow=True)
    cap = device.run(controller)
    assert controller.ooms == 0 and 20 <= cap <= 40  # measured bytes per page × free memory bounded it
    assert controller.page_bytes == device.page


def test_without_memory_figures_an_out_of_memory_error_lowers_the_ceiling_for_good():
    device = SimulatedDevice(saturates=10_000, fits=40)
    device.known_memory = False
    controller = ThroughputController(8, ceiling=256, grow=True)
    device.run(controller)
    failed = [s for s in device.tried if s > 40]
    assert len(failed) == 1  # ran out once; never climbed back to that size
    assert controller.ceiling < failed[0] and controller.cap <= 40


def test_a_fixed_cap_never_grows_and_one_device_error_leaves_the_others_alone():
    fixed = ThroughputController(8)
    assert SimulatedDevice(saturates=10_000, fits=1000).run(fixed, 50) == 8
    a, b = ThroughputController(8, ceiling=256, grow=True), ThroughputController(8, ceiling=256, grow=True)
    a.on_out_of_memory(8)
    assert (a.cap, a.ceiling, b.cap, b.ceiling) == (4, 7, 8, 256)


def test_an_out_of_memory_retry_runs_after_the_failed_attempt_is_freed():
    from engines import OomHoldingEngine

    OomHoldingEngine.alive_at_retry = []
    results = run(OomHoldingEngine(EngineOptions()), pages(4), ThroughputController(4))
    assert [r.status.value for r in results] == ["ok"] * 4
    # The halves ran after the failed attempt's frames (and the tensors in them) were gone.
    assert OomHoldingEngine.alive_at_retry and not any(OomHoldingEngine.alive_at_retry)


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


def test_the_throughput_controller_counts_the_tokens_each_page_says_it_generated():
    from ocrbatch.engines.fake import FakeEngine
    from ocrbatch.records import PageOutput

    class Counting(FakeEngine):  # pages of 5, 0 and 17 tokens, as a generating engine reports them
        def infer(self, batch):
            return [PageOutput(markdown=o.markdown, tokens=n) for o, n in zip(super().infer(batch), (5, 0, 17))]

    class Recording(ThroughputController):
        def on_batch_done(self, pages, seconds, tokens, used_bytes=None, free_bytes=None):
            seen.append((pages, tokens))
            return super().on_batch_done(pages, seconds, tokens, used_bytes, free_bytes)

    seen: list = []
    results = run(Counting(EngineOptions()), pages(3), Recording(8))
    assert [r.status.value for r in results] == ["ok"] * 3
    assert seen == [(3, (5 + 1) + (0 + 1) + (17 + 1))]  # each page's tokens and its end token
    seen.clear()
    run(FakeEngine(EngineOptions()), pages(2), Recording(8))
    assert seen == [(2, 4)]  # an engine that generates no tokens: one per page, and its end
