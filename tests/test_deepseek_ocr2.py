"""The deepseek-ocr2 engine end to end, with a tiny random checkpoint these tests build and save, then load
through the same `from_pretrained(folder)` path real weights take. Nothing is downloaded; no GPU is used.

A random model writes noise: these tests check what the engine does with pages (batching, padding, the
token limit, files, manifest), never what the text says.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path, PurePosixPath
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "DeepseekOcr2ForConditionalGeneration"):
    pytest.skip("transformers has no DeepSeek-OCR-2 model", allow_module_level=True)

from typer.testing import CliRunner  # noqa: E402

from conftest import SHARED, draw_page, manifest, save_pdf  # noqa: E402
from ocrbatch.cli import app  # noqa: E402
from ocrbatch.config import EngineOptions  # noqa: E402
from ocrbatch.engines.deepseek_ocr2.inputs import batch_inputs  # noqa: E402
from ocrbatch.engines.deepseek_ocr2.common import Generated, choose_dtype, rgb  # noqa: E402
from ocrbatch.engines.deepseek_ocr2.engine import DeepseekOcr2Engine  # noqa: E402
from ocrbatch.pipeline.infer import WARMUP_BATCHES, InferWorker  # noqa: E402
from ocrbatch.records import Batch, Kind, PageImage, PageRef, Source  # noqa: E402
from tiny_deepseek import build  # noqa: E402

DEV_PAGES = SHARED / "bench" / "dev" / "pages"
# Real scans with 2, 2, 3 and 3 crops: two pairs the batcher can put together.
DEV_PICK = ["sroie-123.jpg", "sroie-176.jpg", "sroie-170.jpg", "sroie-243.jpg"]
# Generated pages with 0, 2, 3 and 6 crops (prompts of 291, 579, 723 and 1155 tokens).
SIZES = [(700, 500), (1400, 700), (1500, 500), (620, 877)]


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """Two tiny checkpoints: an ordinary random one, and one that never emits its end token."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the tiny model gains nothing from more, and CI machines are shared
    root = tmp_path_factory.mktemp("tiny-deepseek")
    yield SimpleNamespace(model=build(root / "model"), never_ends=build(root / "never-ends", never_ends=True))
    torch.set_num_threads(threads)


def generated_pages(folder: Path, sizes=SIZES) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, size in enumerate(sizes):
        path = folder / f"page{i}.png"
        draw_page(f"Page {i}\nsize {size[0]}x{size[1]}\n" + "lorem ipsum " * (i + 1), size=size).save(path)
        paths.append(path)
    return paths


def page_image(path: Path) -> PageImage:
    from PIL import Image

    image = Image.open(path).convert("RGB")
    source = Source(path=path, display=path.name, kind=Kind.PNG, out_key=PurePosixPath(path.stem), size=0,
                    mtime_ns=0, page_count=1, multipage=False)
    return PageImage(ref=PageRef(source, 1), image=image)


def convert(*args) -> SimpleNamespace:
    r = CliRunner().invoke(app, ["convert", *map(str, args), "--engine", "deepseek-ocr2", "--json", "--no-progress"])
    summary = json.loads(r.stdout[r.stdout.index("{"):]) if "{" in r.stdout else None
    return SimpleNamespace(code=r.exit_code, stderr=r.stderr, summary=summary, exception=r.exception)


