"""Exactly once, at each holder of pages: the run's page ledger (every page taken gets one record), the infer
worker's ledger (one result per page taken, whatever breaks its loop), and a Ray task's results (one each)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import wait
from pathlib import Path

from conftest import draw_page
from ocrbatch.config import EngineOptions
from ocrbatch.engines.base import Capabilities
from ocrbatch.engines.fake import FakeEngine
from ocrbatch.pipeline.infer import InferWorker
from ocrbatch.pipeline.ledger import LedgerQueue, PageLedger
from ocrbatch.pipeline.ray_tasks import one_each
from ocrbatch.records import Kind, PageImage, PageRef, PageResult, Source, Status


def ref(name: str, page: int = 1) -> PageRef:
    src = Source(Path("/docs") / name, name, Kind.PNG, Path(name).with_suffix(""), 1, 1, 1, False)
    return PageRef(src, page)


def test_a_pages_second_result_is_not_written_and_what_is_left_is_answered_once():
    ledger = PageLedger()
    queue = LedgerQueue(ledger, 8)
    for name in ("a.png", "b.png", "c.png"):
        queue.put(ref(name))
    taken = [queue.get(), queue.get()]  # c.png never leaves the queue: not taken, not the ledger's
    assert ledger.in_flight() == 2
    assert ledger.answer(PageResult(ref=taken[0], status=Status.OK)) is True
    assert ledger.answer(PageResult(ref=taken[0], status=Status.FAILED, error="late")) is False
    assert ledger.duplicates == 1
    left = ledger.close_out("stalled: test")
    assert [(r.ref.source.display, r.status, r.error) for r in left] == [("b.png", Status.FAILED, "stalled: test")]
    assert ledger.answer(PageResult(ref=taken[1], status=Status.OK)) is False  # it has its record now
    assert ledger.close_out("again") == [] and ledger.in_flight() == 0


def test_the_watchdog_clock_runs_only_while_pages_are_in_flight():
    ledger = PageLedger()
    assert not ledger.stalled(1.0, now=ledger.progress + 100)  # nothing in flight: waiting on input is fine
    ledger.take(ref("a.png"))
    assert not ledger.stalled(1.0, now=ledger.progress + 0.5)
    assert ledger.stalled(1.0, now=ledger.progress + 1.5)
    ledger.answer(PageResult(ref=ref("a.png"), status=Status.OK))
    assert not ledger.stalled(1.0, now=ledger.progress + 100)


def test_a_ray_task_that_returns_too_few_or_too_many_results_still_gives_one_each():
    refs = [ref("a.png"), ref("b.png"), ref("c.png")]
    got = [PageResult(ref=refs[0], status=Status.OK), PageResult(ref=refs[0], status=Status.FAILED),
           PageResult(ref=ref("stranger.png"), status=Status.OK), PageResult(ref=refs[2], status=Status.OK)]
    out = one_each(refs, got)
    assert sorted((r.ref.source.display, r.status.value) for r in out) == [
        ("a.png", "ok"), ("b.png", "failed"), ("c.png", "ok")]


def page(name: str) -> PageImage:
    return PageImage(ref(name), draw_page(name, size=(200, 260), font_size=18))


def test_a_worker_gives_a_page_one_result_however_often_it_is_answered():
    results: list[PageResult] = []
    engine = FakeEngine(EngineOptions())
    engine.load("cpu")
    worker = InferWorker(engine, results.append)
    p = page("a.png")
    worker.run_batch([p])
    worker.emit_output(p, RuntimeError("a late second answer"), {})
    assert [r.status for r in results] == [Status.OK] and not worker.holding


class BreaksAfterTwoBatches(FakeEngine):
    """Its figures raise (on the worker's thread) once two batches are done, so the worker's loop breaks
    between batches with the next batch already taken and staged. Its first staging waits for `go`, so that
    every page is queued by then."""

    name = "breaks-after-two-batches"
    capabilities = Capabilities(stages=True)  # a staging engine: the worker takes the next batch ahead
    batches = 0
    go = threading.Event()

    def stage(self, pages) -> None:
        type(self).go.wait(30)

    def infer(self, pages):
        type(self).batches += 1
        return super().infer(pages)

    def stats(self):
        if type(self).batches >= 2 and threading.current_thread().name.startswith("infer"):
            raise RuntimeError("figures broke")
        return super().stats()


def test_pages_in_hand_when_the_workers_loop_breaks_each_get_one_result(register_engine, tmp_path):
    from ocrbatch import Converter

    name = register_engine(BreaksAfterTwoBatches)
    paths = []
    for i in range(6):
        paths.append(tmp_path / f"p{i}.png")
        draw_page(f"page {i}", size=(200, 260), font_size=18).save(paths[-1])
    # Batches close only when full (a long wait window): [p0, p1], [p2, p3], [p4, p5], whatever the timing.
    with Converter(engine=name, max_batch=2, workers=1, max_wait_ms=30_000, starve_ms=60_000) as conv:
        futures = [conv.submit(p, priority="bulk") for p in paths]
        deadline = time.monotonic() + 30
        while sum(conv.stats()["queued"].values()) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)  # two pages in the first batch, held in its staging; four waiting
        BreaksAfterTwoBatches.go.set()
        done, pending = wait(futures, timeout=60)
    assert not pending, "pages the worker held when its loop broke never got a result"
    statuses = [f.result().status.value for f in futures]
    assert statuses[:4] == ["ok"] * 4 and statuses[4:] == ["failed"] * 2, statuses
    assert all("figures broke" in f.result().error for f in futures[4:])
