"""Batches → page results: one worker per device runs the engine.

A batch the engine rejects as a whole is split in halves until the page at fault is alone; that page
is recorded as failed and its neighbours still get their output. An out-of-memory error also lowers the
batch-size cap (see gpu/adaptive.py), so later batches fit.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Sequence

from ..engines.base import Engine
from ..gpu.adaptive import BatchSizeController
from ..records import Batch, PageImage, PageOutput, PageResult, Status

log = logging.getLogger("ocrbatch")

# (utilization %, memory used fraction) of this worker's device, None when unknown
DeviceLoad = Callable[[], tuple[float | None, float | None]]


def is_out_of_memory(exc: BaseException) -> bool:
    """torch.cuda.OutOfMemoryError, MemoryError, or an engine error that says so."""
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return True
    return "out of memory" in str(exc).lower()


def _error_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class InferWorker:
    def __init__(self, engine: Engine, emit: Callable[[PageResult], None],
                 controller: BatchSizeController | None = None, load: DeviceLoad | None = None) -> None:
        self.engine = engine
        self.emit = emit
        self.controller = controller
        self.load = load
        self.busy_s = 0.0
        self.batches = 0

    def run(self, take: Callable[[], Batch | None], busy: Callable[[float], None]) -> None:
        """Take batches until there are none; `busy` is told how long each one took."""
        while (batch := take()) is not None:
            t0 = time.perf_counter()
            self.run_batch(batch.pages)
            spent = time.perf_counter() - t0
            self.busy_s += spent
            self.batches += 1
            busy(spent)

    def run_batch(self, pages: Sequence[PageImage]) -> None:
        """Infer `pages`, splitting on failure; every page ends in exactly one result."""
        cap = self.controller.cap if self.controller is not None else len(pages)
        if len(pages) > cap:  # the cap dropped (out of memory) since this batch was formed
            for i in range(0, len(pages), cap):
                self.run_batch(pages[i:i + cap])
            return
        t0 = time.perf_counter()
        try:
            outputs = self.engine.infer(pages)
            if len(outputs) != len(pages):
                raise RuntimeError(f"engine returned {len(outputs)} results for {len(pages)} pages")
        except Exception as exc:  # noqa: BLE001 - engine code is foreign; we isolate the culprit
            oom = is_out_of_memory(exc)
            if oom:
                self.engine.after_out_of_memory()
                if self.controller is not None:
                    cap = self.controller.on_out_of_memory(len(pages))
                    log.info("out of memory on a batch of %d; batch cap now %d", len(pages), cap)
            if len(pages) > 1:
                log.debug("batch of %d failed (%s); splitting", len(pages), _error_line(exc))
                half = len(pages) // 2
                self.run_batch(pages[:half])
                self.run_batch(pages[half:])
                return
            log.debug("engine failed on %s", pages[0].ref.label, exc_info=True)
            outputs = [exc]
        else:
            if self.controller is not None:
                util, mem = self.load() if self.load else (None, None)
                self.controller.on_batch_done(len(pages), util, mem)
        per_page = (time.perf_counter() - t0) / len(pages)
        for page, out in zip(pages, outputs):
            timings = {"decode_s": page.decode_s, "infer_s": per_page, "batch_size": float(len(pages))}
            if isinstance(out, PageOutput):
                self.emit(PageResult(ref=page.ref, status=out.status, markdown=out.markdown,
                                     attachments=out.attachments, timings=timings, info=out.info))
            else:
                self.emit(PageResult(ref=page.ref, status=Status.FAILED, error=_error_line(out),
                                     timings=timings))
