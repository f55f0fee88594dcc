"""The engine contract: everything the pipeline relies on an engine for, and nothing else.

    Capabilities  what an engine declares about itself; the pipeline reads this record, never the class
    Front         one per converter, shared by every device: names the engine's output (`identity`, for
                  resume), describes it, says which pages pad well together (`bucket_key`), preprocesses each
                  page on a decode thread (`prepare`), wakes those threads when work stops (`abort`), and makes
                  one runner per device (`runner`: the factory; engines/registry.py `build` calls it)
    Runner        one per device: `load` there, `stage` a batch's inputs onto the device, `infer` it, `release`
                  what its pages held, report `stats` on its buffers (RunnerStats) and `device_facts`, `close`;
                  an engine that `streams` also gives a `decoder()` and turns the pages it finishes into `output`
    Decoder       the iteration-level decoder of a streaming runner (pipeline/streaming.py drives it)
    Engine        one class playing both roles (every built-in engine): its front makes a new instance of the
                  class for each device (override `runner` to share what the front prepares into, e.g. a pool)

A page's way: prepare (front, decode thread) → stage → infer → release (the device's runner, on its thread);
with `stages`, `stage` runs for the next batch before `infer` runs this one, so that the copy overlaps compute.

Heavy imports (onnxruntime, torch, transformers) happen inside `load`, never at import time, so
`ocrbatch --help` stays instant.
"""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Hashable, Protocol, Sequence, Sized, runtime_checkable

from ..records import PageImage, PageOutput

if TYPE_CHECKING:  # EngineOptions only as a type: an engine's module imports this without the option table, which
    # imports the engines' plug-ins (engines/catalog.py) to learn their rows
    from ..config import EngineOptions
    from ..gpu.throughput import SlotFigures


@dataclass(frozen=True)
class Capabilities:
    """What an engine declares (Front.capabilities); the pipeline decides from it, not from the class."""

    uses_gpu: bool = False  # `--devices auto` gives it every visible GPU; `--max-batch auto` may grow its cap
    stages: bool = False  # `Runner.stage` starts a batch's copy to the device: the worker stages the next batch
    # while this one computes (without: it picks a batch only when the device is free, the latest priorities)
    streams: bool = False  # `Runner.decoder` gives a Decoder (with --schedule continuous) and `Runner.output`
    # turns the pages it finishes into outputs


@dataclass(frozen=True)
class RunnerStats:
    """A runner's figures on its buffers, for the infer worker's metrics (`Runner.stats`); the defaults are an
    engine that keeps none."""

    allocations: int | None = None  # buffers (tensors) created so far; None: the engine keeps no count
    copy_s: float = 0.0  # time spent copying inputs host → device
    filled: bool = True  # its buffers ran out once: from then on they only cycle (warm-up is over)
    slots: int | None = None  # host buffer slots made
    pinned: bool | None = None  # the host buffers are page-locked
    # An engine that manages a KV cache itself (vLLM): the share of it in use now, and the most seen, 0..1.
    kv_cache_usage: float | None = None
    kv_cache_peak: float | None = None
    # The share of the batch now in `infer` that is done (pages finished, lines read), 0..1; None: the engine does
    # not say. The live panel counts it, so that a CPU batch of several pages does not read 0% until it ends.
    batch_done: float | None = None


class BatchProgress:
    """How far an engine is into its batch, in units of its own (lines read, pages finished), counted from its
    threads and read from others (RunnerStats.batch_done). The share shown never goes back within a batch,
    even as more work becomes known (a page's lines, once it is detected)."""

    def __init__(self) -> None:
        import threading

        self._lock = threading.Lock()
        self._done = self._total = self._shown = 0.0
        self._running = False

    def begin(self, total: float) -> None:
        with self._lock:
            self._done, self._total, self._shown, self._running = 0.0, float(total), 0.0, True

    def more(self, units: float) -> None:
        """More work became known."""
        with self._lock:
            self._total += units

    def advance(self, units: float = 1.0) -> None:
        with self._lock:
            self._done += units

    def end(self) -> None:
        with self._lock:
            self._running = False

    def share(self) -> float | None:
        """0..1 while a batch runs; None between batches."""
        with self._lock:
            if not self._running:
                return None
            now = min(1.0, self._done / self._total) if self._total > 0 else 0.0
            self._shown = max(self._shown, now)
            return self._shown


