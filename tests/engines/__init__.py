"""Fault-injecting engines for tests: they go through the real pipeline, failing on purpose."""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Sequence

from ocrbatch.confidence import Confidence
from ocrbatch.engines.base import Capabilities, Engine
from ocrbatch.engines.fake import FakeEngine
from ocrbatch.errors import EngineLoadError
from ocrbatch.gpu.pool import BufferPool
from ocrbatch.records import PageImage, PageOutput


class CrashOnPage(FakeEngine):
    """Raises for the whole batch whenever it holds a page whose source name contains `needle`."""

    name = "crash-on-page"
    needle = "poison"

    def infer(self, pages: Sequence[PageImage]) -> list[PageOutput | Exception]:
        if any(self.needle in p.ref.source.path.name for p in pages):
            raise RuntimeError("engine exploded on this input")
        return super().infer(pages)


class KillOnPage(FakeEngine):
    """Ends its whole process, as a segfault in native code would, on a page whose name contains `needle`."""

    name = "kill-on-page"
    needle = "fatal"

    def infer(self, pages: Sequence[PageImage]) -> list[PageOutput | Exception]:
        if any(self.needle in p.ref.source.path.name for p in pages):
            import os

            os._exit(3)
        return super().infer(pages)


class FigureEngine(FakeEngine):
    """Writes `figures` images beside each page, as DeepSeek-OCR-2 does for the pictures it finds."""

    name = "figures"
    figures = 2

    def infer(self, pages: Sequence[PageImage]) -> list[PageOutput | Exception]:
        from ocrbatch.records import Attachment

        outs = super().infer(pages)
        for page, out in zip(pages, outs):
            rels = [page.ref.output.parent / "images" / f"{page.ref.output.stem}-{k}.png"
                    for k in range(1, self.figures + 1)]
            out.attachments = [Attachment(r, b"png bytes") for r in rels]
            out.markdown += "".join(f"\n![](images/{r.name})\n" for r in rels)
        return outs


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


class CrashOnLoad(FakeEngine):
    """Its load raises what a broken install or device raises: not an EngineLoadError, a plain RuntimeError."""

    name = "crash-on-load"

    def load(self, device: str) -> None:
        raise RuntimeError("CUDA error: an illegal memory access was encountered (test engine)")


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


class PooledEngine(FakeEngine):
    """Prepares each page into a slot of a two-slot BufferPool, as the DeepSeek engine does with its tiles, and
    holds its first batch until a decode thread has been made to wait for a slot (back-pressure), so that the
    test sees the wait without depending on timing. A page whose name contains "poison" fails in `prepare`
    after taking its slot."""

    name = "pooled"
    last: "PooledEngine | None" = None

    def __init__(self, options) -> None:
        super().__init__(options)
        self.pool = BufferPool(slots_per_shape=2)
        type(self).last = self

    def runner(self):
        """Each device's runner frees the slots its front took, and counts that pool's allocations."""
        twin = super().runner()
        twin.pool = self.pool
        return twin

    def prepare(self, page):
        waited = self.pool.waited_s()
        slot = self.pool.acquire((4,))
        if "poison" in page.ref.source.path.name:
            self.pool.release(slot)
            raise ValueError("cannot preprocess this page")
        return dataclasses.replace(page, prepared=slot, held_s=self.pool.waited_s() - waited)

    def abort(self) -> None:
        self.pool.close()

    def infer(self, pages):
        deadline = time.monotonic() + 10
        while self.pool.waits == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        return super().infer(pages)

    def release(self, pages) -> None:
        for page in pages:
            if page.prepared is not None:
                self.pool.release(page.prepared)

    def stats(self):
        from ocrbatch.engines.base import RunnerStats

        return RunnerStats(allocations=self.pool.allocations)


class StagingRecorder(FakeEngine):
    """Records the order of its stage / infer / release calls (by the first page's name)."""

    name = "staging-recorder"
    capabilities = Capabilities(stages=True)
    calls: list[str] = []

    def stage(self, pages) -> None:
        type(self).calls.append("stage " + pages[0].ref.source.path.stem)

    def infer(self, pages):
        type(self).calls.append("infer " + pages[0].ref.source.path.stem)
        return super().infer(pages)

    def release(self, pages) -> None:
        type(self).calls.append("release " + pages[0].ref.source.path.stem)


class OomHoldingEngine(FakeEngine):
    """Runs out of memory on batches of more than one page while a local holds a large buffer (as generate's
    frames hold the KV cache); on smaller batches records whether that buffer is still alive."""

    name = "oom-holding"
    alive_at_retry: list[bool] = []
    _last = None

    def infer(self, pages: Sequence[PageImage]) -> list[PageOutput | Exception]:
        import weakref

        if len(pages) > 1:
            holder = _Held(bytearray(1 << 20))  # what the failed attempt's frame holds
            type(self)._last = weakref.ref(holder)
            raise MemoryError("CUDA out of memory (simulated)")
        if self._last is not None:
            type(self).alive_at_retry.append(self._last() is not None)
        return super().infer(pages)


