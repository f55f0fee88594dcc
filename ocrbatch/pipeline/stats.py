"""Live counters the stages update and the UI reads as a snapshot. The pipeline never waits on a reader."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

STAGES = ("decode", "batch", "infer", "write")


@dataclass(frozen=True)
class Snapshot:
    elapsed_s: float
    pages_total: int  # pages discovered so far
    discovering: bool
    done: dict[str, int]  # by status
    queue_depth: dict[str, int]  # waiting in front of each stage
    busy_s: dict[str, float]  # summed over each stage's threads
    batches: int
    batch_pages: int
    last_batch: int
    last_error: str | None

    @property
    def finished(self) -> int:
        return sum(self.done.values())

    @property
    def processed(self) -> int:
        return self.finished - self.done.get("skipped", 0)

    @property
    def mean_batch(self) -> float:
        return self.batch_pages / self.batches if self.batches else 0.0


@dataclass
class Stats:
    started: float = field(default_factory=time.monotonic)
    busy_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    batches: int = 0
    batch_pages: int = 0
    last_batch: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add_busy(self, stage: str, seconds: float) -> None:
        with self._lock:
            self.busy_s[stage] += seconds

    def add_batch(self, size: int) -> None:
        with self._lock:
            self.batches += 1
            self.batch_pages += size
            self.last_batch = size

    def snapshot(self, *, pages_total: int, discovering: bool, done: dict[str, int],
                 queue_depth: dict[str, int], last_error: str | None) -> Snapshot:
        with self._lock:
            return Snapshot(time.monotonic() - self.started, pages_total, discovering, dict(done),
                            dict(queue_depth), dict(self.busy_s), self.batches, self.batch_pages,
                            self.last_batch, last_error)


def summary_dict(snap: Snapshot, workers: dict[str, int]) -> dict[str, Any]:
    wall = max(snap.elapsed_s, 1e-9)
    return {
        "wall_s": round(snap.elapsed_s, 3),
        "pages_per_s": round(snap.processed / wall, 3),
        "batches": snap.batches,
        "mean_batch": round(snap.mean_batch, 2),
        "stage_busy_pct": {s: round(100 * snap.busy_s[s] / (wall * max(1, workers.get(s, 1))), 1)
                           for s in STAGES},
    }
