"""The engine interface, in its two roles:

    Front   one per converter: what every device shares. It names the engine's output (`identity`, for
            resume), describes it, says which pages pad well together (`bucket_key`), preprocesses each
            page on a decode thread (`prepare`) and wakes those threads when work stops (`abort`).
    Runner  one per device: `load` there, `stage` a batch's inputs onto the device, `infer` it, `release`
            what its pages held, report `stats` on its buffers, `close`.

A page's way: prepare (decode thread) → stage → infer → release (the device's thread); `stage` runs for the
next batch before `infer` runs this one, so that the copy overlaps compute. Most engines are one class
playing both roles (`Engine`); the pipeline makes one per device, the first also serving as the front
(engines/registry.py: `build`).

Heavy imports (onnxruntime, torch, transformers) happen inside `load`, never at import time, so
`ocrbatch --help` stays instant.
"""

from __future__ import annotations

import abc
import math
from typing import Any, ClassVar, Hashable, Sequence

from ..config import EngineOptions
from ..records import PageImage, PageOutput


class Front(abc.ABC):
    """What every device shares (one per converter)."""

    name: ClassVar[str]
    uses_gpu: ClassVar[bool] = False  # `--devices auto` gives it every visible GPU

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

    def prepare(self, page: PageImage) -> PageImage:
        """Called on a decode thread before the page is batched; may block while buffers are all in use
        (back-pressure: the seconds spent so go in the page's `held_s`). Raise EngineLoadError when the engine
        cannot work at all (the run stops); any other exception fails this page only, and must leave nothing
        held."""
        return page

    def abort(self) -> None:
        """Work is stopping early: wake any thread blocked in `prepare` (it raises)."""


class Runner(abc.ABC):
    """One device's engine."""

    @abc.abstractmethod
    def load(self, device: str) -> None:
        """Get ready to run on `device` ("cpu", "cuda:0", ...); raise EngineLoadError if it cannot."""

    @abc.abstractmethod
    def infer(self, pages: Sequence[PageImage]) -> list[PageOutput | Exception]:
        """One output per page, in order. An exception in the list fails that page only; an exception
        raised fails the batch, which the worker then splits to find the page at fault (an out-of-memory
        error also lowers the batch-size cap: free what caches you hold before raising it)."""

    def stage(self, pages: Sequence[PageImage]) -> None:
        """Start copying prepared pages to the device, asynchronously if possible; `infer` waits for it."""

    def release(self, pages: Sequence[PageImage]) -> None:
        """The pages' batch is over (whatever its outcome): free their prepared inputs."""

    def stats(self) -> dict[str, Any]:
        """Figures on the runner's buffers for the worker's metrics: `allocations` (tensors created so far),
        `copy_s` (host → device copy time), `filled` (they ran out once: from then on they only cycle);
        empty when the engine keeps none."""
        return {}

    def close(self) -> None:
        """Release what `load` took."""


class Engine(Front, Runner):
    """An engine that plays both roles in one class (every built-in engine does)."""

    def __init__(self, options: EngineOptions) -> None:
        self.options = options
