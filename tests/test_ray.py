"""Scale-out on a real Ray cluster, started here on this machine (no mocks; a few seconds to start)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from ocrbatch.config import EngineOptions, RunConfig
from ocrbatch.errors import EngineLoadError
from ocrbatch.pipeline.cluster import LOCAL_SYSTEM_CONFIG
from ocrbatch.pipeline.run import run

import engines
from conftest import draw_page, manifest, save_pdf

ray = pytest.importorskip("ray")
ray.cloudpickle.register_pickle_by_value(engines)  # the workers get the fault engines' code with the task


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
             _system_config=LOCAL_SYSTEM_CONFIG)  # as --ray local starts it
    yield
    ray.shutdown()


@pytest.fixture()
def docs(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    (root / "scans").mkdir(parents=True)
    draw_page("Invoice 2041\nTotal due 310.00", (700, 400)).save(root / "scans" / "invoice.png")
    draw_page("Minutes of the meeting\nheld on Monday", (700, 400)).save(root / "minutes.jpg")
    save_pdf(root / "report.pdf", [draw_page(f"Report page {n}\nNothing to add", (700, 400)) for n in (1, 2, 3)])
    (root / "broken.pdf").write_bytes(b"%PDF-1.4\n1 0 obj\n<<")
    return root


def _outputs(out: Path) -> dict[str, str]:
    return {p.relative_to(out).as_posix(): p.read_text() for p in sorted(out.rglob("*.md"))}


def test_a_run_on_ray_writes_what_a_local_run_writes(cluster, docs, tmp_path):
    local, remote = tmp_path / "local", tmp_path / "remote"
    run(RunConfig(inputs=(str(docs),), output=local))
    summary = run(RunConfig(inputs=(str(docs),), output=remote, ray="auto", ray_workers=2, max_batch=2))
    assert _outputs(remote) == _outputs(local)
    assert len(_outputs(remote)) == 5 and "Total due 310.00" in _outputs(remote)["scans/invoice.md"]
    assert summary.counts["ok"] == 5 and summary.counts["failed"] == 1 and summary.exit_code == 3
    assert summary.engine["ray_workers"] == 2
    records = {(Path(r["source"]).name, r["page"]): r for r in manifest(remote)}
    assert records[("broken.pdf", None)]["status"] == "failed"
    assert {records[("report.pdf", n)]["output"] for n in (1, 2, 3)} == {f"report/page-000{n}.md" for n in (1, 2, 3)}
    again = run(RunConfig(inputs=(str(docs),), output=remote, ray="auto"))
    assert again.counts["skipped"] == 5 and again.counts["ok"] == 0  # resume works as it does locally


def test_an_engine_that_cannot_load_on_the_cluster_stops_the_run_with_its_error(cluster, docs, tmp_path):
    config = RunConfig(inputs=(str(docs / "minutes.jpg"),), output=tmp_path / "out", engine="deepseek-ocr2",
                       engine_options=EngineOptions(model=str(tmp_path / "no-such-weights")), devices="cpu",
                       ray="auto")
    with pytest.raises(EngineLoadError, match="no-such-weights"):
        run(config)


def test_a_gpu_engine_on_a_cluster_without_gpus_is_an_engine_load_error(cluster, docs, tmp_path):
    config = RunConfig(inputs=(str(docs / "minutes.jpg"),), output=tmp_path / "out", engine="deepseek-ocr2",
                       engine_options=EngineOptions(model=str(tmp_path)), ray="auto")
    with pytest.raises(EngineLoadError, match="Ray cluster has none"):
        run(config)


@pytest.fixture()
def fault_engine(request, register_engine):
    return register_engine(request.param)


@pytest.mark.parametrize("fault_engine", [engines.CrashOnPage], indirect=True)
def test_a_page_that_makes_the_engine_raise_on_a_worker_fails_alone(cluster, docs, tmp_path, fault_engine):
    draw_page("this one explodes").save(docs / "poison.png")
    out = tmp_path / "out"
    summary = run(RunConfig(inputs=(str(docs),), output=out, engine=fault_engine, ray="auto", max_batch=8))
    records = {Path(r["source"]).name: r for r in manifest(out) if r["page"] in (None, 1)}
    assert records["poison.png"]["status"] == "failed" and "engine exploded" in records["poison.png"]["error"]
    assert summary.counts["ok"] == 5  # its batch-mates were split off and converted


@pytest.mark.parametrize("fault_engine", [engines.KillOnPage], indirect=True)
def test_a_page_that_kills_its_worker_fails_and_the_run_goes_on(cluster, docs, tmp_path, fault_engine):
    draw_page("this one kills the process").save(docs / "fatal.png")
    out = tmp_path / "out"
    summary = run(RunConfig(inputs=(str(docs),), output=out, engine=fault_engine, ray="auto", ray_workers=2,
                            max_batch=1))
    records = {Path(r["source"]).name: r for r in manifest(out) if r["page"] in (None, 1)}
    assert records["fatal.png"]["status"] == "failed" and "died" in records["fatal.png"]["error"]
    assert summary.counts["ok"] == 5 and summary.exit_code == 3


@pytest.mark.parametrize("fault_engine", [engines.SlowStart], indirect=True)
def test_an_actor_warms_its_engine_before_its_pages_count_against_the_stall_timeout(cluster, tmp_path,
                                                                                     fault_engine):
    """A fresh actor's one-time start (DeepSeek-OCR-2: importing transformers, its processor) took longer than
    --stall-timeout on a loaded machine, and the driver failed every page as stalled: the actor does it as it
    starts, before the driver sends pages."""
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(3):
        draw_page(f"Page {i}", (500, 400)).save(folder / f"p{i}.png")
    stall_s = engines.SlowStart.start_s / 2
    summary = run(RunConfig(inputs=(str(folder),), output=tmp_path / "out", engine=fault_engine, ray="auto",
                            ray_workers=1, stall_timeout=stall_s))
    assert summary.exit_code == 0 and summary.counts["ok"] == 3, summary.counts
    assert all(r["status"] == "ok" for r in manifest(tmp_path / "out"))


@pytest.mark.parametrize("fault_engine", [engines.SlowModel], indirect=True)
def test_an_actor_loads_its_model_first_and_streams_each_page_back_as_it_ends(cluster, tmp_path, fault_engine):
    """Neither an actor's model load nor a task's whole time counts against --stall-timeout, only the time
    between pages ending, as on a local run: the actor loads its engine before the driver sends it pages, and
    streams each page's result back as it ends (three pages of one task, in three batches: different shapes)."""
    folder = tmp_path / "in"
    folder.mkdir()
    for i, size in enumerate(((500, 400), (300, 900), (1200, 300))):
        draw_page(f"Page {i}", size).save(folder / f"p{i}.png")
    model = engines.SlowModel
    stall_s = model.load_s + 3  # below the load and the first batch together, and below the task's three batches
    assert stall_s < min(model.load_s + model.batch_s, 3 * model.batch_s)
    summary = run(RunConfig(inputs=(str(folder),), output=tmp_path / "out", engine=fault_engine, ray="auto",
                            ray_workers=1, max_batch=3, stall_timeout=stall_s))
    assert summary.exit_code == 0 and summary.counts["ok"] == 3, (summary.counts, summary.failures)
    assert summary.figures["batches"] == 1 and summary.engine["ray_workers"] == 1  # one task
    [actor] = summary.figures["infer_workers"]
    assert actor["batches"] == 3, actor  # its pages ended one batch after another

