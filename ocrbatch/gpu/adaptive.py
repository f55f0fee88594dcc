"""How many pages the next batch may hold: pure policy, no device code.

The cap starts at `--max-batch`. An out-of-memory error halves it (the batch that failed is split and
retried by the worker). While the device is less busy than `target_util` and has memory to spare, each
run of `patience` clean batches raises it again by a quarter, never past `--max-batch`.
"""

from __future__ import annotations

import threading


class BatchSizeController:
    def __init__(self, max_batch: int, target_util: float = 90.0, max_mem_frac: float = 0.85,
                 patience: int = 4) -> None:
        self.ceiling = max(1, max_batch)
        self.cap = self.ceiling
        self.target_util = target_util
        self.max_mem_frac = max_mem_frac
        self.patience = patience
        self.ooms = 0
        self._clean = 0
        self._lock = threading.Lock()

    def on_out_of_memory(self, batch_size: int) -> int:
        with self._lock:
            self.ooms += 1
            self._clean = 0
            self.cap = max(1, min(self.cap, max(1, batch_size // 2)))
            return self.cap

    def on_batch_done(self, batch_size: int, util_pct: float | None, mem_frac: float | None) -> int:
        """Called after a batch that fit; util and memory come from NVML (None when unknown)."""
        with self._lock:
            if self.cap >= self.ceiling:
                return self.cap
            # Without readings (CPU, no NVML) never grow back: a cap that once ran out stays safe.
            roomy = mem_frac is not None and mem_frac < self.max_mem_frac
            starved = util_pct is not None and util_pct < self.target_util
            if batch_size >= self.cap and roomy and starved:
                self._clean += 1
                if self._clean >= self.patience:
                    self._clean = 0
                    self.cap = min(self.ceiling, self.cap + max(1, self.cap // 4))
            return self.cap
