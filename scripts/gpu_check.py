"""Exercise the deepseek-ocr2 engine on a CUDA GPU and print its figures (run by scripts/gpu_check.sh), each
line as soon as it is known: a run cut short keeps what it printed.

Steps, most telling first; each has a time it needs and is skipped when less is left of --budget-s:
  1. environment: torch, CUDA, the GPU, bf16 (native or emulated), flash-attn, transformers
  2. a tiny random checkpoint in-process, first-pass tokens (every page exactly the token limit: no retries):
     one static batch of pages with 0, 2, 3 and 6 crops, and continuous decoding with pages joining mid-run,
     each against every page alone: identical rows, and where the others first diverge
  3. `ocrbatch throughput --arch full` (random real-size model, page lengths drawn from the realistic mix): static
     batch 8 (the old path), continuous at 8 rows, and both at 64 rows: pages/s, tokens/s, slot efficiency,
     NVML utilization, peak VRAM, buffer allocations after warm-up; rows printed as they finish, the run
     stopped when its time is up
  4. the tiny checkpoint through `ocrbatch convert` on the dev pages: static batch 8, one page at a time, and
     continuous with --max-batch auto; how many pages come out byte-identical
  5. step 2 in float32
  6. a random checkpoint of roughly the real size: save, load through from_pretrained, one batch of mixed
     pages; tokens/s and peak memory
  7. both backends (--backend transformers and vllm) on one random checkpoint of the real size in the official
     layout, through the whole pipeline, continuous scheduling, the same pages and the same drawn length mix:
     pages/s and tokens/s side by side (vLLM must be importable by this Python: run with PYTHON=... set to
     one that has `ocrbatch[vllm]`; else its row says why not)
  8. the tiny checkpoint through `ocrbatch convert --ray local`: a private Ray instance on this machine, one GPU
     actor per device (each builds the local engine on its GPU; continuous decoding, --max-batch auto), beside
     step 4's continuous run without Ray: actors, pages/s, each actor's device, identical Markdown (Ray must be
     importable by this Python: `ocrbatch[ray]`; else its row says why not)
Random weights write noise: the figures are speed, memory and consistency, never accuracy.

`--device cpu --quick` runs steps 1, 2, 4, 5, 7 and 8 on the CPU (7 with the tiny architecture; 8 with one CPU
actor), and
`--device cpu --quick --self-test` steps 2, 3, 6 and 7 with the tiny architecture: to check this script itself
where there is no GPU. `--only backends` runs step 7 alone, `--only ray` step 8 (with step 4's continuous run).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEV_PAGES = ROOT.parent / "shared" / "bench" / "dev" / "pages"
SIZES = [(700, 500), (1400, 700), (1500, 500), (620, 877), (1241, 1754)]  # 0, 2, 3, 6, 6 crops
T0 = time.monotonic()
FIGURES: dict = {}
BUDGET = [450.0]  # seconds for the whole check (--budget-s)


def say(step: str, **facts) -> None:
    FIGURES.setdefault(step, {}).update(facts)
    text = " ".join(f"{k}={v}" for k, v in facts.items())
    print(f"gpu_check [{time.monotonic() - T0:6.1f}s] {step}: {text}", flush=True)


def left(budget: float) -> float:
    return budget - (time.monotonic() - T0)


def drawn_pages(folder: Path) -> list[Path]:
    from PIL import Image, ImageDraw

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, (w, h) in enumerate(SIZES):
        im = Image.new("RGB", (w, h), "white")
        d = ImageDraw.Draw(im)
        for y in range(40, h - 40, 36):
            d.text((40, y), f"page {i} line {y} " * 3, fill="black")
        path = folder / f"drawn-{i}.png"
        im.save(path)
        paths.append(path)
    return paths


def page_images(paths: list[Path]):
    from pathlib import PurePosixPath

    from PIL import Image

    from ocrbatch.records import Kind, PageImage, PageRef, Source

    pages = []
    for p in paths:
        src = Source(path=p, display=p.name, kind=Kind.PNG, out_key=PurePosixPath(p.stem), size=0, mtime_ns=0,
                     page_count=1, multipage=False)
        pages.append(PageImage(ref=PageRef(src, 1), image=Image.open(p).convert("RGB")))
    return pages


def step_environment(device: str) -> None:
    import torch
    import transformers

    facts = {"python": sys.version.split()[0], "torch": torch.__version__, "transformers": transformers.__version__,
             "cuda": torch.version.cuda, "cuda_available": torch.cuda.is_available(),
             "flash_attn": importlib.util.find_spec("flash_attn") is not None,
             "torchvision": importlib.util.find_spec("torchvision") is not None}
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(device)
        facts.update(gpu=props.name, memory_gib=round(props.total_memory / 2**30, 1),
                     capability=f"{props.major}.{props.minor}", bf16=torch.cuda.is_bf16_supported(),
                     bf16_native=torch.cuda.is_bf16_supported(including_emulation=False))
    say("environment", **facts)
    smi = shutil.which("nvidia-smi")
    if smi:
        out = subprocess.run([smi, "--query-gpu=name,driver_version,memory.used,memory.total,utilization.gpu",
                              "--format=csv,noheader"], capture_output=True, text=True)
        say("environment", nvidia_smi=out.stdout.strip().replace(" ", "") or out.stderr.strip())


def convert(inputs: Path, out: Path, model: Path, device: str, *extra: str, timeout: float = 120) -> dict:
    """`ocrbatch convert` in a subprocess; its --json summary (with `wall_total_s`: the whole command's time)."""
    cmd = [sys.executable, "-m", "ocrbatch", "convert", str(inputs), "-o", str(out), "--engine", "deepseek-ocr2",
           "--model", str(model), "--devices", device, "--json", "-q", *extra]
    t = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=timeout)
    wall = time.monotonic() - t
    if r.returncode not in (0, 3):
        raise RuntimeError(f"convert exited {r.returncode}: {r.stderr.strip()[-2000:]}")
    summary = json.loads(r.stdout)
    summary["wall_total_s"] = round(wall, 1)
    return summary