def test_real_pages_convert_the_same_with_max_batch_1_and_4(tiny, tmp_path):
    if DEV_PAGES.is_dir():
        inputs = [DEV_PAGES / name for name in DEV_PICK]
    else:  # the same crop counts, drawn here
        inputs = generated_pages(tmp_path / "in", [(932, 1973), (932, 2132), (932, 2253), (684, 1674)])
    one, four = tmp_path / "b1", tmp_path / "b4"
    r1 = convert(*inputs, "-o", one, "--model", tiny.model, "--max-new-tokens", 8, "--max-batch", 1)
    r4 = convert(*inputs, "-o", four, "--model", tiny.model, "--max-new-tokens", 8, "--max-batch", 4,
                 "--max-wait-ms", 5000, "--schedule", "static")
    rc = convert(*inputs, "-o", tmp_path / "cont", "--model", tiny.model, "--max-new-tokens", 8, "--max-batch", 4)
    for r in (r1, r4, rc):
        assert r.code in (0, 3), (r.stderr, r.exception)  # 3: some page ran into the token limit
        assert r.summary["pages_ok"] + r.summary["pages_truncated"] == len(inputs)
        assert r.summary["exit_code"] == (3 if r.summary["pages_truncated"] else 0)
        engine = r.summary["engine"]
        assert (engine["device"], engine["dtype"], engine["attention"]) == ("cpu", "float32", "sdpa")
    recs = {Path(rec["source"]).name: rec for rec in manifest(four)}
    assert set(recs) == {p.name for p in inputs}
    assert all(rec["status"] in ("ok", "truncated") for rec in recs.values())
    # Pages with equal crop counts travelled together; each page's Markdown is the same either way.
    assert [recs[p.name]["timings"]["batch_size"] for p in inputs] == [2, 2, 2, 2]
    assert [recs[p.name]["info"]["crops"] for p in inputs] == [2, 2, 3, 3]
    for rec in recs.values():  # the model's own certainty of the tokens it chose (a random model: little)
        conf = rec["info"]["confidence"]
        assert conf["method"] == "tokens" and conf["tokens"] == rec["info"]["tokens"]
        assert conf["min_logprob"] <= conf["mean_logprob"] < 0 and 0 < conf["score"] < 0.5
    for rec in recs.values():
        assert (one / rec["output"]).read_bytes() == (four / rec["output"]).read_bytes()
        assert (one / rec["output"]).read_bytes() == (tmp_path / "cont" / rec["output"]).read_bytes()
    assert {rec["status"] for rec in manifest(one)} == {rec["status"] for rec in recs.values()}


def test_pages_of_different_sizes_in_one_batch_equal_each_page_alone(tiny, tmp_path):
    engine = DeepseekOcr2Engine(EngineOptions(model=str(tiny.model), max_new_tokens=8))
    pages = [page_image(p) for p in generated_pages(tmp_path)]
    assert [engine.bucket_key(p) for p in pages] == [0, 2, 3, 6]
    engine.load("cpu")
    try:
        together = engine.infer(pages)
        alone = [engine.infer([p])[0] for p in pages]
    finally:
        engine.close()
    for a, b in zip(together, alone):
        assert (a.markdown, a.status) == (b.markdown, b.status)
        ca, cb = a.info.pop("confidence"), b.info.pop("confidence")
        assert a.info == b.info
        assert (ca["method"], ca["tokens"], ca["guard_fired"]) == ("tokens", a.info["tokens"], cb["guard_fired"])
        assert ca["mean_logprob"] == pytest.approx(cb["mean_logprob"], abs=1e-3)
    assert [o.info["crops"] for o in together] == [0, 2, 3, 6]
    assert len({o.markdown for o in together}) > 1  # pages got their own outputs, not one shared answer


