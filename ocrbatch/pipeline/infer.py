"""Batches → page results: one worker per device runs the engine.

A batch the engine rejects as a whole is split in halves until the page at fault is alone; that page
is recorded as failed and its neighbours still get their output.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Sequence

from ..engines.base import Engine
from ..records import Batch, PageImage, PageOutput, PageResult, Status

log = logging.getLogger("ocrbatch")


def _error_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def run_batch(engine: Engine, pages: Sequence[PageImage],
              emit: Callable[[PageResult], None]) -> None:
    """Infer `pages`, splitting on failure; every page ends in exactly one result."""
    t0 = time.perf_counter()
    try:
        outputs = engine.infer(pages)
        if len(outputs) != len(pages):
            raise RuntimeError(f"engine returned {len(outputs)} results for {len(pages)} pages")
    except Exception as exc:  # noqa: BLE001 - engine code is foreign; we isolate the culprit
        if len(pages) > 1:
            log.debug("batch of %d failed (%s); splitting", len(pages), _error_line(exc))
            half = len(pages) // 2
            run_batch(engine, pages[:half], emit)
            run_batch(engine, pages[half:], emit)
            return
        log.debug("engine failed on %s", pages[0].ref.label, exc_info=True)
        outputs = [exc]
    per_page = (time.perf_counter() - t0) / len(pages)
    for page, out in zip(pages, outputs):
        timings = {"decode_s": page.decode_s, "infer_s": per_page, "batch_size": float(len(pages))}
        if isinstance(out, PageOutput):
            emit(PageResult(ref=page.ref, status=out.status, markdown=out.markdown,
                            attachments=out.attachments, timings=timings, info=out.info))
        else:
            emit(PageResult(ref=page.ref, status=Status.FAILED, error=_error_line(out), timings=timings))


def infer_worker(engine: Engine, take: Callable[[], Batch | None],
                 emit: Callable[[PageResult], None], busy: Callable[[float], None]) -> None:
    """Take batches until there are none; `busy` is told how long each one took."""
    while (batch := take()) is not None:
        t0 = time.perf_counter()
        run_batch(engine, batch.pages, emit)
        busy(time.perf_counter() - t0)