def same_markdown(a: Path, b: Path) -> tuple[int, int]:
    files = sorted(p.relative_to(a) for p in a.rglob("*.md"))
    same = sum((a / f).read_bytes() == (b / f).read_bytes() for f in files if (b / f).is_file())
    return same, len(files)


CONTINUOUS_AUTO = ["--max-batch", "auto"]  # step 4's continuous run; step 8 runs it on Ray actors


def step_tiny_cli(work: Path, tiny: Path, inputs: Path, device: str, max_new: int,
                  only: tuple[str, ...] = ("static_batch8", "batch1", "continuous_auto")) -> None:
    """`ocrbatch convert` on the dev pages, auto precision: static batches of 8, pages one at a time, and
    continuous decoding with --max-batch auto; how many pages come out byte-identical to the one-at-a-time run."""
    runs = {}
    for label, extra in (("static_batch8", ["--max-batch", "8", "--schedule", "static"]),
                         ("batch1", ["--max-batch", "1", "--schedule", "static"]),
                         ("continuous_auto", CONTINUOUS_AUTO)):
        if label not in only:
            continue
        out = work / f"cli-{label}"
        s = convert(inputs, out, tiny, device, *extra, "--max-new-tokens", str(max_new), "--max-wait-ms", "1000",
                    timeout=max(10.0, min(90.0, left(BUDGET[0]) - 10)))
        runs[label] = out
        e = s["engine"]
        w = (s.get("infer_workers") or [{}])[0]
        say(f"tiny_cli_{label}", pages=s["pages"], ok=s["pages_ok"], truncated=s["pages_truncated"],
            failed=s["pages_failed"], retried=e.get("pages_retried"), mean_batch=s.get("mean_batch"),
            batch_cap=w.get("batch_cap"), slot_efficiency=w.get("slot_efficiency"), wall_s=s.get("wall_s"),
            pages_per_s=s.get("pages_per_s"), dtype=e["dtype"], attention=e["attention"], matmul=e.get("matmul", "-"))
    for label in ("static_batch8", "continuous_auto"):
        if label not in runs or "batch1" not in runs:
            continue
        same, total = same_markdown(runs[label], runs["batch1"])
        say("tiny_cli", **{f"identical_markdown_{label}_vs_batch1": f"{same}/{total}"})


