"""The engine contract (engines/base.py): capabilities declared, not detected; a front that makes one runner per
device and is none of them; the devices' facts merged for the summary."""

from __future__ import annotations

import threading
import time

import pytest

import engines as test_engines
from conftest import draw_page
from ocrbatch.config import EngineOptions
from ocrbatch.engines import registry
from ocrbatch.engines.base import Capabilities, Engine, Front, Runner
from ocrbatch.pipeline.service import merge_facts

BUILTIN = ("rapidocr", "deepseek-ocr2", "fake", "fake-timed")


def every_engine() -> list[type[Front]]:
    found = [registry.engine_class(name) for name in BUILTIN]
    found += [c for c in vars(test_engines).values()
              if isinstance(c, type) and issubclass(c, Front) and c is not Engine]
    return found


@pytest.mark.parametrize("cls", every_engine(), ids=lambda c: c.name)
def test_every_engine_declares_the_capabilities_it_implements(cls):
    caps = cls.capabilities
    assert isinstance(caps, Capabilities) and isinstance(cls.name, str)
    assert caps.stages == (cls.stage is not Runner.stage), "stage overridden ⇔ stages declared"
    assert caps.streams == (cls.decoder is not Runner.decoder) == (cls.output is not Runner.output)
    if caps.streams:
        assert caps.uses_gpu  # continuous decoding is the GPU engine's path


def test_the_front_makes_one_runner_per_device_and_is_none_of_them():
    front, runners = registry.build("fake", EngineOptions(), 3)
    assert len(runners) == 3 and len({id(r) for r in runners} | {id(front)}) == 4
    assert all(r.options is front.options for r in runners)


def test_deepseek_runners_free_and_report_on_what_their_front_prepared(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    front, runners = registry.build("deepseek-ocr2", EngineOptions(model=str(tmp_path)), 2)
    assert all(r._shared is front._shared for r in runners) and front not in runners


def test_the_devices_facts_are_merged_for_the_summary():
    per_device = [{"device": "cuda:0", "dtype": "bfloat16", "pages_retried": 1},
                  {"device": "cuda:1", "dtype": "bfloat16", "pages_retried": 2}]
    assert merge_facts(per_device) == {"device": "cuda:0, cuda:1", "dtype": "bfloat16", "pages_retried": 3}
    assert merge_facts([]) == {}


class GatedStaging(test_engines.StagingRecorder):
    """Records stage/infer/release (StagingRecorder); its load waits for `go`, so pages can queue up first."""

    name = "gated-staging"
    loading = threading.Event()
    go = threading.Event()

    def load(self, device: str) -> None:
        type(self).loading.set()
        type(self).go.wait(60)
        super().load(device)


class GatedNoStaging(GatedStaging):
    """The same engine, declaring that it does not stage: its `stage` is never called ahead."""

    name = "gated-no-staging"
    capabilities = Capabilities()


def until(check, what: str, deadline_s: float = 60.0) -> None:
    end = time.monotonic() + deadline_s
    while not check():
        assert time.monotonic() < end, f"gave up waiting for {what}"
        time.sleep(0.01)


@pytest.mark.parametrize("cls, calls", [
    (GatedStaging, ["stage p0", "stage p1", "infer p0", "release p0", "stage p2", "infer p1", "release p1",
                    "infer p2", "release p2"]),
    (GatedNoStaging, ["stage p0", "infer p0", "release p0", "stage p1", "infer p1", "release p1", "stage p2",
                      "infer p2", "release p2"]),
], ids=["stages", "does-not-stage"])
def test_the_worker_stages_the_next_batch_ahead_only_for_an_engine_that_declares_it(cls, calls, tmp_path,
                                                                                   register_engine):
    from ocrbatch import Converter

    for i in range(3):
        draw_page(f"page {i}", size=(200, 260)).save(tmp_path / f"p{i}.png")
    cls.calls, cls.loading, cls.go = [], threading.Event(), threading.Event()
    with Converter(engine=register_engine(cls), max_batch=1, max_wait_ms=0, workers=2) as conv:
        futures = [conv.submit(tmp_path / "p0.png")]
        until(cls.loading.is_set, "the first batch to load the engine")
        futures += [conv.submit(tmp_path / f"p{i}.png") for i in (1, 2)]
        until(lambda: conv.stats()["queued"]["interactive"] == 2, "two pages waiting")
        cls.go.set()
        assert [f.result(timeout=60).status.value for f in futures] == ["ok"] * 3
    assert cls.calls == calls
