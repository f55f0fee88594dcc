"""Iteration-level scheduling on one device: the infer worker's loop when its engine decodes continuously
(Capabilities.streams: `Runner.decoder()`, e.g. engines/deepseek_ocr2/continuous.py).

    take batches while fewer pages wait than it wants        (blocking only when nothing runs)
    decoder.step(rows=cap)                                   waiting pages join; one token for every row
    pages that ended → results, their buffers released      at once, not when a batch's longest page ends
    every REPORT_STEPS steps: tokens/s to the controller     (gpu/throughput.py), which may raise the cap

The decoder it drives is an engines.base.Decoder (`add`, `step`, `idle`, `active`, `waiting`, `wanted`,
`pages`, `abandon`, `figures`); the runner turns a generated page into its output (`Runner.output`). When a
step raises, the decoder's state is dropped and every page the worker took and has not answered (its ledger,
infer.py: not only what the decoder still lists) is run through the static path
(`InferWorker.run_batch`: split on failure, one result per page), after an out-of-memory error with the cap
halved; decoding then goes on with the next pages.

It drives the worker through the members `Worker` names (infer.py's InferWorker has them), so this module does
not import infer.py: infer.py imports it.
"""

from __future__ import annotations

import gc
import logging
import time
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

from ..config import MAX_BATCH_START
from ..errors import forget_frames, is_out_of_memory

if TYPE_CHECKING:
    from ..engines.base import Decoder, Runner
    from ..gpu.device import MemoryProbe
    from ..gpu.throughput import SlotFigures, ThroughputController
    from ..records import PageImage, PageOutput

log = logging.getLogger("ocrbatch")

REPORT_STEPS = 16  # decoding steps per report to the throughput controller


class Worker(Protocol):
    """What StreamRunner uses of the infer worker (infer.py: InferWorker)."""

    engine: "Runner"
    controller: "ThroughputController | None"
    memory: "MemoryProbe | None"
    slots: "SlotFigures | None"
    compute_s: float

    @property
    def holding(self) -> "list[PageImage]": ...

    def emit_output(self, page: "PageImage", out: "PageOutput | BaseException",
                    timings: dict[str, float]) -> None: ...

    def release(self, pages: "Sequence[PageImage]") -> None: ...

    def count(self, pages: int, spent: float, busy: Callable[[float], None], batches: int = 1) -> None: ...

    def run_batch(self, pages: "Sequence[PageImage]") -> None: ...


class StreamRunner:
    def __init__(self, worker: Worker, decoder: "Decoder") -> None:
        self.worker = worker
        self.decoder = decoder
        self.engine = worker.engine
        worker.slots = decoder.figures
        self._since: dict[int, float] = {}  # id(page) -> when it was taken

    def cap(self) -> int:
        controller = self.worker.controller
        return controller.cap if controller is not None else MAX_BATCH_START

    def run(self, first: Any, take: Callable[[bool], Any], busy: Callable[[float], None],
            begin: Callable[[], None] | None) -> None:
        worker, decoder = self.worker, self.decoder
        self._add(first.pages)
        if worker.memory is not None:
            worker.memory.begin()
        window = (0, 0.0, decoder.figures.useful, 0)  # steps, seconds, tokens so far, rows summed
        while True:
            while len(decoder.waiting) < decoder.wanted(self.cap()):
                batch = take(decoder.idle())  # block only when there is nothing to decode
                if batch is None:
                    break
                self._add(batch.pages)
            if decoder.idle():
                return  # take blocked and got None: no more pages will come
            if begin is not None:
                begin()
            rows = self.cap()
            prefills = decoder.figures.prefills
            t0 = time.perf_counter()
            failure = None
            try:
                done = decoder.step(rows)
            except Exception as exc:  # noqa: BLE001 - handled below, out of the except block
                failure = exc
            spent = time.perf_counter() - t0
            worker.compute_s += spent
            if failure is not None:
                failure = forget_frames(failure)
                oom = is_out_of_memory(failure)
                log.debug("continuous decoding failed (%s); its pages go through whole batches",
                          type(failure).__name__)
                del failure
                self._recover(oom, rows)
                window = (0, 0.0, decoder.figures.useful, 0)
                continue
            for page, gen, info in done:
                try:
                    out: Any = self.engine.output(page, gen, info)
                except Exception as exc:  # noqa: BLE001 - this page's post-processing failed; the rest go on
                    out = forget_frames(exc)
                taken = self._since.pop(id(page), t0)
                worker.emit_output(page, out, {"decode_s": page.decode_s, "infer_s": time.perf_counter() - taken,
                                               "batch_size": float(decoder.active + len(done))})
                worker.release([page])
            worker.count(len(done), time.perf_counter() - t0, busy, batches=decoder.figures.prefills - prefills)
            steps, seconds, tokens0, summed = window
            window = (steps + 1, seconds + spent, tokens0, summed + decoder.active)
            if window[0] >= REPORT_STEPS and worker.controller is not None:
                used, free = (None, None)
                if worker.memory is not None:
                    used, free = worker.memory.end()  # every running row's cache: against the start
                    worker.memory.begin(keep_base=True)
                worker.controller.on_batch_done(round(window[3] / window[0]), window[1],
                                                decoder.figures.useful - tokens0, used, free)
                window = (0, 0.0, decoder.figures.useful, 0)

    def _add(self, pages: Any) -> None:
        now = time.perf_counter()
        for p in pages:
            self._since[id(p)] = now
        self.decoder.add(pages)

    def _recover(self, oom: bool, rows: int) -> None:
        """Every page taken and not yet answered (the worker's ledger: whatever the decoder still knows of)
        goes through whole batches, each to exactly one result."""
        try:
            self.decoder.abandon()
        except Exception as exc:  # noqa: BLE001 - its state is dropped either way; the ledger has the pages
            log.debug("abandoning the decoder's rows failed: %s", exc)
        pages = self.worker.holding
        gc.collect()
        if oom:
            self.engine.after_out_of_memory()
            if self.worker.controller is not None:
                cap = self.worker.controller.on_out_of_memory(max(rows, 2))
                log.info("out of memory decoding %d rows; cap now %d", rows, cap)
        cap = self.cap()
        for i in range(0, len(pages), cap):
            chunk = pages[i:i + cap]
            try:
                self.worker.run_batch(chunk)
            finally:
                self.worker.release(chunk)
            for p in chunk:
                self._since.pop(id(p), None)
