"""Live counters the stages update, and the immutable snapshots that readers (panel, log lines, metrics) pull.

The stages only add to counters under a lock held for a few instructions. Readers call `snapshot()` from
their own threads, on their own timers; the pipeline never waits on a reader.

"Now" figures (pages/s, busy %) cover the last RECENT_S seconds, stretched back (up to HISTORY_S) until
they include two mean batches, so that a slow engine finishing 8 pages at a time does not read as a saw.
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from ..errors import ExitCode, NoInputsError, OcrbatchError
from ..records import Status

if TYPE_CHECKING:
    from ..gpu.nvml import ResourceSample

STAGES = ("decode", "batch", "infer", "write")
Watch = Callable[[Callable[[], "Snapshot"]], None]  # called once with a function that returns a fresh Snapshot
RECENT_S = 20.0
HISTORY_S = 120.0
_SAMPLE_EVERY_S = 0.5


@dataclass(frozen=True)
class WorkerFigures:
    """One infer worker (one device), as pipeline/infer.py counts it."""

    device: str
    batches: int
    pages: int
    busy_s: float  # running batches: staging, the engine, handing results on
    wall_s: float  # since its first batch arrived (after the model loaded)
    compute_s: float  # inside the engine's infer
    copy_s: float  # host → device copies (on CUDA timed on the side stream, overlapping compute)
    cap: int | None  # the batch-size cap now (None: no controller)
    allocations: int | None  # buffer tensors created so far (None: the engine keeps no buffers)
    allocations_after_warmup: int | None  # of which after warm-up (pipeline/infer.py; None: not over yet)
    slot_efficiency: float | None = None  # useful tokens ÷ (rows × decoding steps); None: not counted
    tokens: int | None = None  # tokens generated that pages kept
    kv_cache: float | None = None  # share of the engine's own KV cache in use now (vLLM's figure); None: none
    kv_cache_peak: float | None = None  # the most of it in use so far
    running: int = 0  # pages in the batch in the engine now
    running_done: float = 0.0  # the share of that batch done, as the engine says (RunnerStats.batch_done)

    @property
    def mean_batch(self) -> float:
        return self.pages / self.batches if self.batches else 0.0

    @property
    def busy_frac(self) -> float:
        return min(1.0, self.busy_s / self.wall_s) if self.wall_s > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"device": self.device, "batches": self.batches, "pages": self.pages,
                "mean_batch": round(self.mean_batch, 2), "busy_pct": round(100 * self.busy_frac, 1),
                "wall_s": round(self.wall_s, 3),
                "compute_s": round(self.compute_s, 3), "copy_s": round(self.copy_s, 3),
                "batch_cap": None if self.cap is None else int(self.cap),  # a number, not BatchCap's repr
                "buffer_allocations": self.allocations,
                "buffer_allocations_after_warmup": self.allocations_after_warmup,
                "slot_efficiency": None if self.slot_efficiency is None else round(self.slot_efficiency, 4),
                "tokens": self.tokens,
                "kv_cache_pct": None if self.kv_cache is None else round(100 * self.kv_cache, 1),
                "kv_cache_peak_pct": None if self.kv_cache_peak is None else round(100 * self.kv_cache_peak, 1)}


@dataclass(frozen=True)
class Snapshot:
    elapsed_s: float
    pages_total: int  # pages discovered so far (skipped ones included)
    discovering: bool
    done: dict[str, int]  # by status
    queue_depth: dict[str, int]  # waiting in front of each stage (infer: batches; others: pages)
    busy_s: dict[str, float]  # summed over each stage's threads
    batches: int
    batch_pages: int
    last_batch: int
    last_error: str | None
    workers: dict[str, int] = field(default_factory=dict)  # threads per stage
    queue_max: dict[str, int] = field(default_factory=dict)
    rate_now: float = 0.0  # pages/s over the recent window
    busy_now: dict[str, float] = field(default_factory=dict)  # 0..1 per stage over the recent window
    resources: ResourceSample | None = None
    started_at: float = 0.0  # wall clock, seconds since the epoch
    infer_workers: tuple[WorkerFigures, ...] = ()
    partial: float = 0.0  # pages' worth of work done in the batches in the engines now (none of them finished)

    @property
    def finished(self) -> int:
        return sum(self.done.values())

    @property
    def progress(self) -> float:
        """Pages finished, and the share done of those in the engines now: moves within a batch."""
        return min(float(max(self.pages_total, self.finished)), self.finished + self.partial)

    @property
    def processed(self) -> int:
        """Pages this run worked on (everything but pages an earlier run had done)."""
        return self.finished - self.done.get("skipped", 0)

    @property
    def remaining(self) -> int:
        return max(0, self.pages_total - self.finished)

    @property
    def mean_batch(self) -> float:
        return self.batch_pages / self.batches if self.batches else 0.0

    @property
    def rate_avg(self) -> float:
        return self.processed / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the recent rate (before a page has finished, at the rate the batch in the engine goes);
        None while pages are still being found or no work is done."""
        if self.discovering:
            return None
        if self.remaining == 0:
            return 0.0
        rate = self.rate_now or self.rate_avg or (self.partial / self.elapsed_s if self.elapsed_s > 0 else 0.0)
        return max(0.0, self.pages_total - self.progress) / rate if rate > 0 else None

    @property
    def busy_avg(self) -> dict[str, float]:
        """0..1 per stage over the whole run."""
        wall = max(self.elapsed_s, 1e-9)
        return {s: min(1.0, self.busy_s.get(s, 0.0) / (wall * max(1, self.workers.get(s, 1)))) for s in STAGES}


