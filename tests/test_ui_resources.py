"""The resource sampler behind the panel: NVML figures per GPU when there are GPUs, CPU % and RSS always,
and any NVML failure read as "no GPU data". A stand-in pynvml module plays the driver."""

from __future__ import annotations

import sys
import types

import pytest

from ocrbatch.gpu.nvml import ResourceSampler
from ocrbatch.pipeline.stats import Stats, summary_dict

GIB = 2**30


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


def fake_pynvml(gpus=2, *, init_error=None, util_supported=True, fail_after_reads=None) -> types.ModuleType:
    nv = types.ModuleType("pynvml")
    nv.NVMLError = NVMLError
    nv.NVML_ERROR_NOT_SUPPORTED = 3
    reads = {"n": 0}

    def init():
        if init_error:
            raise NVMLError(init_error)

    def memory(h):
        reads["n"] += 1
        if fail_after_reads is not None and reads["n"] > fail_after_reads:
            raise NVMLError(15)  # GPU is lost
        return types.SimpleNamespace(used=(h + 1) * GIB, total=80 * GIB, free=0)

    def util(h):
        if not util_supported:
            raise NVMLError(nv.NVML_ERROR_NOT_SUPPORTED)
        return types.SimpleNamespace(gpu=40 + 10 * h, memory=0)

    nv.nvmlInit = init
    nv.nvmlShutdown = lambda: None
    nv.nvmlDeviceGetCount = lambda: gpus
    nv.nvmlDeviceGetHandleByIndex = lambda i: i
    nv.nvmlDeviceGetName = lambda h: f"Fake GPU {h}".encode()  # older pynvml returns bytes
    nv.nvmlDeviceGetUUID = lambda h: f"GPU-{h}{h}{h}-abcd"
    nv.nvmlDeviceGetMemoryInfo = memory
    nv.nvmlDeviceGetUtilizationRates = util
    nv.nvmlSystemGetDriverVersion = lambda: "570.1"
    return nv


@pytest.fixture
def nvml(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def install(**kw):
        monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(**kw))
    return install


def test_each_gpu_is_read_and_the_summary_gets_mean_util_and_peak_vram(nvml):
    nvml()
    sampler = ResourceSampler(interval=60)
    sampler.start()
    sampler.stop()
    res = sampler.latest()
    assert [(g.index, g.name, g.util_pct, g.mem_used) for g in res.gpus] == [
        (0, "Fake GPU 0", 40.0, GIB), (1, "Fake GPU 1", 50.0, 2 * GIB)]
    assert res.host is not None and res.host.rss and res.gpu_note is None
    snap = Stats().snapshot(pages_total=0, discovering=False, done={}, queue_depth={}, last_error=None,
                            resources=res)
    gpus = summary_dict(snap)["gpus"]
    assert gpus[1] == {"index": 1, "name": "Fake GPU 1", "util_mean_pct": 50.0, "vram_peak_mib": 2048,
                       "vram_total_mib": 80 * 1024}


@pytest.mark.parametrize("visible, expected", [("1", [1]), ("GPU-111", [1]), ("0,1", [0, 1]), ("", []),
                                               ("1,-1,0", [1])])
def test_only_the_gpus_cuda_may_use_are_shown(nvml, monkeypatch, visible, expected):
    nvml()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    sampler = ResourceSampler()
    sampler.sample()
    assert [g.index for g in sampler.latest().gpus] == expected


def test_no_driver_means_no_gpu_data_and_cpu_with_rss_instead(nvml):
    nvml(init_error=9)  # driver not loaded
    sampler = ResourceSampler()
    sampler.sample()
    res = sampler.latest()
    assert res.gpus == () and "NVML" in res.gpu_note
    assert res.host.rss > 0 and res.host.cores >= 1


def test_a_gpu_without_utilization_keeps_its_memory_figures(nvml):
    nvml(gpus=1, util_supported=False)  # e.g. a MIG slice
    sampler = ResourceSampler()
    sampler.sample()
    (gpu,) = sampler.latest().gpus
    assert gpu.util_pct is None and gpu.util_mean_pct is None and gpu.mem_used == GIB


def test_an_nvml_error_mid_run_stops_gpu_data_without_raising(nvml):
    nvml(gpus=1, fail_after_reads=2)
    sampler = ResourceSampler()
    sampler.sample()
    sampler.sample()
    assert len(sampler.latest().gpus) == 1
    sampler.sample()  # the GPU falls off the bus
    res = sampler.latest()
    assert res.gpus == () and "NVML" in res.gpu_note and res.host is not None
    sampler.sample()  # and stays quiet afterwards
    assert sampler.latest().gpus == ()
