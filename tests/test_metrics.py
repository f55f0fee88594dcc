"""--metrics-file: Prometheus text that node_exporter's textfile collector (and prometheus_client) can read."""

from __future__ import annotations

import stat

import pytest
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from conftest import draw_page
from engines import NoLoadEngine
from ocrbatch.cli import app
from ocrbatch.errors import UsageError
from ocrbatch.gpu.nvml import GpuReading, ResourceSample
from ocrbatch.metrics import MetricsFile, render
from test_ui_panel import fake_snapshot


def parse(text: str) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_a_running_snapshot_parses_with_pages_rates_and_gpu():
    m = parse(render(fake_snapshot(), exit_code=None, last_success=None))
    assert m[("ocrbatch_running", ())] == 1
    assert ("ocrbatch_exit_code", ()) not in m and ("ocrbatch_last_success_timestamp_seconds", ()) not in m
    assert m[("ocrbatch_pages", (("status", "ok"),))] == 1230
    assert m[("ocrbatch_pages", (("status", "failed"),))] == 4
    assert m[("ocrbatch_pages_discovered", ())] == 10_000
    assert m[("ocrbatch_pages_per_second", (("window", "recent"),))] == pytest.approx(2.31)
    gpu = (("gpu", "0"), ("name", "NVIDIA H200"))
    assert m[("ocrbatch_gpu_utilization_percent", gpu)] == 95
    assert m[("ocrbatch_gpu_memory_used_bytes", gpu)] == 30 * 2**30
    assert m[("ocrbatch_stage_queue_depth", (("stage", "decode"),))] == 12
    assert m[("ocrbatch_run_start_timestamp_seconds", ())] == 1_700_000_000


def test_label_values_are_escaped():
    odd = 'GPU "x" \\ y'
    res = ResourceSample(gpus=(GpuReading(1, odd, None, 1, 2, None, 1),), host=None)
    m = parse(render(fake_snapshot(resources=res), exit_code=None, last_success=None))
    assert m[("ocrbatch_gpu_memory_total_bytes", (("gpu", "1"), ("name", odd)))] == 2
    assert not [k for k in m if k[0] == "ocrbatch_gpu_utilization_percent"]  # not reported: left out


def test_file_is_replaced_readable_and_keeps_the_last_success_across_a_failed_run(tmp_path):
    path = tmp_path / "ocrbatch.prom"
    MetricsFile(path).write(fake_snapshot(), exit_code=0)
    first = parse(path.read_text())[("ocrbatch_last_success_timestamp_seconds", ())]
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # the collector runs as another user

    later = MetricsFile(path)
    later.write(fake_snapshot())
    assert parse(path.read_text())[("ocrbatch_running", ())] == 1
    later.write(fake_snapshot(), exit_code=3)
    m = parse(path.read_text())
    assert m[("ocrbatch_exit_code", ())] == 3 and m[("ocrbatch_running", ())] == 0
    assert m[("ocrbatch_last_success_timestamp_seconds", ())] == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ocrbatch.prom"]


def test_a_missing_folder_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError):
        MetricsFile(tmp_path / "no" / "m.prom")


def test_a_run_that_cannot_load_its_engine_still_records_its_exit_code(tmp_path, register_engine):
    draw_page("x").save(tmp_path / "x.png")
    prom = tmp_path / "m.prom"
    r = CliRunner().invoke(app, ["convert", str(tmp_path / "x.png"), "-o", str(tmp_path / "o"),
                                 "--engine", register_engine(NoLoadEngine), "--metrics-file", str(prom), "-q"])
    assert r.exit_code == 5
    m = parse(prom.read_text())
    assert m[("ocrbatch_exit_code", ())] == 5 and m[("ocrbatch_running", ())] == 0