@dataclass
class Stats:
    workers: dict[str, int] = field(default_factory=dict)  # threads per stage; 1 when not named
    started: float = field(default_factory=time.monotonic)
    started_at: float = field(default_factory=time.time)
    busy_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    batches: int = 0
    batch_pages: int = 0
    last_batch: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _history: collections.deque = field(default_factory=collections.deque)  # (t, processed, busy per stage)
    _inflight: dict[int, tuple[str, float]] = field(default_factory=dict)  # thread -> (stage, since)

    def __post_init__(self) -> None:
        self.workers = {s: max(1, self.workers.get(s, 1)) for s in STAGES}
        self._history.append((self.started, 0, (0.0,) * len(STAGES)))

    # -- called by the stages: a few instructions under the lock ---------------------------------
    def begin(self, stage: str) -> None:
        """The calling thread starts a long unit of work (a batch, a model load): "busy now" counts it while
        it runs. `add_busy` from the same thread ends it; a second `begin` books the time so far."""
        now, me = time.monotonic(), threading.get_ident()
        with self._lock:
            if me in self._inflight:
                earlier, since = self._inflight[me]
                self.busy_s[earlier] += now - since
            self._inflight[me] = (stage, now)

    def add_busy(self, stage: str, seconds: float) -> None:
        with self._lock:
            self._inflight.pop(threading.get_ident(), None)
            self.busy_s[stage] += seconds

    def add_batch(self, size: int) -> None:
        with self._lock:
            self.batches += 1
            self.batch_pages += size
            self.last_batch = size

    # -- called by readers ------------------------------------------------------------------------
    def snapshot(self, *, pages_total: int, discovering: bool, done: dict[str, int],
                 queue_depth: dict[str, int], last_error: str | None,
                 queue_max: dict[str, int] | None = None, resources: ResourceSample | None = None,
                 infer_workers: tuple[WorkerFigures, ...] = ()) -> Snapshot:
        done = dict(done)
        processed = sum(done.values()) - done.get("skipped", 0)
        with self._lock:
            now = time.monotonic()
            busy = dict(self.busy_s)
            for stage, since in self._inflight.values():
                busy[stage] += now - since
            batches, batch_pages, last_batch = self.batches, self.batch_pages, self.last_batch
            t0, p0, b0 = self._recent(now, processed, batch_pages / batches if batches else 1.0)
            self._remember(now, processed, busy)
        span = now - t0
        rate_now = (processed - p0) / span if span > 0 else 0.0
        busy_now = {s: min(1.0, max(0.0, (busy[s] - b0[i]) / (span * self.workers[s]))) if span > 0 else 0.0
                    for i, s in enumerate(STAGES)}
        partial = sum(w.running * min(1.0, max(0.0, w.running_done)) for w in infer_workers)
        return Snapshot(now - self.started, pages_total, discovering, done, dict(queue_depth), busy, batches,
                        batch_pages, last_batch, last_error, dict(self.workers), dict(queue_max or {}),
                        rate_now, busy_now, resources, self.started_at, tuple(infer_workers), partial)

    def _recent(self, now: float, processed: int, mean_batch: float) -> tuple[float, int, tuple[float, ...]]:
        """The newest remembered point at least RECENT_S old with two mean batches since; else the oldest."""
        want = 2 * max(1.0, mean_batch)
        for t, p, b in reversed(self._history):
            if now - t >= RECENT_S and processed - p >= want:
                return t, p, b
        return self._history[0]

    def _remember(self, now: float, processed: int, busy: dict[str, float]) -> None:
        hist = self._history
        if now - hist[-1][0] >= _SAMPLE_EVERY_S:
            hist.append((now, processed, tuple(busy[s] for s in STAGES)))
        while len(hist) > 1 and hist[1][0] <= now - HISTORY_S:
            hist.popleft()