def test_inputs_prepared_on_decode_threads_equal_the_processors(tiny, tmp_path):
    """The tiles written into pool slots and the prompts padded by the engine are, value for value, what
    transformers' processor makes of the same pages in one batch: outputs stay byte-identical."""
    sizes = SIZES + [(769, 769), (768, 1000), (2000, 300), (10, 20)]
    pages = [page_image(p) for p in generated_pages(tmp_path, sizes)]
    pages[1] = PageImage(ref=pages[1].ref, image=pages[1].image.convert("L"))  # a grey page
    engine = DeepseekOcr2Engine(EngineOptions(model=str(tiny.model), max_new_tokens=1))
    engine.load("cpu")
    try:
        expected = engine.processor(images=[rgb(p.image) for p in pages], text=[engine.prompt] * len(pages),
                                    return_tensors="pt", padding=True)
        for exact in (True, False):  # our own tiling and tables; the processor's output copied into the slots
            prepared = [engine.prepare(p) for p in pages]
            assert engine._prep.exact is exact
            engine.stage(prepared)
            got = batch_inputs([p.prepared for p in prepared], engine._prompt_pad_id, "cpu", torch.float32)
            assert sorted(got) == sorted(expected)
            for key, value in expected.items():
                assert torch.equal(got[key], value), key
            engine.release(prepared)
            engine._prep = type(engine._prep)(engine.processor, engine.prompt, engine.tiling, 8, pin=False, exact=False)
    finally:
        engine.close()
    assert engine._prep.pool.in_use() == 0


def test_the_engine_path_through_the_worker_allocates_nothing_after_warm_up(tiny, tmp_path):
    """Pages prepared into pool slots, staged (the next batch before this one runs), inferred and released by
    the infer worker, batch after batch: buffers are made during the first batches only."""
    draw_page("two crops", size=(1400, 700)).save(tmp_path / "page.png")
    page = page_image(tmp_path / "page.png")
    engine = DeepseekOcr2Engine(EngineOptions(model=str(tiny.model), max_new_tokens=1, min_new_tokens=1,
                                              buffer_pages=4, schedule="static"))
    engine.load("cpu")
    batches, results, seen = 24, [], []

    def take(block: bool):  # the decode side, inline: prepare the next batch when the worker asks for it
        if len(seen) == batches:
            return None
        seen.append(engine.stats().allocations)
        return Batch((engine.prepare(page),))

    worker = InferWorker(engine, results.append)
    try:
        worker.run(take, busy=lambda s: None)
    finally:
        engine.close()
    figures = worker.figures()
    assert len(results) == batches and {r.status.value for r in results} == {"truncated"}  # fixed length
    assert figures.batches == batches and figures.allocations_after_warmup == 0
    # The pool's 4 pages' worth of slots, made at once (4 global + 4 × 6 crop), and 2 sets × 2 device buffers.
    assert figures.allocations == 32 and seen[WARMUP_BATCHES + 1:] == [32] * (batches - WARMUP_BATCHES - 1)
    assert engine.stats().slots == 28 and engine._prep.pool.in_use() == 0  # every slot came back
    assert engine._prep.pool.dtype == torch.uint8  # 8-bit pixels in the host slots, normalised on the device



def test_a_page_that_never_ends_is_retried_then_written_as_truncated(tiny, tmp_path):
    inputs = generated_pages(tmp_path / "in", SIZES[:2])
    out = tmp_path / "out"
    r = convert(*inputs, "-o", out, "--model", tiny.never_ends, "--max-new-tokens", 6)
    assert r.code == 3, (r.stderr, r.exception)  # partial: truncated pages are counted
    assert r.summary["pages_truncated"] == 2 and r.summary["pages_failed"] == 0
    assert r.summary["engine"]["pages_retried"] == 2
    recs = manifest(out)
    assert [rec["status"] for rec in recs] == ["truncated", "truncated"]
    for rec in recs:
        assert rec["info"]["retried"] is True and rec["info"]["tokens"] == 6
        assert (out / rec["output"]).is_file()  # written, not dropped
    assert r.stderr.count("truncated at the token limit") == 2


