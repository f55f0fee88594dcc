"""/metrics: Prometheus text. The server's own counters and histograms, plus, read at scrape time, the
Converter's stats (queue depth per lane, batches, pages) and GPU readings where NVML has them."""

from __future__ import annotations

from typing import Any, Callable

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENCY_BUCKETS = (0.025, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 1.5, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)


class ServerMetrics:
    def __init__(self, stats: Callable[[], dict[str, Any]], slots: Any, guard: Any, active: Callable[[], int],
                 resources: Callable[[], Any] = lambda: None) -> None:
        """`slots`: the PageSlots (used, capacity, waiting); `guard`: the ConnectionGuard (open, limit);
        `active`: conversions in progress; all read at scrape time."""
        self.registry = CollectorRegistry()
        self.requests = Counter("ocrbatch_http_requests", "HTTP requests answered, by route and status code "
                                "(status 499: the client went away first).", ["route", "status"],
                                registry=self.registry)
        self.latency = Histogram("ocrbatch_http_request_duration_seconds",
                                 "Time to answer POST /v1/convert, by priority (whole response).", ["priority"],
                                 buckets=LATENCY_BUCKETS, registry=self.registry)
        self.pages = Counter("ocrbatch_http_pages", "Pages answered, by status (cancelled: the client left).",
                             ["status"], registry=self.registry)
        self.page_batch = Histogram("ocrbatch_page_batch_size", "Pages answered, by the size of the engine "
                                    "batch they ran in.", buckets=BATCH_BUCKETS, registry=self.registry)
        self.rejected = Counter("ocrbatch_http_rejected", "Requests refused before any work, by reason.",
                                ["reason"], registry=self.registry)
        self.cut = Counter("ocrbatch_http_cut", "Connections the server closed on a slow or surplus client, by "
                           "reason (header_timeout, body_timeout, connection_limit).", ["reason"],
                           registry=self.registry)
        self.registry.register(_ConverterCollector(stats, slots, guard, active, resources))

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _ConverterCollector:
    def __init__(self, stats, slots, guard, active, resources) -> None:
        self._stats, self._slots, self._guard, self._resources = stats, slots, guard, resources
        self._active = active

    def describe(self):
        return []  # read at scrape time only

    def collect(self):
        s = self._stats()
        yield _gauge("ocrbatch_ready", "1 once the engine is loaded on every device.", s["loaded"])
        depth = GaugeMetricFamily("ocrbatch_queue_depth", "Decoded pages waiting for the engine, per priority "
                                  "lane.", labels=["lane"])
        for lane, n in s["queued"].items():
            depth.add_metric([lane], n)
        yield depth
        yield _gauge("ocrbatch_pages_in_flight", "Pages submitted to the converter and not finished.",
                     s["in_flight"])
        slots, guard = self._slots, self._guard
        yield _gauge("ocrbatch_queue_used", "Page slots held for requests (by pages decoding, waiting or running, "
                     "and one by each admitted request whose next pages are not submitted yet); a request that "
                     "finds none free is answered 503.", slots.used)
        yield _gauge("ocrbatch_queue_capacity", "--max-queue: the most page slots held at once.", slots.capacity)
        yield _gauge("ocrbatch_queue_waiting", "Admitted requests waiting for a slot for their next pages (at most "
                     "--max-queue).", slots.waiting)
        yield _gauge("ocrbatch_http_requests_in_progress", "Conversions admitted and not yet answered to the end.",
                     self._active())
        yield _gauge("ocrbatch_http_connections", "Open HTTP connections.", guard.open)
        yield _gauge("ocrbatch_http_connections_limit", "--max-connections, as the open-file limit allows.",
                     guard.limit)
        batches = CounterMetricFamily("ocrbatch_engine_batches", "Engine batches run since the server started.")
        batches.add_metric([], s["batches"])
        yield batches
        pages = CounterMetricFamily("ocrbatch_engine_pages", "Pages the engine ran since the server started.")
        pages.add_metric([], s["pages"])
        yield pages
        yield _gauge("ocrbatch_batch_size_mean", "Mean pages per engine batch since the server started.",
                     s["mean_batch"])
        kv = [w for w in s["workers"] if w.get("kv_cache_pct") is not None]
        if kv:
            cache = GaugeMetricFamily("ocrbatch_kv_cache_usage_ratio", "Share of the engine's own KV cache in use "
                                      "(--backend vllm: vLLM's scheduler figure), per device.", labels=["device"])
            for w in kv:
                cache.add_metric([str(w["device"])], w["kv_cache_pct"] / 100)
            yield cache
        sample = self._resources()
        if sample is not None and sample.gpus:
            util = GaugeMetricFamily("ocrbatch_gpu_utilization_percent", "GPU utilization (NVML, whole device).",
                                     labels=["gpu", "name"])
            used_b = GaugeMetricFamily("ocrbatch_gpu_memory_used_bytes", "GPU memory in use (NVML, whole device).",
                                       labels=["gpu", "name"])
            total_b = GaugeMetricFamily("ocrbatch_gpu_memory_total_bytes", "GPU memory size.",
                                        labels=["gpu", "name"])
            for g in sample.gpus:
                lab = [str(g.index), g.name]
                if g.util_pct is not None:
                    util.add_metric(lab, g.util_pct)
                used_b.add_metric(lab, g.mem_used)
                total_b.add_metric(lab, g.mem_total)
            yield from (util, used_b, total_b)
        if sample is not None and sample.host is not None and sample.host.rss is not None:
            yield _gauge("ocrbatch_process_resident_memory_bytes", "Resident memory of the server.", sample.host.rss)


def _gauge(name: str, help_: str, value: float) -> GaugeMetricFamily:
    g = GaugeMetricFamily(name, help_)
    g.add_metric([], float(value))
    return g