class _Held:
    def __init__(self, data) -> None:
        self.data = data


class LoadCounter(RecordingEngine):
    """Counts how often it is loaded (across every instance) and remembers its batch sizes."""

    name = "load-counter"
    loads = 0

    def load(self, device: str) -> None:
        type(self).loads += 1
        super().load(device)


class MarkingEngine(FakeEngine):
    """Writes a file `batch-N` into $OCRBATCH_TEST_MARKS when it starts its N-th batch, then takes
    $OCRBATCH_TEST_BATCH_S seconds over it: a test can signal the run while a batch is in progress."""

    name = "marking"

    def infer(self, pages: Sequence[PageImage]) -> list[PageOutput | Exception]:
        import os
        from pathlib import Path

        marks = Path(os.environ["OCRBATCH_TEST_MARKS"])
        n = len(list(marks.glob("batch-*"))) + 1
        (marks / f"batch-{n}").write_text("\n".join(f"{p.ref.source.display} {p.ref.page}" for p in pages))
        time.sleep(float(os.environ.get("OCRBATCH_TEST_BATCH_S", "1")))
        return super().infer(pages)


class GateEngine(FakeEngine):
    """For the server tests, which run it in another process: appends each batch's size to the file named by
    OCRBATCH_TEST_BATCHES, then holds the batch while the file named by OCRBATCH_TEST_GATE exists (the test
    removes it to let batches run). So a test can keep pages waiting without depending on timing."""

    name = "gate"

    def infer(self, pages):
        import os

        log, gate = os.environ.get("OCRBATCH_TEST_BATCHES"), os.environ.get("OCRBATCH_TEST_GATE")
        if log:
            with open(log, "a") as fh:
                fh.write(f"{len(pages)}\n")
        while gate and os.path.exists(gate):
            time.sleep(0.01)
        return super().infer(pages)


class BigPages(FakeEngine):
    """Each page's Markdown is 256 KB: a few dozen pages fill a connection's buffers (4 MB and more on Linux)."""

    name = "big-pages"

    def infer(self, pages: Sequence[PageImage]) -> list[PageOutput | Exception]:
        outs = super().infer(pages)
        for out in outs:
            out.markdown += "x" * 262144 + "\n"
        return outs


class TypedConfidence(FakeEngine):
    """Says how sure it was only through the typed PageOutput.confidence (no `info` copy)."""

    name = "typed-confidence"
    SURE = Confidence("recognizer", 0.5, lines=1, mean=0.5, low_lines=1)

    def infer(self, pages: Sequence[PageImage]) -> list[PageOutput | Exception]:
        return [dataclasses.replace(o, confidence=self.SURE) for o in super().infer(pages)]


class SlowStart(FakeEngine):
    """A front whose first prepare does slow one-time work (as DeepSeek-OCR-2's imports transformers and loads its
    processor: tens of seconds in a fresh process on a loaded machine); `warm` does it ahead."""

    name = "slow-start"
    start_s = 4.0

    def __init__(self, options) -> None:
        super().__init__(options)
        self._warm_lock = threading.Lock()
        self._warm = False

    def warm(self) -> None:
        with self._warm_lock:
            if not self._warm:
                time.sleep(self.start_s)
                self._warm = True

    def prepare(self, page: PageImage) -> PageImage:
        self.warm()
        return super().prepare(page)


class SlowModel(FakeEngine):
    """An engine with a model that takes `load_s` to load on its device and `batch_s` for each batch (a big model
    on a loaded machine): a Ray actor's load, and a task's pages ending one batch after another."""

    name = "slow-model"
    load_s = 5.0
    batch_s = 3.5

    def load(self, device: str) -> None:
        time.sleep(self.load_s)
        super().load(device)

    def infer(self, pages: Sequence[PageImage]) -> list[PageOutput | Exception]:
        time.sleep(self.batch_s)
        return super().infer(pages)


class HalfwayEngine(FakeEngine):
    """Says how far it is into each batch (RunnerStats.batch_done, page by page, as the embedded engine does by
    lines) and holds its first batch of two or more pages halfway, until `go`: what a run shows mid-batch."""

    name = "halfway"
    halfway = threading.Event()
    go = threading.Event()

    def load(self, device: str) -> None:
        from ocrbatch.engines.base import BatchProgress

        super().load(device)
        self.progress = BatchProgress()

    def stats(self):
        from ocrbatch.engines.base import RunnerStats

        return RunnerStats(batch_done=self.progress.share())

    def infer(self, pages: Sequence[PageImage]) -> list[PageOutput | Exception]:
        self.progress.begin(len(pages))
        try:
            for i in range(len(pages)):
                self.progress.advance()
                if len(pages) > 1 and i + 1 == len(pages) // 2 and not self.halfway.is_set():
                    self.halfway.set()
                    self.go.wait(120)  # a bound against a hang, not a timing
            return super().infer(pages)
        finally:
            self.progress.end()