def test_figures_the_model_marks_are_cropped_beside_the_page(tiny, tmp_path, monkeypatch):
    said = ("<|ref|>title<|/ref|><|det|>[[50, 20, 950, 80]]<|/det|>\n# Page one\n\n"
            "<|ref|>image<|/ref|><|det|>[[0, 0, 499, 499]]<|/det|>\n"
            "<|ref|>text<|/ref|><|det|>[[50, 600, 950, 700]]<|/det|>\nBody text.")

    def fixed_output(self, pages, guard):  # stands in for generation: what a real checkpoint would write
        ids = self.processor.tokenizer.encode(said, add_special_tokens=False)
        return [Generated(ids, ended=True) for _ in pages]

    monkeypatch.setattr(DeepseekOcr2Engine, "_generate", fixed_output)
    pdf = save_pdf(tmp_path / "in" / "doc.pdf", [draw_page("one", size=(600, 800))])
    out = tmp_path / "out"
    r = convert(pdf, "-o", out, "--model", tiny.model, "--schedule", "static")  # the path through _generate
    assert r.code == 0, (r.stderr, r.exception)
    assert (out / "doc" / "page-0001.md").read_text() == "# Page one\n\n![](images/page-0001-1.png)\n\nBody text.\n"
    figure = out / "doc" / "images" / "page-0001-1.png"
    assert figure.read_bytes().startswith(b"\x89PNG")
    assert manifest(out)[0]["info"]["figures"] == 1


@pytest.mark.parametrize("case", ["no-model", "missing-folder", "offline-id", "not-deepseek", "missing-weights",
                                  "bad-prompt"])
