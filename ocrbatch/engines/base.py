"""The engine interface: load once per device, infer a batch (one output per page), close.

Heavy imports (onnxruntime, torch, transformers) happen inside `load`, never at import time, so
`ocrbatch --help` stays instant.

An engine may also split its work along the pipeline; each hook defaults to nothing:

    prepare(page)   decode thread, right after the page is decoded: preprocessing (e.g. into pool slots)
    stage(pages)    infer thread, before `infer`: start moving the batch to the device; the worker stages
                    the next batch before running this one, so that copy overlaps this compute
    infer(pages)    infer thread: the model
    release(pages)  infer thread, after the batch's results: give back what `prepare` and `stage` took
"""

from __future__ import annotations

import abc
import math
from typing import Any, ClassVar, Hashable, Sequence

from ..config import EngineOptions
from ..records import PageImage, PageOutput


class Engine(abc.ABC):
    name: ClassVar[str]
    uses_gpu: ClassVar[bool] = False  # `--devices auto` gives it every visible GPU

    def __init__(self, options: EngineOptions) -> None:
        self.options = options

    @abc.abstractmethod
    def load(self, device: str) -> None:
        """Get ready to run on `device` ("cpu", "cuda:0", ...); raise EngineLoadError if it cannot."""

    @abc.abstractmethod
    def infer(self, pages: Sequence[PageImage]) -> list[PageOutput | Exception]:
        """One output per page, in order. An exception in the list fails that page only; an exception
        raised fails the batch, which the worker then splits to find the page at fault."""

    def prepare(self, page: PageImage) -> PageImage:
        """Called on a decode thread before the page is batched; may block while buffers are all in use
        (back-pressure). Raise EngineLoadError when the engine cannot work at all (the run stops); any other
        exception fails this page only, and must leave nothing held."""
        return page

    def stage(self, pages: Sequence[PageImage]) -> None:
        """Start copying prepared pages to the device, asynchronously if possible; `infer` waits for it."""

    def release(self, pages: Sequence[PageImage]) -> None:
        """The pages' batch is over (whatever its outcome): free their prepared inputs."""

    def abort(self) -> None:
        """The run is stopping early: wake any thread blocked in `prepare` (it raises)."""

    def waited_s(self) -> float:
        """Seconds the calling thread has spent in `prepare` waiting for free buffers (back-pressure)."""
        return 0.0

    def buffer_stats(self) -> dict[str, Any]:
        """Figures on the engine's buffers for the worker's metrics: `allocations` (tensors created so far),
        `copy_s` (host → device copy time), `filled` (they ran out once: from then on they only cycle);
        empty when the engine keeps none."""
        return {}

    def close(self) -> None:
        """Release what `load` took."""

    def decoder(self) -> Any:
        """After `load`: an iteration-level decoder (rows leave and join between decoding steps; see
        gpu/streaming.py for what it must do) when the engine has one and the run asked for it; None: the
        worker runs whole batches through `infer`."""
        return None

    def after_out_of_memory(self) -> None:
        """Called after an out-of-memory error, before the batch is retried in halves (free caches)."""

    def identity(self) -> str:
        """What must match for a rerun to reuse an earlier page (engine, model, prompt...)."""
        return self.name

    def describe(self) -> dict[str, Any]:
        """Facts for the run summary (device, dtype, attention kernel...)."""
        return {"engine": self.name}

    def bucket_key(self, page: PageImage) -> Hashable:
        """Pages with the same key pad well together in one batch. Default: similar shape and size."""
        w, h = page.size
        return (round(math.log2(max(w, 1) / max(h, 1)) * 4), round(math.log2(max(w * h, 1)) * 2))