def test_workers_leave_text_layer_furniture_out_unless_kept(cluster, tmp_path):
    from test_layout_textlayer import report_with_furniture

    pdf = report_with_furniture(tmp_path / "in" / "report.pdf")
    for keep, out in ((False, tmp_path / "dropped"), (True, tmp_path / "kept")):
        summary = run(RunConfig.build((str(pdf),), out, engine="fake", ray="auto", keep_furniture=keep))
        assert summary.counts["ok"] == 2
        page = (out / "report" / "page-0002.md").read_text()
        assert "beta four ends" in page and ("Page 2 of 2" in page) is keep


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    if not hasattr(transformers, "DeepseekOcr2ForConditionalGeneration"):
        pytest.skip("transformers has no DeepSeek-OCR-2 model")
    from tiny_deepseek import build

    return build(tmp_path_factory.mktemp("ray-model") / "model")


def test_deepseek_ocr2_decoding_continuously_on_two_actors_writes_the_local_runs_markdown(cluster, tiny_model,
                                                                                           tmp_path):
    """The actors run the same infer worker as a local run (continuous decoding: rows joining and leaving)."""
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(5):
        draw_page(f"Page {i}\n" + "words " * (i + 1), size=(640, 480)).save(folder / f"page{i}.png")
    options = dict(engine="deepseek-ocr2", devices="cpu", model=str(tiny_model), schedule="continuous",
                   max_new_tokens=6, min_new_tokens=6, max_batch=2)
    local = run(RunConfig.build((str(folder),), tmp_path / "local", **options))
    remote = run(RunConfig.build((str(folder),), tmp_path / "remote", ray="auto", ray_workers=2, **options))
    assert _outputs(tmp_path / "remote") == _outputs(tmp_path / "local")
    assert len(_outputs(tmp_path / "local")) == 5 and remote.counts == local.counts
    assert remote.engine["ray_workers"] == 2
    tokens = {(Path(r["source"]).name, r.get("tokens")) for r in manifest(tmp_path / "remote")}
    assert tokens == {(Path(r["source"]).name, r.get("tokens")) for r in manifest(tmp_path / "local")}


