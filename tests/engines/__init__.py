"""Fault-injecting engines for tests: they go through the real pipeline, failing on purpose."""

from __future__ import annotations

import threading
import time
from typing import Sequence

from ocrbatch.engines.base import Engine
from ocrbatch.engines.fake import FakeEngine
from ocrbatch.errors import EngineLoadError
from ocrbatch.records import PageImage, PageOutput


class CrashOnPage(FakeEngine):
    """Raises for the whole batch whenever it holds a page whose source name contains `needle`."""

    name = "crash-on-page"
    needle = "poison"

    def infer(self, pages: Sequence[PageImage]) -> list[PageOutput | Exception]:
        if any(self.needle in p.ref.source.path.name for p in pages):
            raise RuntimeError("engine exploded on this input")
        return super().infer(pages)


class RecordingEngine(FakeEngine):
    """Remembers the size of every batch it was given."""

    name = "recording"
    batches: list[int] = []
    lock = threading.Lock()

    def infer(self, pages: Sequence[PageImage]) -> list[PageOutput | Exception]:
        with self.lock:
            type(self).batches.append(len(pages))
        return super().infer(pages)


class SlowEngine(FakeEngine):
    name = "slow"
    delay_s = 0.05

    def infer(self, pages: Sequence[PageImage]) -> list[PageOutput | Exception]:
        time.sleep(self.delay_s * len(pages))
        return super().infer(pages)


class NoLoadEngine(Engine):
    name = "no-load"

    def load(self, device: str) -> None:
        raise EngineLoadError("weights not found at /nowhere (test engine)")

    def infer(self, pages):  # pragma: no cover - never loaded
        raise AssertionError("not reached")


class OomAboveEngine(FakeEngine):
    """Raises an out-of-memory error, like torch's, for any batch larger than `limit` pages."""

    name = "oom-above"
    limit = 2
    seen: list[int] = []

    def infer(self, pages: Sequence[PageImage]) -> list[PageOutput | Exception]:
        type(self).seen.append(len(pages))
        if len(pages) > self.limit:
            raise OutOfMemoryError(f"CUDA out of memory. Tried to allocate {len(pages)} GiB")
        return super().infer(pages)


class OutOfMemoryError(RuntimeError):
    """Named like torch.cuda.OutOfMemoryError, which the worker recognises."""