def step_ray(work: Path, tiny: Path, inputs: Path, device: str, max_new: int) -> None:
    """Step 4's continuous run under `--ray local`: one actor per GPU (on a CPU, one CPU actor), each building the
    local engine on its device; its Markdown against step 4's run without Ray."""
    if importlib.util.find_spec("ray") is None:
        say("ray_local", skipped="Ray is not importable by this Python (pip install \"ocrbatch[ray]\")")
        return
    here = work / "cli-continuous_auto"
    if not here.is_dir():  # --only ray, or step 4 skipped: its continuous run first
        step_tiny_cli(work, tiny, inputs, device, max_new, only=("continuous_auto",))
    out = work / "cli-ray"
    gpu = device.startswith("cuda")
    # --devices is the actors' kind under --ray: auto gives one GPU actor per GPU of the (local) cluster
    s = convert(inputs, out, tiny, "auto" if gpu else "cpu", *CONTINUOUS_AUTO, "--ray", "local",
                *([] if gpu else ["--ray-workers", "1"]), "--max-new-tokens", str(max_new), "--max-wait-ms", "1000",
                timeout=max(30.0, min(240.0, left(BUDGET[0]) - 10)))
    workers = s.get("infer_workers") or []
    say("ray_local", actors=s["engine"].get("ray_workers"), pages=s["pages"], ok=s["pages_ok"],
        truncated=s["pages_truncated"], failed=s["pages_failed"], wall_s=s.get("wall_s"),
        command_s=s["wall_total_s"], pages_per_s=s.get("pages_per_s"),
        devices=",".join(str(w.get("device")) for w in workers),
        batch_caps=",".join(str(w.get("batch_cap")) for w in workers), dtype=s["engine"].get("dtype"))
    same, total = same_markdown(out, here)
    say("ray_local", identical_markdown_vs_continuous_auto=f"{same}/{total}")
    if gpu:
        import torch

        say("ray_local", gpus=torch.cuda.device_count(), one_actor_per_gpu=s["engine"].get("ray_workers")
            == torch.cuda.device_count())