@runtime_checkable
class Decoder(Protocol):
    """Iteration-level decoding on one device: pages join and leave the running rows between steps. Made by
    `Runner.decoder`, driven by pipeline/streaming.py; the generated record of a page is the runner's own, handed
    back to `Runner.output`."""

    figures: "SlotFigures"  # how decoding used its rows (tokens kept, row-steps, prefills)

    @property
    def waiting(self) -> Sized:
        """Pages added and not yet running."""

    @property
    def active(self) -> int:
        """Rows decoding now."""

    def add(self, pages: Sequence[PageImage]) -> None:
        """Prepared pages wait to join at the next step."""

    def step(self, rows: int) -> list[tuple[PageImage, Any, dict[str, Any]]]:
        """Let waiting pages join while fewer than `rows` run, decode one step; the pages that ended:
        (page, generated, info)."""

    def idle(self) -> bool:
        """Nothing running, prefilled or waiting."""

    def wanted(self, rows: int) -> int:
        """How many pages it would like waiting, at a cap of `rows`."""

    def pages(self) -> list[PageImage]:
        """Every page it holds (running, prefilled or waiting)."""

    def abandon(self) -> list[PageImage]:
        """Drop everything after an error; the pages it held, for another path (each still needs a result)."""


class Runner(abc.ABC):
    """One device's engine, made by its front (`Front.runner`)."""

    slots: "SlotFigures | None" = None  # figures on how its batches used their rows; None: it keeps none

    @abc.abstractmethod
    def load(self, device: str) -> None:
        """Get ready to run on `device` ("cpu", "cuda:0", ...); raise EngineLoadError if it cannot."""

    @abc.abstractmethod
    def infer(self, pages: Sequence[PageImage]) -> list[PageOutput | Exception]:
        """One output per page, in order. An exception in the list fails that page only; an exception
        raised fails the batch, which the worker then splits to find the page at fault (an out-of-memory
        error also lowers the batch-size cap: free what caches you hold before raising it)."""

    def stage(self, pages: Sequence[PageImage]) -> None:
        """Start copying prepared pages to the device, asynchronously if possible; `infer` waits for it.
        Called ahead of `infer` only when the engine declares `stages`."""

    def release(self, pages: Sequence[PageImage]) -> None:
        """The pages' batch is over (whatever its outcome): free their prepared inputs. Any runner may release
        any page its front prepared."""

    def stats(self) -> RunnerStats:
        """Figures on the runner's buffers for the worker's metrics (RunnerStats; its defaults when the engine
        keeps none)."""
        return RunnerStats()

    def device_facts(self) -> dict[str, Any]:
        """Facts about this device's run for the summary (device, dtype, pages retried...), once loaded. The
        summary joins the runners' texts that differ and adds their numbers."""
        return {}

    def close(self) -> None:
        """Release what `load` took."""

    def decoder(self) -> Decoder | None:
        """After `load`, for an engine that `streams`: a Decoder when the run schedules continuously; None: the
        worker runs whole batches through `infer`."""
        return None

    def output(self, page: PageImage, generated: Any, info: dict[str, Any]) -> PageOutput:
        """For an engine that `streams`: a page's output from what its Decoder generated for it."""
        raise NotImplementedError(f"{type(self).__name__} does not stream")

    def after_out_of_memory(self) -> None:
        """Called after an out-of-memory error, once the failed attempt's frames are freed and before the
        batch is retried in halves: free caches (e.g. torch.cuda.empty_cache)."""


class Front(abc.ABC):
    """What every device shares (one per converter)."""

    name: ClassVar[str]
    capabilities: ClassVar[Capabilities] = Capabilities()

    def __init__(self, options: EngineOptions) -> None:
        self.options = options

    @abc.abstractmethod
    def runner(self) -> Runner:
        """A new runner for one device (called once per device before any loads)."""

    def identity(self) -> str:
        """What must match for a rerun to reuse an earlier page (engine, model, prompt...)."""
        return self.name

    def describe(self) -> dict[str, Any]:
        """Facts for the run summary that hold for every device (engine, model, prompt...)."""
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

    def warm(self) -> None:
        """Do now the one-time work the first `prepare` would do (imports, the processor), before pages are taken:
        a Ray actor warms its front as it starts, so its cold start is not counted against --stall-timeout. May
        raise what `prepare` would; the caller leaves that to the first page."""

    def abort(self) -> None:
        """Work is stopping early: wake any thread blocked in `prepare` (it raises)."""


class Engine(Front, Runner):
    """An engine that plays both roles in one class (every built-in engine does). Used alone (tests, scripts), one
    instance is both; in the pipeline the front makes a new instance for each device."""

    def runner(self) -> "Engine":
        return type(self)(self.options)
