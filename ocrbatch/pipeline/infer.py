"""Batches → page results: one worker per device runs the engine.

Before running a batch, the worker stages the next one if it is already waiting (`Engine.stage`: its
copy to the device starts on a side stream), so that copy overlaps this batch's compute; after a batch,
whatever happened, the engine releases its pages' buffers.

A batch the engine rejects as a whole is split in halves until the page at fault is alone; that page
is recorded as failed and its neighbours still get their output. An out-of-memory error also lowers the
device's batch-size cap (gpu/throughput.py), so later batches fit; each clean batch reports its time, tokens
and memory to that controller, which may raise the cap while throughput gains (`--max-batch auto`).
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Sequence

import gc
from typing import Any

from ..engines.base import Engine
from ..errors import error_line
from ..gpu.device import MemoryProbe
from ..gpu.throughput import ThroughputController
from ..records import Batch, PageImage, PageOutput, PageResult, Status
from .stats import WorkerFigures

log = logging.getLogger("ocrbatch")

# The next batch: block=True waits for one (None: no more will come); block=False returns None at once
# when none is waiting.
Take = Callable[[bool], "Batch | None"]

# Warm-up, for the "buffer allocations after warm-up" figure: the worker's first WARMUP_BATCHES batches, and,
# when the engine's buffers fill up at some point (the decode threads get held back: from then on buffers
# only cycle), until then.
WARMUP_BATCHES = 2


def is_out_of_memory(exc: BaseException) -> bool:
    """torch.cuda.OutOfMemoryError, MemoryError, or an engine error that says so."""
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return True
    return "out of memory" in str(exc).lower()


class InferWorker:
    def __init__(self, engine: Engine, emit: Callable[[PageResult], None],
                 controller: ThroughputController | None = None, memory: MemoryProbe | None = None,
                 device: str = "") -> None:
        self.engine = engine
        self.emit = emit
        self.controller = controller
        self.memory = memory
        self.device = device
        self.busy_s = 0.0
        self.compute_s = 0.0
        self.batches = 0
        self.pages = 0
        self.started: float | None = None  # when the first batch arrived
        self.ended: float | None = None  # when the last one was done
        self.warm_allocations: int | None = None  # allocations when warm-up ended
        self.slots: Any = None  # the engine's SlotFigures (continuous decoding: the decoder's)
        self._filled = False

    def run(self, take: Take, busy: Callable[[float], None], begin: Callable[[], None] | None = None) -> None:
        """Take batches until there are none. `begin` is called as each batch starts, `busy` with the time
        it took. An engine that decodes continuously (Engine.decoder) gets its pages streamed instead
        (gpu/streaming.py)."""
        batch, staging_s = self._take(take, block=True)
        decoder = self.engine.decoder() if batch is not None else None
        if decoder is not None:
            from ..gpu.streaming import StreamRunner

            StreamRunner(self, decoder).run(batch, take, busy, begin)
            self.ended = time.monotonic()
            return
        self.slots = getattr(self.engine, "slots", None)
        while batch is not None:
            upcoming = self._take(take, block=False)  # staged now: its copy overlaps this batch's compute
            if begin is not None:
                begin()
            t0 = time.perf_counter()
            try:
                self.run_batch(batch.pages)
            finally:
                self.engine.release(batch.pages)
            self.count(len(batch), staging_s + time.perf_counter() - t0, busy)
            batch, staging_s = upcoming if upcoming[0] is not None else self._take(take, block=True)
        self.ended = time.monotonic()

    def _take(self, take: Take, block: bool) -> tuple[Batch | None, float]:
        """The next batch, staged; and how long staging took."""
        batch = take(block)
        if batch is None:
            return None, 0.0
        if self.started is None:
            self.started = time.monotonic()
        t0 = time.perf_counter()
        try:
            self.engine.stage(batch.pages)
        except Exception:  # noqa: BLE001 - infer stages what is left, inside the batch's error handling
            log.debug("staging a batch of %d failed; it is staged again when it runs", len(batch), exc_info=True)
        return batch, time.perf_counter() - t0

    def count(self, pages: int, spent: float, busy: Callable[[float], None], batches: int = 1) -> None:
        """`pages` finished in `batches` batches that took `spent` seconds."""
        self.busy_s += spent
        self.batches += batches
        self.pages += pages
        if self.batches >= WARMUP_BATCHES and not self._filled:
            stats = self.engine.buffer_stats()
            self._filled = bool(stats.get("filled", True))
            if self.warm_allocations is None or self._filled:
                self.warm_allocations = stats.get("allocations")
        busy(spent)

    def figures(self) -> WorkerFigures:
        """The worker's figures now (read from other threads: a consistent-enough copy)."""
        stats = self.engine.buffer_stats()
        allocations = stats.get("allocations")
        warm = self.warm_allocations
        slots = self.slots
        return WorkerFigures(
            device=self.device, batches=self.batches, pages=self.pages, busy_s=self.busy_s,
            wall_s=(self.ended or time.monotonic()) - self.started if self.started is not None else 0.0,
            compute_s=self.compute_s, copy_s=float(stats.get("copy_s", 0.0)),
            cap=self.controller.cap if self.controller is not None else None, allocations=allocations,
            allocations_after_warmup=None if allocations is None or warm is None else allocations - warm,
            slot_efficiency=slots.efficiency if slots is not None else None,
            tokens=slots.useful if slots is not None else None)

    def run_batch(self, pages: Sequence[PageImage]) -> None:
        """Infer `pages`, splitting on failure; every page ends in exactly one result."""
        cap = self.controller.cap if self.controller is not None else len(pages)
        if len(pages) > cap:  # the cap dropped (out of memory) since this batch was formed
            for i in range(0, len(pages), cap):
                self.run_batch(pages[i:i + cap])
            return
        t0 = time.perf_counter()
        if self.memory is not None:
            self.memory.begin()
        outputs, failure = self._infer(pages)
        if failure is not None:
            # Out of the `except` block, the traceback dropped and garbage collected: the failed attempt's
            # frames (KV cache, logits, pixels) are gone before the cache is emptied and the halves run.
            failure = forget_frames(failure)
            if is_out_of_memory(failure):
                gc.collect()
                self.engine.after_out_of_memory()
                if self.controller is not None:
                    cap = self.controller.on_out_of_memory(len(pages))
                    log.info("out of memory on a batch of %d; batch cap now %d", len(pages), cap)
            if len(pages) > 1:
                log.debug("batch of %d failed (%s); splitting", len(pages), error_line(failure))
                half = len(pages) // 2
                self.run_batch(pages[:half])
                self.run_batch(pages[half:])
                return
            outputs = [failure]
        elif self.controller is not None:
            used, free = self.memory.end() if self.memory is not None else (None, None)
            tokens = sum(int(o.info.get("tokens", 1)) + 1 for o in outputs if isinstance(o, PageOutput))
            self.controller.on_batch_done(len(pages), time.perf_counter() - t0, tokens, used, free)
        per_page = (time.perf_counter() - t0) / len(pages)
        for page, out in zip(pages, outputs):
            self.emit_output(page, out, {"decode_s": page.decode_s, "infer_s": per_page,
                                         "batch_size": float(len(pages))})

    def _infer(self, pages: Sequence[PageImage]) -> tuple[list[PageOutput | Exception], BaseException | None]:
        t0 = time.perf_counter()
        try:
            outputs = self.engine.infer(pages)
            if len(outputs) != len(pages):
                raise RuntimeError(f"engine returned {len(outputs)} results for {len(pages)} pages")
            return outputs, None
        except Exception as exc:  # noqa: BLE001 - engine code is foreign; we isolate the culprit
            if len(pages) == 1:
                log.debug("engine failed on %s", pages[0].ref.label, exc_info=True)
            return [], exc
        finally:
            self.compute_s += time.perf_counter() - t0

    def emit_output(self, page: PageImage, out: PageOutput | BaseException, timings: dict[str, float]) -> None:
        if isinstance(out, PageOutput):
            self.emit(PageResult(ref=page.ref, status=out.status, markdown=out.markdown,
                                 attachments=out.attachments, timings=timings, info=out.info))
        else:
            self.emit(PageResult(ref=page.ref, status=Status.FAILED, error=error_line(out), timings=timings))


def forget_frames(exc: BaseException) -> BaseException:
    """`exc` without its traceback, nor those of the exceptions chained to it: the frames they hold (and the
    tensors in them) can be freed. Returns `exc`."""
    seen = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        e.__traceback__ = None
        e = e.__cause__ or e.__context__
    return exc