def first_divergence(a: list[int], b: list[int]) -> int | None:
    """The first position where two token lists differ (the shorter one's length if one is a prefix of the
    other); None when equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def step_mixed_batch(tiny: Path, pages, device: str, dtype: str, max_new: int, label: str) -> None:
    """First-pass tokens (every page exactly max_new tokens, no retries, the guard on) of one static batch of
    mixed crop counts and of continuous decoding with rows joining, against each page alone: how many rows
    are identical, and where the others first diverge (bf16 kernels may round differently by batch size)."""
    from ocrbatch.config import EngineOptions
    from ocrbatch.engines.deepseek_ocr2.common import GUARD
    from ocrbatch.engines.deepseek_ocr2.engine import DeepseekOcr2Engine
    from ocrbatch.engines.deepseek_ocr2.inputs import unstage

    engine = DeepseekOcr2Engine(EngineOptions(model=str(tiny), dtype=dtype, max_new_tokens=max_new,
                                              min_new_tokens=max_new))
    t = time.monotonic()
    engine.load(device)
    load_s = time.monotonic() - t
    prepared = [engine.prepare(p) for p in pages]
    try:
        def generate(batch):
            engine.stage(batch)
            try:
                return engine._generate(batch, GUARD)
            finally:
                unstage([p.prepared for p in batch])

        t = time.monotonic()
        together = generate(prepared)
        batch_s = time.monotonic() - t
        alone = [generate([p])[0] for p in prepared]
        decoder = engine.decoder() if engine.options.schedule == "continuous" else None
        flowing: dict[int, list[int]] = {}
        if decoder is not None:
            decoder.add(prepared[:2])
            for step in range(10 * max_new):
                if step == 3:
                    decoder.add(prepared[2:])  # join while the first two decode
                for page, gen, _info in decoder.step(rows=len(prepared)):
                    flowing[id(page)] = gen.tokens
                if decoder.idle():
                    break
    finally:
        facts = engine.device_facts()
        engine.release(prepared)
        engine.close()
    static_div = [first_divergence(a.tokens, b.tokens) for a, b in zip(together, alone)]
    cont_div = [first_divergence(flowing.get(id(p), []), b.tokens) for p, b in zip(prepared, alone)]
    say(label, crops=[engine.bucket_key(p) for p in pages], dtype=facts["dtype"], attention=facts["attention"],
        load_s=round(load_s, 2), batch_s=round(batch_s, 2), tokens_per_row=max_new,
        identical_batch_vs_alone=f"{static_div.count(None)}/{len(pages)}", first_divergence_batch=static_div,
        identical_continuous_vs_alone=f"{cont_div.count(None)}/{len(pages)}", first_divergence_continuous=cont_div)


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def _peak_gib(device: str) -> float | None:
    import torch

    return round(torch.cuda.max_memory_allocated(device) / 2**30, 1) if device.startswith("cuda") else None


def step_real_size(work: Path, pages, device: str, max_new: int, budget: float, real_size: bool = True) -> None:
    import torch

    from ocrbatch.config import EngineOptions
    from ocrbatch.engines.deepseek_ocr2.common import GUARD
    from ocrbatch.engines.deepseek_ocr2.engine import DeepseekOcr2Engine
    from ocrbatch.engines.deepseek_ocr2.synthetic import build

    folder = work / "real-size"
    t = time.monotonic()
    build(folder, real_size=real_size, device=device, dtype=torch.bfloat16 if real_size else None)
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    size_gib = sum(p.stat().st_size for p in folder.glob("*.safetensors")) / 2**30
    say("real_size", build_and_save_s=round(time.monotonic() - t, 1), checkpoint_gib=round(size_gib, 2))

    engine = DeepseekOcr2Engine(EngineOptions(model=str(folder), max_new_tokens=max_new))
    t = time.monotonic()
    engine.load(device)
    params = sum(p.numel() for p in engine.model.parameters())
    say("real_size", load_s=round(time.monotonic() - t, 1), params_b=round(params / 1e9, 3),
        **{k: v for k, v in engine.device_facts().items() if k in ("dtype", "attention", "matmul")})
    try:
        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats(device)
        _sync(device)
        t = time.monotonic()
        prepared = [engine.prepare(p) for p in pages]  # pool slots, copied to the device, as the pipeline does
        engine.stage(prepared)
        gens = engine._generate(prepared, GUARD)  # one batch, the guard on, no retries: the throughput figure
        engine.release(prepared)
        _sync(device)
        wall = time.monotonic() - t
        tokens = sum(len(g.tokens) for g in gens)
        say("real_size_batch", pages=len(pages), crops=[engine.bucket_key(p) for p in pages],
            max_new_tokens=max_new, generated_tokens=tokens, wall_s=round(wall, 2),
            tokens_per_s=round(tokens / wall, 1), pages_per_s=round(len(pages) / wall, 3),
            ended=sum(g.ended for g in gens), peak_mem_gib=_peak_gib(device))
        if left(budget) > 60:
            short = min(max_new, 64)
            engine.options = EngineOptions(model=str(folder), max_new_tokens=short)
            t = time.monotonic()
            together = engine.infer(pages[:2])
            alone = [engine.infer([p])[0] for p in pages[:2]]
            same = sum(a.markdown == b.markdown for a, b in zip(together, alone))
            say("real_size_full_path", pages=2, max_new_tokens=short, statuses=[o.status.value for o in together],
                retried=engine.retried, identical_batch_vs_alone=f"{same}/2", wall_s=round(time.monotonic() - t, 1))
    finally:
        engine.close()
        shutil.rmtree(folder, ignore_errors=True)


def step_backends(work: Path, drawn: list[Path], count: int, device: str, max_new: int, rows: int, budget: float,
                  real_size: bool) -> None:
    """Both backends through `ocrbatch.pipeline.run` on the same checkpoint, `count` pages (the drawn ones, cycled)
    and drawn lengths."""
    import torch

    from ocrbatch.bench import draw_lengths
    from ocrbatch.config import EngineOptions, RunConfig
    from ocrbatch.engines.deepseek_ocr2.synthetic import build
    from ocrbatch.engines.deepseek_ocr2_vllm.engine import support, version
    from ocrbatch.pipeline.run import run

    (work / "backend-pages").mkdir(exist_ok=True)
    paths = [Path(shutil.copy(drawn[i % len(drawn)], work / "backend-pages" / f"{i:03d}.png")) for i in range(count)]
    folder = work / "backends-model"
    t = time.monotonic()
    build(folder, real_size=real_size, device=device if real_size else "cpu",
          dtype=torch.bfloat16 if real_size else None, layout="official")
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    lengths = draw_lengths([p.name for p in paths], max_new)
    say("backends", model="real-size random" if real_size else "tiny random", layout="official",
        pages=len(paths), max_new_tokens=max_new, rows=rows,
        median_tokens=sorted(n for _, n in lengths)[len(lengths) // 2] if lengths else None,
        to_limit=len(paths) - len(lengths), build_s=round(time.monotonic() - t, 1))
    table = []
    for backend in ("transformers", "vllm"):
        why = support(load=True) if backend == "vllm" else None
        if why is None and left(budget) < (60 if real_size else 20):
            why = f"only {left(budget):.0f}s left of the budget"
        if why is not None:
            say(f"backend_{backend}", skipped=why)
            table.append((backend, None, None, None, why))
            continue
        options = EngineOptions(model=str(folder), max_new_tokens=max_new, page_lengths=lengths, backend=backend,
                                schedule="continuous", threads=1 if device == "cpu" else None)
        config = RunConfig(inputs=tuple(str(p) for p in paths), output=work / f"backends-{backend}",
                           engine="deepseek-ocr2", engine_options=options, devices=device, max_batch=rows,
                           force=True)
        t = time.monotonic()
        summary = run(config)
        wall = time.monotonic() - t
        worker = summary.figures["infer_workers"][0]
        done = summary.counts["ok"] + summary.counts["truncated"]
        pages_s = done / worker["wall_s"] if worker["wall_s"] else None
        tokens_s = worker["tokens"] / worker["wall_s"] if worker["wall_s"] and worker["tokens"] else None
        facts = {k: summary.engine.get(k) for k in ("dtype", "vllm") if summary.engine.get(k)}
        say(f"backend_{backend}", pages=done, failed=summary.counts["failed"], load_and_run_s=round(wall, 1),
            busy_s=round(worker["wall_s"], 1), pages_per_s=_round(pages_s, 3), tokens_per_s=_round(tokens_s, 1),
            **facts)
        table.append((backend, pages_s, tokens_s, worker["wall_s"], version() if backend == "vllm" else ""))
    print("gpu_check backends, side by side (same checkpoint, pages and length mix; continuous scheduling):")
    print(f"  {'backend':<13} {'pages/s':>9} {'tokens/s':>10} {'busy_s':>8}  note")
    for backend, pages_s, tokens_s, busy, note in table:
        print(f"  {backend:<13} {_fmt(pages_s, 3):>9} {_fmt(tokens_s, 1):>10} {_fmt(busy, 1):>8}  {note}")
    rates = {b: p for b, p, *_ in table if p}
    if len(rates) == 2:
        say("backends", vllm_over_transformers=round(rates["vllm"] / rates["transformers"], 2))
    shutil.rmtree(folder, ignore_errors=True)


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _fmt(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def step_bench(device: str, budget_s: float, kill_after_s: float, self_test: bool) -> None:
    """`ocrbatch throughput` in its own process (its GPU memory goes with it), its rows printed as each is measured:
    a run stopped at `kill_after_s` keeps the rows it had. `budget_s`: it starts no run after that."""
    if self_test:
        args = ["--arch", "tiny", "--batch-sizes", "2", "--pages", "4", "--max-new-tokens", "16", "--loop-pages", "1"]
    else:
        # Today's path (static, batch 8) against continuous decoding at 8 and at 64 rows, on the length mix.
        args = ["--arch", "full", "--batch-sizes", "8,64", "--pages", "48", "--max-new-tokens", "256",
                "--loop-pages", "2"]
    cmd = [sys.executable, "-m", "ocrbatch", "throughput", *args, "--device", device, "--budget-s", str(int(budget_s))]
    t = time.monotonic()
    rows = []
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT) as proc:
        try:
            for line in iter(proc.stdout.readline, ""):
                print(f"gpu_check bench | {line.rstrip()}", flush=True)
                rows.append(line.rstrip())
                if time.monotonic() - t > kill_after_s:
                    proc.kill()
                    break
            proc.wait(timeout=max(1.0, kill_after_s - (time.monotonic() - t)))
        except subprocess.TimeoutExpired:
            proc.kill()
        err = proc.stderr.read() if proc.stderr else ""
    if proc.returncode not in (0, None, -9):
        raise RuntimeError(f"bench exited {proc.returncode}: {err.strip()[-1500:]}")
    say("bench", wall_s=round(time.monotonic() - t, 1), lines=len(rows),
        stopped=proc.returncode == -9 or None)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--budget-s", type=float, default=450.0, help="stop starting new steps after this")
    ap.add_argument("--quick", action="store_true", help="fewer pages and tokens, no real-size model")
    ap.add_argument("--self-test", action="store_true",
                    help="with --device cpu: run the real-size step too, with the tiny architecture")
    ap.add_argument("--only", choices=("backends", "ray"), help="run this step alone")
    args = ap.parse_args()
    BUDGET[0] = args.budget_s

    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu_check: torch sees no CUDA GPU; nothing to check (use --device cpu --quick to test the script)")
        return 2
    work = Path(tempfile.mkdtemp(prefix="ocrbatch-gpu-check-"))
    status = 0
    try:
        step_environment(args.device)
        from ocrbatch.engines.deepseek_ocr2.synthetic import build

        tiny = build(work / "tiny")
        inputs = work / "pages"
        drawn = drawn_pages(work / "drawn")
        if DEV_PAGES.is_dir():
            picks = sorted(DEV_PAGES.iterdir())[: 6 if args.quick else None]
            inputs.mkdir()
            for p in picks:
                shutil.copy(p, inputs / p.name)
        else:
            shutil.copytree(work / "drawn", inputs)
        max_new = 16 if args.quick else 64
        mixed = page_images(drawn[:4])
        # Most telling first: a step is skipped when less than its need is left, and the bench stops itself.
        steps = [
            ("tiny_mixed_auto", 20, lambda: step_mixed_batch(tiny, mixed, args.device, "auto", max_new,
                                                             "tiny_mixed_batch_auto")),
        ]
        if args.self_test or (not args.quick and args.device.startswith("cuda")):
            # Starts no run past what leaves 90 s for the steps after it; stopped outright 30 s later.
            steps.append(("bench", 20 if args.self_test else 150, lambda: step_bench(
                args.device, min(200.0, left(args.budget_s) - 120), min(260.0, left(args.budget_s) - 90),
                args.self_test)))
        # Step 8 right after step 4, whose continuous run it repeats on Ray actors (one per GPU; on a CPU, one)
        ray_step = ("ray_local", 60 if args.device.startswith("cuda") else 40,
                    lambda: step_ray(work, tiny, inputs, args.device, max_new))
        if not args.self_test:
            steps += [
                ("tiny_cli", 60, lambda: step_tiny_cli(work, tiny, inputs, args.device, max_new)),
                ray_step,
                ("tiny_mixed_fp32", 20, lambda: step_mixed_batch(tiny, mixed, args.device, "float32", max_new,
                                                                 "tiny_mixed_batch_float32")),
            ]
        if args.self_test or (not args.quick and args.device.startswith("cuda")):
            real_pages = page_images(sorted(inputs.iterdir())[:8] if DEV_PAGES.is_dir() else drawn)
            steps.append(("real_size", 150 if not args.self_test else 10, lambda: step_real_size(
                work, real_pages, args.device, 16 if args.self_test else 256, args.budget_s,
                real_size=not args.self_test)))
        # Both backends, side by side: on a GPU the real size (64 pages, up to 1024 tokens each: the mix's median
        # is 125), on a CPU the tiny architecture (6 pages, 32 tokens).
        real = args.device.startswith("cuda") and not args.self_test
        backends = ("backends", 150 if real else 30, lambda: step_backends(
            work, drawn, 64 if real else 6, args.device, 1024 if real else 32, 64 if real else 4, args.budget_s,
            real))
        only = {"backends": [backends], "ray": [ray_step]}.get(args.only or "")
        steps = only if only is not None else steps + [backends]
        for name, needs_s, fn in steps:
            if left(args.budget_s) < needs_s:
                say(name, skipped=f"only {left(args.budget_s):.0f}s left of the budget")
                continue
            try:
                fn()
            except Exception as exc:  # noqa: BLE001 - report and go on to the next step
                status = 1
                from ocrbatch.errors import error_line

                say(name, error=error_line(exc))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    say("done", total_s=round(time.monotonic() - T0, 1), exit=status)
    print("gpu_check figures: " + json.dumps(FIGURES, default=str))
    return status


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main())