def test_bad_setups_fail_with_one_clear_line(case, tiny, tmp_path, monkeypatch):
    page = generated_pages(tmp_path / "in", SIZES[:1])[0]
    args = [page, "-o", tmp_path / "out"]
    if case == "no-model":
        code, words = 2, ["needs --model"]
    elif case == "missing-folder":
        args += ["--model", tmp_path / "nowhere"]
        code, words = 5, ["no such model folder", str(tmp_path / "nowhere")]
    elif case == "offline-id":
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
        monkeypatch.delenv("HF_HUB_CACHE", raising=False)
        args += ["--model", "someone/absent-model"]
        code, words = 5, ["'someone/absent-model'", str(tmp_path / "hf" / "hub"), "HF_HUB_OFFLINE"]
    elif case == "not-deepseek":
        folder = tmp_path / "gpt2"
        folder.mkdir()
        (folder / "config.json").write_text('{"model_type": "gpt2"}')
        args += ["--model", folder]
        code, words = 5, ["not a DeepSeek-OCR-2 checkpoint", "'gpt2'"]
    elif case == "missing-weights":
        from safetensors.torch import load_file, save_file

        folder = tmp_path / "partial"
        shutil.copytree(tiny.model, folder)
        weights = load_file(folder / "model.safetensors")
        del weights["lm_head.weight"]
        save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
        args += ["--model", folder]
        code, words = 5, ["lacks 1 of the model's weights", "lm_head.weight"]
    else:
        args += ["--model", tmp_path, "--prompt", "Read this."]
        code, words = 2, ["<image>"]
    r = convert(*args)
    assert r.code == code, (r.stderr, r.exception)
    errors = [line for line in r.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and all(w in errors[0] for w in words), r.stderr
    assert "Traceback" not in r.stderr


def test_identity_changes_with_model_prompt_and_token_limit(tmp_path):
    def ident(**kw):
        return DeepseekOcr2Engine(EngineOptions(**{"model": str(tmp_path), **kw})).identity()

    base = ident()
    assert base == ident()
    assert len({base, ident(prompt="free"), ident(max_new_tokens=100), ident(model="org/other"),
                ident(prompt="<image>\nmine")}) == 5


def test_engine_needs_no_torch_until_it_loads():
    code = ("import sys\n"
            "from PIL import Image\n"
            "from ocrbatch.cli import app\n"
            "from ocrbatch.config import EngineOptions\n"
            "from ocrbatch.engines import registry\n"
            "from ocrbatch.records import PageImage\n"
            "e = registry.create('deepseek-ocr2', EngineOptions(model='org/name'))\n"
            "assert e.bucket_key(PageImage(None, Image.new('RGB', (1241, 1754)))) == 6\n"
            "e.describe(); e.identity()\n"
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_halves_of_a_batch_whose_staging_ran_out_of_memory_find_a_free_buffer_set(tiny, tmp_path):
    """A batch whose copy to the device fails (out of memory growing a buffer) while the next batch holds the
    other buffer set is split; each half stages on its own and gives its set back when done, so the next
    half finds one too (it used to fail with "every buffer set holds a batch", and with it every page)."""
    from ocrbatch.gpu.throughput import ThroughputController

    engine = DeepseekOcr2Engine(EngineOptions(model=str(tiny.model), max_new_tokens=1, min_new_tokens=1,
                                              buffer_pages=8, schedule="static"))
    engine.load("cpu")
    pages = [engine.prepare(page_image(p)) for p in generated_pages(tmp_path, [(700, 500)] * 5)]
    queue = [Batch(tuple(pages[:4])), Batch(tuple(pages[4:]))]
    real_stage = engine._staging.stage

    def stage(groups):
        if len(groups["global"]) == 4:
            raise RuntimeError("CUDA out of memory growing a buffer (simulated)")
        return real_stage(groups)

    engine._staging.stage = stage
    results = []
    worker = InferWorker(engine, results.append, ThroughputController(4))
    try:
        worker.run(lambda block: queue.pop(0) if queue else None, busy=lambda s: None)
    finally:
        engine.close()
    assert [r.status.value for r in results] == ["truncated"] * 5, [r.error for r in results]  # fixed length
    assert worker.controller.cap == 2 and engine._prep.pool.in_use() == 0


@pytest.mark.parametrize("bf16_native, capability, dtype, flash", [
    (False, (7, 5), "float16", False),  # T4: bf16 only emulated; flash-attn 2 refuses sm75
    (False, (7, 0), "float16", False),  # V100
    (True, (8, 0), "bfloat16", True),  # A100
    (True, (9, 0), "bfloat16", True),  # H100/H200
])
def test_precision_and_attention_follow_what_the_gpu_really_supports(bf16_native, capability, dtype, flash,
                                                                     tmp_path, monkeypatch):
    import importlib.util

    from ocrbatch.gpu import device as gpu_device

    class FakeCuda:  # what torch.cuda reports on such a GPU (is_bf16_supported counts emulation by default)
        @staticmethod
        def is_bf16_supported(including_emulation=True):
            return True if including_emulation else bf16_native

        @staticmethod
        def get_device_capability(device=None):
            return capability

    assert gpu_device.cuda_caps(SimpleNamespace(cuda=FakeCuda), "cuda:0") == (bf16_native, capability)
    monkeypatch.setattr(gpu_device, "cuda_caps", lambda torch, device: (bf16_native, capability))
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "flash_attn"
                        else real_find_spec(name, *a))
    engine = DeepseekOcr2Engine(EngineOptions(model=str(tmp_path)))
    assert choose_dtype(engine.options.dtype, "cuda:0") == dtype
    attention = engine._choose_attention("cuda:0", dtype)
    assert (attention != "sdpa") is flash


def test_quantized_weights_load_run_and_are_recorded(tiny, tmp_path):
    pytest.importorskip("bitsandbytes")
    pytest.importorskip("accelerate")
    inputs = generated_pages(tmp_path / "in", SIZES[:2])
    r = convert(*inputs, "-o", tmp_path / "nf4", "--model", tiny.model, "--max-new-tokens", 4, "--quantize", "nf4")
    assert r.code in (0, 3), (r.stderr, r.exception)
    assert r.summary["engine"]["quantize"] == "nf4"
    assert r.summary["pages_ok"] + r.summary["pages_truncated"] == 2
    assert all("quantize=nf4" in rec["engine"] for rec in manifest(tmp_path / "nf4"))  # a rerun without it redoes
    r = convert(*inputs, "-o", tmp_path / "int8", "--model", tiny.model, "--quantize", "int8")
    assert r.code == 5 and "--quantize int8 needs a CUDA GPU" in r.stderr  # one line, no traceback
    assert "Traceback" not in r.stderr
