"""`ocrbatch throughput` (formerly `ocrbatch bench`): the GPU pipeline's throughput on a random DeepSeek-OCR-2;
no weights, no download.

    build a random checkpoint in a temporary folder      tiny on a CPU, real size (~3.4B) on a GPU
    draw pages (or take --pages-dir)                    A4 for full; for tiny, pages that fit one tile
    draw each page's length                             --lengths mix (default) or fixed
    per-page loop: the engine alone, one `generate` per page, like the official `infer`: the baseline
    for each batch size and schedule: `pipeline.run`    decode threads, pool, batcher, worker: the real path
    a row as each run ends: pages/s, tokens/s, slot efficiency, NVML utilization, peak VRAM, buffer
    allocations after warm-up, × the loop

Lengths: with `--lengths mix` each page ends after a drawn number of tokens, log-normal (sigma 0.6) around
--median-tokens, and one page in twenty runs to the limit --max-new-tokens (a loop), as real pages do: issue
#14's mix is a median of 1,000 tokens with the engine's limit of 8,192, and by default the median keeps that
proportion to whatever limit is chosen (8,192 → 1,000; tiny's default 2,048 → 250: a quarter of the real
lengths, so that a CPU run takes minutes; the model's per-page prefill, the same in either schedule, weighs
more the shorter the pages). The heading prints the mix drawn. With `fixed` every page generates exactly
--max-new-tokens. The model never ends a page by itself (its end token
is taken out), so the work is the same between runs. Slot efficiency is useful tokens ÷ (rows × decoding
steps): what share of the rows a device decodes carried a page's token rather than padding (static: a
batch lives as long as its longest page) or an empty row. Pages/s is the worker's: pages over the time from
its first batch to its last (the model load is left out, as it is from the loop). Utilization is NVML's mean
over the steady part. The random model writes noise: this measures speed, never accuracy.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Callable

from .errors import EngineLoadError, UsageError

log = logging.getLogger("ocrbatch")

PAGE_SIZE = (1241, 1754)  # A4 at 150 dpi: six crops, the common case
TINY_PAGE_SIZE = (740, 560)  # one tile, no crops: on a CPU the tiny vision tower would otherwise dominate
MIX_LOOPS = 0.05  # pages of the mix that run to the limit
MIX_SIGMA = 0.6  # spread of the log-normal lengths
MIX_MEDIAN_SHARE = 1000 / 8192  # median ÷ limit: issue #14's median of 1,000 tokens at the limit of 8,192
DRAWN_PAGES = 8  # distinct drawn pages; more are copies (the model's work per page is the same anyway)
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp", ".bmp"}
DEFAULT_TOKENS = {("full", "fixed"): 128, ("tiny", "fixed"): 8, ("full", "mix"): 1024, ("tiny", "mix"): 2048}


@dataclass(frozen=True)
class BenchConfig:
    arch: str = "tiny"  # tiny | full
    batch_sizes: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    pages: int | None = None  # per batch size; None: six batches' worth, at least 8
    pages_dir: Path | None = None
    max_new_tokens: int | None = None  # None: DEFAULT_TOKENS[arch]
    loop_pages: int = 4
    device: str = "auto"  # auto: cuda:0 for full, cpu for tiny
    workers: int | None = None
    budget_s: float | None = None  # start no new batch size after this
    lengths: str = "mix"  # mix | fixed
    schedules: tuple[str, ...] = ("static", "continuous")
    median_tokens: int | None = None  # the mix's median; None: MIX_MEDIAN_SHARE of the limit

    def __post_init__(self) -> None:
        if self.arch not in ("tiny", "full"):
            raise UsageError(f"--arch {self.arch}: choose tiny or full")
        if not self.batch_sizes or min(self.batch_sizes) < 1:
            raise UsageError("--batch-sizes: give positive sizes, e.g. 1,2,4,8")
        if self.pages is not None and self.pages < 1:
            raise UsageError("--pages must be at least 1")
        if self.loop_pages < 1:
            raise UsageError("--loop-pages must be at least 1")
        if self.max_new_tokens is not None and self.max_new_tokens < 1:
            raise UsageError("--max-new-tokens must be at least 1")
        if self.lengths not in ("mix", "fixed"):
            raise UsageError(f"--lengths {self.lengths}: choose mix or fixed")
        if not self.schedules or set(self.schedules) - {"static", "continuous"}:
            raise UsageError("--schedules: give static, continuous or both")
        if self.median_tokens is not None and not 1 <= self.median_tokens < self.tokens:
            raise UsageError(f"--median-tokens must be at least 1 and below --max-new-tokens ({self.tokens})")

    @property
    def tokens(self) -> int:
        return self.max_new_tokens or DEFAULT_TOKENS[(self.arch, self.lengths)]

    @property
    def median(self) -> int:
        return self.median_tokens or max(1, round(self.tokens * MIX_MEDIAN_SHARE))

    def pages_for(self, batch: int) -> int:
        return self.pages or max(8, 6 * batch)


@dataclass
class Row:
    batch: int
    pages: int
    schedule: str = "static"
    pages_per_s: float | None = None
    tokens_per_s: float | None = None
    slot_efficiency: float | None = None  # useful tokens ÷ (rows × decoding steps)
    util_pct: float | None = None  # NVML, steady part
    peak_vram_gib: float | None = None  # torch's peak allocated on the device
    allocations_after_warmup: int | None = None
    vs_loop: float | None = None
    mean_batch: float | None = None
    wall_s: float | None = None  # the whole run, model load included
    skipped: str | None = None


@dataclass
class BenchResult:
    arch: str
    device: str
    dtype: str
    params_m: float
    tokens: int
    page_size: str
    loop_pages: int
    loop_pages_per_s: float
    rows: list[Row]
    build_s: float
    lengths: str = "fixed"
    median_tokens: float | None = None  # of the drawn lengths (mix)
    mix_median: int | None = None  # the median asked for (mix)
    mix_sigma: float | None = None
    pages_drawn: int | None = None  # pages whose lengths were drawn (the most any row used)
    pages_to_limit: int | None = None  # of those, pages that run to the limit (mix)


def parse_sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(p) for p in text.replace(" ", "").split(",") if p)
    except ValueError:
        raise UsageError(f"--batch-sizes {text!r}: give sizes like 1,2,4,8") from None
    return sizes


def run_bench(cfg: BenchConfig, say: Callable[[str], None] = lambda line: None,
              on_row: Callable[[BenchResult, Row], None] = lambda result, row: None) -> BenchResult:
    """Build, baseline, run every batch size and schedule; `say` gets a line of progress now and then,
    `on_row` each row as it is measured (with the result so far)."""
    import torch
    from transformers.utils import logging as hf_logging

    from .engines.deepseek_ocr2.synthetic import build

    device = _device(cfg, torch)
    hf_logging.disable_progress_bar()
    t0 = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="ocrbatch-bench-"))
    try:
        say(f"building a random {cfg.arch} DeepSeek-OCR-2 in {work}")
        full = cfg.arch == "full"
        model = build(work / "model", real_size=full, device=device if full else "cpu",
                      dtype=torch.bfloat16 if full else None, never_ends=True)
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
        build_s = time.monotonic() - t0
        need = max(max(cfg.pages_for(b) for b in cfg.batch_sizes), cfg.loop_pages + 1)
        pages = _pages(work / "pages", need, cfg.pages_dir, PAGE_SIZE if full else TINY_PAGE_SIZE)
        lengths = draw_lengths([p.name for p in pages], cfg.tokens, cfg.median) if cfg.lengths == "mix" else ()
        say(f"per-page loop on {cfg.loop_pages} pages")
        loop_rate, facts = _loop(model, pages[:cfg.loop_pages + 1], cfg.tokens, device, lengths)
        w, h = _size(pages[0])
        drawn = sorted(n for _, n in lengths)
        mix = cfg.lengths == "mix"
        result = BenchResult(cfg.arch, device, facts["dtype"], facts["params_m"], cfg.tokens, f"{w}x{h}",
                             cfg.loop_pages, loop_rate, [], build_s, cfg.lengths,
                             drawn[len(drawn) // 2] if drawn else None, cfg.median if mix else None,
                             MIX_SIGMA if mix else None, len(pages), len(pages) - len(drawn) if mix else None)
        for batch in cfg.batch_sizes:
            n = cfg.pages_for(batch)
            for schedule in cfg.schedules:
                if cfg.budget_s is not None and time.monotonic() - t0 > cfg.budget_s:
                    row = Row(batch, n, schedule, skipped=f"over the {cfg.budget_s:.0f} s budget")
                else:
                    say(f"pipeline, batch size {batch}, {schedule}, {n} pages")
                    row = _pipeline(model, pages[:n], batch, cfg, device, work / f"out-{batch}-{schedule}",
                                    schedule, lengths)
                    row.vs_loop = row.pages_per_s / loop_rate if row.pages_per_s and loop_rate else None
                result.rows.append(row)
                on_row(result, row)
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def draw_lengths(names: list[str], limit: int, median: int | None = None, seed: int = 0) -> tuple[tuple[str, int], ...]:
    """(page name, tokens) for the pages that end: log-normal around `median` (default MIX_MEDIAN_SHARE of
    the limit), one page in twenty left out (it runs to the limit, as a loop does)."""
    import random

    rng = random.Random(seed)
    median = median or max(1, round(limit * MIX_MEDIAN_SHARE))
    out = []
    for name in names:
        if rng.random() < MIX_LOOPS:
            continue
        out.append((name, max(1, min(limit - 1, round(rng.lognormvariate(math.log(median), MIX_SIGMA))))))
    return tuple(out)


def _device(cfg: BenchConfig, torch: Any) -> str:
    device = cfg.device
    if device == "auto":
        device = "cuda:0" if cfg.arch == "full" else "cpu"
    elif device.isdigit():
        device = f"cuda:{device}"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise EngineLoadError(f"bench on {device}: torch sees no CUDA GPU (use --arch tiny, which runs on a CPU)")
    return device


def _pages(folder: Path, count: int, source: Path | None, size: tuple[int, int] = PAGE_SIZE) -> list[Path]:
    """`count` page files in `folder`: --pages-dir's images, or a few drawn A4 pages, cycled (copied: each
    file is an input of its own)."""
    if source is not None:
        found = sorted(p for p in Path(source).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        if not found:
            raise UsageError(f"--pages-dir {source}: no page images there")
    else:
        drawn = folder.parent / "drawn"
        drawn.mkdir()
        found = [_draw(drawn / f"drawn-{i + 1}.png", i, size) for i in range(min(count, DRAWN_PAGES))]
    folder.mkdir()
    out = []
    for i in range(count):
        src = found[i % len(found)]
        dst = folder / f"page-{i + 1:04d}{src.suffix.lower()}"
        shutil.copyfile(src, dst)
        out.append(dst)
    return out


def _draw(path: Path, i: int, size: tuple[int, int] = PAGE_SIZE) -> Path:
    from PIL import Image, ImageDraw

    im = Image.new("RGB", size, "white")
    d = ImageDraw.Draw(im)
    for line, y in enumerate(range(120, size[1] - 120, 40)):
        d.text((100, y), f"Page {i + 1}, line {line + 1}: the quick brown fox jumps over the lazy dog " * 2,
               fill="black")
    im.save(path)
    return path


def _size(path: Path) -> tuple[int, int]:
    from PIL import Image

    with Image.open(path) as im:
        return im.size


def _options(model: Path, tokens: int, device: str, lengths: tuple = (), schedule: str = "static") -> Any:
    """Drawn lengths (or fixed-length generation when none); on a CPU one torch thread (the tiny model gains
    nothing from more, and the decode threads need the cores)."""
    from .config import EngineOptions

    return EngineOptions(model=str(model), max_new_tokens=tokens, min_new_tokens=0 if lengths else tokens,
                         threads=1 if device == "cpu" else None, page_lengths=lengths, schedule=schedule)


def _loop(model: Path, paths: list[Path], tokens: int, device: str, lengths: tuple = ()) -> tuple[float, dict[str, Any]]:
    """Pages/s of the engine alone, one page per `generate`, each page read and preprocessed on the same
    thread; the first page warms up and is not timed."""
    from PIL import Image

    from .engines.deepseek_ocr2.engine import DeepseekOcr2Engine
    from .records import Kind, PageImage, PageRef, Source

    engine = DeepseekOcr2Engine(_options(model, tokens, device, lengths))
    engine.load(device)
    facts = {"dtype": engine.dtype, "params_m": sum(p.numel() for p in engine.model.parameters()) / 1e6}
    try:
        t0 = 0.0
        for i, path in enumerate(paths):
            if i == 1:
                _sync(device)
                t0 = time.perf_counter()
            source = Source(path=path, display=path.name, kind=Kind.PNG, out_key=PurePosixPath(path.stem), size=0,
                            mtime_ns=0, page_count=1, multipage=False)
            with Image.open(path) as im:
                engine.infer([PageImage(ref=PageRef(source, 1), image=im.convert("RGB"))])
        _sync(device)
        return (len(paths) - 1) / (time.perf_counter() - t0), facts
    finally:
        engine.close()


def _pipeline(model: Path, paths: list[Path], batch: int, cfg: BenchConfig, device: str, out: Path,
              schedule: str = "static", lengths: tuple = ()) -> Row:
    import torch

    from .config import RunConfig, default_workers
    from .gpu.device import cuda_uuid, reading_for
    from .pipeline.infer import WARMUP_BATCHES
    from .pipeline.run import run

    config = RunConfig(inputs=tuple(str(p) for p in paths), output=out, engine="deepseek-ocr2",
                       engine_options=_options(model, cfg.tokens, device, lengths, schedule), devices=device,
                       max_batch=batch,
                       workers=cfg.workers or default_workers(), force=True)
    uuid = cuda_uuid(device) if device.startswith("cuda") else ""
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats(device)
    util: dict[int, float] = {}  # one value per NVML sample
    stop = threading.Event()

    def watch(snapshot: Callable[[], Any]) -> None:
        def poll() -> None:
            while not stop.wait(0.25):
                snap = snapshot()
                workers = snap.infer_workers
                steady = workers and workers[0].batches >= WARMUP_BATCHES and snap.processed < len(paths)
                gpu = reading_for(device, snap.resources, uuid)
                if steady and gpu is not None and gpu.util_pct is not None:
                    util[id(snap.resources)] = gpu.util_pct
        threading.Thread(target=poll, name="bench-watch", daemon=True).start()

    t0 = time.monotonic()
    try:
        summary = run(config, watch=watch)
    finally:
        stop.set()
    wall = time.monotonic() - t0
    worker = summary.figures["infer_workers"][0]
    done = summary.counts["ok"] + summary.counts["truncated"]  # every page "truncated": fixed length
    return Row(batch=batch, pages=done, schedule=schedule, wall_s=round(wall, 2), mean_batch=worker["mean_batch"],
               pages_per_s=done / worker["wall_s"] if worker["wall_s"] else None,
               tokens_per_s=worker["tokens"] / worker["wall_s"] if worker["wall_s"] and worker["tokens"] else None,
               slot_efficiency=worker["slot_efficiency"],
               util_pct=sum(util.values()) / len(util) if util else None,
               peak_vram_gib=torch.cuda.max_memory_allocated(device) / 2**30 if device.startswith("cuda") else None,
               allocations_after_warmup=worker["buffer_allocations_after_warmup"])


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


# -- output -----------------------------------------------------------------------------------------------

COLUMNS = (("batch", 5), ("schedule", 10), ("pages", 5), ("pages/s", 8), ("tokens/s", 8), ("slot eff.", 9),
           ("util %", 6), ("peak VRAM", 9), ("allocs after warm-up", 20), ("× loop", 6))


def heading(result: BenchResult) -> str:
    mix = (f"lengths log-normal, median {result.mix_median} tokens, sigma {result.mix_sigma}, 1 page in 20 to the limit "
           f"of {result.tokens} (drawn: median {result.median_tokens}, {result.pages_to_limit} of "
           f"{result.pages_drawn} pages to the limit)"
           if result.lengths == "mix" else f"{result.tokens} tokens per page")
    return "\n".join([
        f"ocrbatch throughput: random DeepSeek-OCR-2 ({result.arch}, {result.params_m:,.1f}M parameters) on "
        f"{result.device}, {result.dtype}; {mix}; pages {result.page_size}",
        f"per-page loop: {result.loop_pages} pages, {result.loop_pages_per_s:.2f} pages/s "
        f"({1 / result.loop_pages_per_s:.2f} s/page)" if result.loop_pages_per_s else "per-page loop: -",
        "",
        "  ".join(name.rjust(width) for name, width in COLUMNS)])


def row_line(r: Row) -> str:
    if r.skipped:
        return f"{r.batch:>5}  {r.schedule:>10}  {r.pages:>5}  skipped: {r.skipped}"
    cells = [str(r.batch), r.schedule, str(r.pages), _num(r.pages_per_s, 2), _num(r.tokens_per_s, 0),
             _num(r.slot_efficiency, 3), _num(r.util_pct, 0),
             "-" if r.peak_vram_gib is None else f"{r.peak_vram_gib:.1f} GiB",
             "-" if r.allocations_after_warmup is None else str(r.allocations_after_warmup), _num(r.vs_loop, 2)]
    return "  ".join(c.rjust(width) for c, (_, width) in zip(cells, COLUMNS))


def table(result: BenchResult) -> str:
    """The result as plain text: a heading and one row per batch size and schedule."""
    return "\n".join([heading(result)] + [row_line(r) for r in result.rows])


def as_json(result: BenchResult) -> str:
    return json.dumps(asdict(result), indent=2)


def _num(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def main(cfg: BenchConfig, json_out: bool = False, quiet: bool = False) -> int:
    """The command: progress on stderr; the table on stdout, each row as soon as it is measured (or JSON at
    the end)."""
    say = (lambda line: None) if quiet else (lambda line: print(f"ocrbatch throughput: {line}", file=sys.stderr))

    def on_row(result: BenchResult, row: Row) -> None:
        if json_out:
            return
        if len(result.rows) == 1:
            sys.stdout.write(heading(result) + "\n")
        sys.stdout.write(row_line(row) + "\n")
        sys.stdout.flush()

    level = log.level
    log.setLevel(logging.ERROR)  # pages "run into the token limit" on purpose: that is the benchmark, not news
    try:
        result = run_bench(cfg, say, on_row)
    finally:
        log.setLevel(level)
    if json_out:
        sys.stdout.write(as_json(result) + "\n")
    return 0