def summary_dict(snap: Snapshot) -> dict[str, Any]:
    """The run's figures for the summary table and --json."""
    wall = max(snap.elapsed_s, 1e-9)
    figures: dict[str, Any] = {
        "wall_s": round(snap.elapsed_s, 3),
        "pages_per_s": round(snap.processed / wall, 3),
        "batches": snap.batches,
        "mean_batch": round(snap.mean_batch, 2),
        "stage_busy_pct": {s: round(100 * v, 1) for s, v in snap.busy_avg.items()},
    }
    if snap.infer_workers:
        figures["infer_workers"] = [w.as_dict() for w in snap.infer_workers]
    res = snap.resources
    if res is not None:
        figures["gpus"] = [{"index": g.index, "name": g.name,
                            "util_mean_pct": None if g.util_mean_pct is None else round(g.util_mean_pct, 1),
                            "vram_peak_mib": g.mem_peak // 2**20, "vram_total_mib": g.mem_total // 2**20}
                           for g in res.gpus]
        if res.host is not None:
            figures["cpu_mean_pct"] = round(res.host.cpu_mean_pct, 1)
            figures["rss_peak_mib"] = None if res.host.rss_peak is None else res.host.rss_peak // 2**20
    return figures


def run_snapshot(run: Any) -> Snapshot:
    """A run's progress now (pipeline/run.py's `_Run`: its queues, what discovery found, what the writer wrote,
    its executor's figures, local or Ray), for the progress view, `watch` and the summary."""
    queues, executor = {"decode": run.refs, "write": run.results}, run.executor
    total, discovering = run.found.pages + run.writer.file_failures, not run.refs.closed
    if discovering and run.counter.total is not None:  # counted ahead: the total is known
        total, discovering = max(total, run.counter.total), False
    return run.stats.snapshot(
        pages_total=total, discovering=discovering,
        done={s.value: n for s, n in run.writer.counts.items()}, last_error=run.writer.last_error,
        queue_depth={**{k: len(v) for k, v in queues.items()}, "batch": sum(executor.depth().values()), "infer": 0},
        queue_max={**{k: v.maxsize for k, v in queues.items()}, "batch": executor.limit, "infer": 1},
        resources=run.service.sampler.latest(), infer_workers=executor.figures())


def run_summary(run: Any) -> "Summary":
    """What a finished run (pipeline/run.py's `_Run`) reports; NoInputsError when it found nothing at all."""
    snap = run_snapshot(run)
    if not run.found.sources and not run.writer.counts[Status.FAILED] and run.stopping is None:
        raise NoInputsError(f"no PDF or image files found in {', '.join(run.config.inputs)}")
    return Summary(counts=snap.done, pages_total=snap.pages_total, sources=run.found.sources,
                   missing_inputs=list(run.found.missing_inputs), renamed=list(run.found.renamed),
                   engine=run.service.describe(), figures=summary_dict(snap),
                   output=str(run.out), failures=run.failures, stopped_by=run.stopping,
                   review_below=run.config.review_below, review=run.outputs.review_list())


@dataclass
class Summary:
    """What a finished run reports (the CLI's table and --json; Converter.convert's return value)."""

    counts: dict[str, int]
    pages_total: int
    sources: int
    missing_inputs: list[str]
    renamed: list[tuple[str, str]]
    engine: dict[str, Any]
    figures: dict[str, Any]
    output: str
    failures: list[str] = field(default_factory=list)
    stopped_by: OcrbatchError | None = None  # a signal or a write error ended the run early
    review_below: float | None = None  # --review-below
    review: list[dict[str, Any]] = field(default_factory=list)  # the pages under it, lowest score first

    @property
    def exit_code(self) -> ExitCode:
        if self.stopped_by is not None:
            return self.stopped_by.exit_code
        if self.counts["failed"] or self.counts["truncated"] or self.missing_inputs:
            return ExitCode.PARTIAL
        return ExitCode.OK

    def as_dict(self) -> dict[str, Any]:
        return {
            "exit_code": int(self.exit_code),
            "output": self.output,
            "sources": self.sources,
            "pages": self.pages_total,
            **{f"pages_{k}": v for k, v in self.counts.items()},
            **self.figures,
            "engine": self.engine,
            "missing_inputs": self.missing_inputs,
            "renamed": [{"source": s, "output": k} for s, k in self.renamed],
            "failures": self.failures,
            "stopped_by": str(self.stopped_by) if self.stopped_by is not None else None,
            "error": str(self.stopped_by) if self.stopped_by is not None else None,
            **({"review_below": self.review_below, "review": self.review} if self.review_below is not None else {}),
        }


def error_summary(exit_code: int, error: str, output: str | None = None) -> dict[str, Any]:
    """The --json summary of a run that ended before it had one (a usage error, no inputs, an engine that cannot
    load, a locked output...): the keys a summary has, nothing counted, and the error."""
    return {"exit_code": int(exit_code), "output": output, "sources": 0, "pages": 0,
            **{f"pages_{s.value}": 0 for s in Status}, "missing_inputs": [], "renamed": [], "failures": [],
            "stopped_by": None, "error": error}
