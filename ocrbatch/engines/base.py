"""The engine interface: load once per device, infer a batch (one output per page), close.

Heavy imports (onnxruntime, torch, transformers) happen inside `load`, never at import time, so
`ocrbatch --help` stays instant.
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

    def close(self) -> None:
        """Release what `load` took."""

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
