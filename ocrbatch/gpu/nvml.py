"""GPU utilization and memory through NVML, sampled by a background thread, with this process's CPU % and
RSS beside them.

Any NVML failure (no driver, no library, a device lost mid-run) means "no GPU data" from then on, never an
exception in the run. `pynvml` is imported only when the sampler starts.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from .host import ProcessMeter


@dataclass(frozen=True)
class GpuReading:
    index: int  # NVML index
    name: str
    util_pct: float | None  # None: the device does not report it (e.g. a MIG slice)
    mem_used: int  # bytes, whole device (all processes)
    mem_total: int
    util_mean_pct: float | None  # over the samples so far
    mem_peak: int
    uuid: str = ""  # "GPU-…": how a torch device is matched to its reading (gpu/device.py)


@dataclass(frozen=True)
class HostReading:
    cpu_pct: float  # this process, 100 = one core busy
    rss: int | None  # bytes
    cpu_mean_pct: float  # since the sampler started
    rss_peak: int | None
    cores: int


@dataclass(frozen=True)
class ResourceSample:
    gpus: tuple[GpuReading, ...]
    host: HostReading | None
    gpu_note: str | None = None  # why there is no GPU data


class NvmlUnavailable(Exception):
    """NVML cannot be used (the message says why)."""


class Nvml:
    """Handles to the GPUs this process may use (CUDA_VISIBLE_DEVICES is honoured)."""

    def __init__(self) -> None:
        try:
            import pynvml
        except ImportError as exc:
            raise NvmlUnavailable("nvidia-ml-py is not installed") from exc
        self._nv = pynvml
        try:
            pynvml.nvmlInit()
        except Exception as exc:  # noqa: BLE001 - NVMLError, OSError: all mean "no GPU data"
            raise NvmlUnavailable(_reason(exc)) from exc
        try:
            self.devices = [(i, h, _text(pynvml.nvmlDeviceGetName(h)))
                            for i, h in self._visible(pynvml)]
            self.uuids = {i: self._uuid(h) for i, h, _ in self.devices}
        except Exception as exc:  # noqa: BLE001
            self.close()
            raise NvmlUnavailable(_reason(exc)) from exc

    @staticmethod
    def _visible(nv: Any) -> list[tuple[int, Any]]:
        handles = [(i, nv.nvmlDeviceGetHandleByIndex(i)) for i in range(nv.nvmlDeviceGetCount())]
        wanted = os.environ.get("CUDA_VISIBLE_DEVICES")
        if wanted is None:
            return handles
        chosen = []
        for item in (w.strip() for w in wanted.split(",")):
            if not item or item.startswith("-"):
                break  # CUDA stops at the first invalid entry
            for i, h in handles:
                if item == str(i) or (not item.isdigit() and _text(nv.nvmlDeviceGetUUID(h)).startswith(item)):
                    chosen.append((i, h))
                    break
            else:
                break
        return chosen

    def _uuid(self, handle: Any) -> str:
        try:
            return _text(self._nv.nvmlDeviceGetUUID(handle))
        except Exception:  # noqa: BLE001 - a reading without its UUID is still a reading
            return ""

    def driver_version(self) -> str:
        try:
            return _text(self._nv.nvmlSystemGetDriverVersion())
        except Exception as exc:  # noqa: BLE001
            raise NvmlUnavailable(_reason(exc)) from exc

    def read(self) -> list[tuple[int, str, float | None, int, int]]:
        """(index, name, util %, memory used, memory total) per device."""
        nv = self._nv
        out = []
        try:
            for index, handle, name in self.devices:
                mem = nv.nvmlDeviceGetMemoryInfo(handle)
                try:
                    util: float | None = float(nv.nvmlDeviceGetUtilizationRates(handle).gpu)
                except nv.NVMLError as exc:
                    if getattr(exc, "value", None) != nv.NVML_ERROR_NOT_SUPPORTED:
                        raise
                    util = None
                out.append((index, name, util, int(mem.used), int(mem.total)))
        except Exception as exc:  # noqa: BLE001
            raise NvmlUnavailable(_reason(exc)) from exc
        return out

    def close(self) -> None:
        try:
            self._nv.nvmlShutdown()
        except Exception:  # noqa: BLE001 - already gone
            pass


class ResourceSampler:
    """Samples GPUs and this process every `interval` seconds on its own thread; `latest()` never blocks."""

    def __init__(self, interval: float = 1.0) -> None:
        self.interval = interval
        self._latest: ResourceSample | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml: Nvml | None = None
        self._nvml_tried = False
        self._gpu_note: str | None = None
        self._gpu_agg: dict[int, list[float]] = {}  # index -> [util sum, util samples, mem peak]
        self._rss_peak: int | None = None
        self._started = time.monotonic()
        self._meter = ProcessMeter()
        self._cpu0 = os.times()
        self._sample_lock = threading.Lock()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="resource-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.sample()  # a last reading, so that even a short run has figures
        with self._sample_lock:
            if self._nvml is not None:
                self._nvml.close()
                self._nvml = None

    def latest(self) -> ResourceSample | None:
        return self._latest

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def sample(self) -> None:
        """Take one reading now (the thread calls this every `interval` seconds)."""
        with self._sample_lock:
            if not self._nvml_tried:
                self._nvml_tried = True
                try:
                    self._nvml = Nvml()
                except NvmlUnavailable as exc:
                    self._gpu_note = str(exc)
            gpus = self._read_gpus()
            cpu_pct, rss = self._meter.read()
            if rss is not None:
                self._rss_peak = max(rss, self._rss_peak or 0)
            wall = time.monotonic() - self._started
            t = os.times()
            cpu_s = (t.user + t.system) - (self._cpu0.user + self._cpu0.system)
            cpu_mean = 100.0 * cpu_s / wall if wall >= ProcessMeter.MIN_SPAN_S else cpu_pct
            host = HostReading(cpu_pct, rss, cpu_mean, self._rss_peak,
                               os.cpu_count() or 1)
            self._latest = ResourceSample(tuple(gpus), host, self._gpu_note)

    def _read_gpus(self) -> list[GpuReading]:
        if self._nvml is None:
            return []
        try:
            rows = self._nvml.read()
        except NvmlUnavailable as exc:
            self._gpu_note = str(exc)
            self._nvml.close()
            self._nvml = None
            return []
        readings = []
        for index, name, util, used, total in rows:
            agg = self._gpu_agg.setdefault(index, [0.0, 0, 0])
            if util is not None:
                agg[0] += util
                agg[1] += 1
            agg[2] = max(agg[2], used)
            readings.append(GpuReading(index, name, util, used, total,
                                       agg[0] / agg[1] if agg[1] else None, int(agg[2]),
                                       self._nvml.uuids.get(index, "")))
        return readings


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _reason(exc: BaseException) -> str:
    return f"NVML: {exc}" if str(exc) else f"NVML: {type(exc).__name__}"