def test_debug_layout_on_the_actors_writes_the_pictures_a_local_run_writes(cluster, docs, tmp_path):
    from test_layout_textlayer import report_with_furniture

    report_with_furniture(docs / "layered.pdf")  # text-layer pages: laid out while decoding
    pictures = {}
    for where, ray_options in (("local", {}), ("remote", {"ray": "auto", "ray_workers": 2})):
        summary = run(RunConfig.build((str(docs),), tmp_path / where, debug_layout=tmp_path / f"layout-{where}",
                                      **ray_options))
        assert summary.counts["ok"] == 7
        folder = tmp_path / f"layout-{where}"
        pictures[where] = {p.name: p.read_bytes() for p in sorted(folder.iterdir())}
    assert pictures["remote"] == pictures["local"]
    assert {"layered.pdf-page-0002.txt", "invoice.png-page-0001.png", "report.pdf-page-0003.txt"} <= set(pictures["local"])
    assert _outputs(tmp_path / "remote") == _outputs(tmp_path / "local")


def test_a_task_of_more_files_than_a_worker_keeps_on_its_disk_converts_every_page(cluster, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(20):
        draw_page(f"Note {i}", (300, 200)).save(folder / f"note{i:02d}.png")
    summary = run(RunConfig.build((str(folder),), tmp_path / "out", engine="fake", ray="auto", ray_workers=1,
                                  max_batch=20))
    assert summary.counts["ok"] == 20, summary.failures


def test_an_out_of_memory_error_in_a_decoding_step_on_an_actor_lowers_its_cap_and_loses_no_page(cluster, tiny_model,
                                                                                               tmp_path):
    """Only continuous decoding makes decoding steps (a static batch never does): the actor decodes continuously,
    recovers as a local device does (its pages through whole batches, the cap lowered) and reports its figures."""
    from engines.faults import Fault, faulty
    from ocrbatch.engines import registry
    from ocrbatch.engines.deepseek_ocr2.engine import DeepseekOcr2Engine

    cls = faulty(DeepseekOcr2Engine, Fault(at="step", nth=1, kind="oom"), name="ray-oom-step")
    registry.register(cls.name, cls)
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(4):
        draw_page(f"Page {i}", size=(640, 480)).save(folder / f"page{i}.png")
    try:
        summary = run(RunConfig.build((str(folder),), tmp_path / "out", engine=cls.name, devices="cpu",
                                      model=str(tiny_model), schedule="continuous", max_new_tokens=4,
                                      min_new_tokens=4, max_batch=4, ray="auto", ray_workers=1))
    finally:
        registry.unregister(cls.name)
    assert summary.counts["truncated"] == 4 and not summary.counts["failed"]  # every page at its token limit
    assert len(manifest(tmp_path / "out")) == 4
    [actor] = summary.figures["infer_workers"]
    assert actor["batch_cap"] < 4  # lowered by the out-of-memory error inside a decoding step


def test_a_poster_page_rendered_below_the_dpi_records_the_dpi_it_got_as_a_local_run_does(cluster, tmp_path):
    """A page too large for --dpi is rendered within the pixel budget on the actor: its record and page JSON carry
    the dpi it really got, as a local run's do (a reader turns pixels back into points with it)."""
    import json

    poster = tmp_path / "in" / "poster.pdf"
    poster.parent.mkdir()
    draw_page("A very large poster", (1000, 1000)).save(poster, resolution=5)  # 200 inches square
    pages = {}
    for where, ray_options in (("local", {}), ("remote", {"ray": "auto", "ray_workers": 1})):
        out = tmp_path / where
        summary = run(RunConfig.build((str(poster.parent),), out, engine="fake", formats="md,json", **ray_options))
        assert summary.counts["ok"] == 1
        (record,) = manifest(out)
        pages[where] = (record["info"], json.loads((out / record["output"]).with_suffix(".json").read_text()))
    (info, page), (local_info, local_page) = pages["remote"], pages["local"]
    assert info["dpi_capped"] and info["dpi"] == page["dpi"] < 150
    assert (info["dpi"], page["dpi"], page["width"], page["height"]) == \
        (local_info["dpi"], local_page["dpi"], local_page["width"], local_page["height"])


def test_the_workers_of_a_local_instance_compute_at_the_priority_of_the_run():
    """`--ray local`: Ray starts its workers at niceness 15, below everything else on the machine; the engine's
    actors then starved beside any busy process (the driver itself included) where a run without Ray does not."""
    import subprocess
    import sys

    probe = ("import os, ray\nfrom ocrbatch.pipeline import cluster\ncluster.connect('local')\n"
             "print(ray.get(ray.remote(num_cpus=0)(lambda: os.nice(0)).remote()), os.nice(0))\ncluster.shutdown()\n")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    worker, driver = map(int, r.stdout.split()[-2:])
    assert worker == driver
