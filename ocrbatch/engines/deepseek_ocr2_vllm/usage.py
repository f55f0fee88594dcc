"""vLLM's own KV-cache figures, as its scheduler reports them after every step.

vLLM hands each step's scheduler statistics to the stat loggers the engine was built with (its documented
extension point, `vllm.v1.metrics.loggers.StatLoggerBase`). One of ours keeps the share of KV-cache blocks in
use now and the most seen, which the panel, the summary and `--json` show beside NVML's memory figures: NVML
sees the memory vLLM reserved for the cache (all of it, from the start); this says how much of it the pages
being decoded fill.
"""

from __future__ import annotations

import threading
from typing import Any, Callable


class CacheUsage:
    """The latest and the highest KV-cache usage (0..1) vLLM reported; None until its first step."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.now: float | None = None
        self.peak: float | None = None

    def record(self, usage: float) -> None:
        with self._lock:
            self.now = usage
            self.peak = usage if self.peak is None else max(self.peak, usage)

    def figures(self) -> dict[str, float]:
        with self._lock:
            if self.now is None or self.peak is None:
                return {}
            return {"kv_cache_usage": self.now, "kv_cache_peak": self.peak}


def stat_logger(usage: CacheUsage) -> Callable[[Any, int], Any]:
    """A factory for vLLM's `stat_loggers=`: a per-engine logger feeding `usage` (vLLM imported here)."""
    from vllm.v1.metrics.loggers import StatLoggerBase

    class _KvCacheLogger(StatLoggerBase):
        def __init__(self, vllm_config: Any, engine_index: int = 0) -> None:
            pass

        def record(self, scheduler_stats: Any, iteration_stats: Any, mm_cache_stats: Any = None,
                   engine_idx: int = 0) -> None:
            if scheduler_stats is not None:
                usage.record(float(scheduler_stats.kv_cache_usage))

        def log_engine_initialized(self) -> None:
            pass

    return lambda vllm_config, engine_index=0: _KvCacheLogger(vllm_config, engine_index)
