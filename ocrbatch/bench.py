"""`ocrbatch bench`: the pipeline's throughput on a random DeepSeek-OCR-2; no weights, no download.

    build a random checkpoint in a temporary folder      tiny on a CPU, real size (~3.4B) on a GPU
    draw A4 pages (or take --pages-dir)
    per-page loop: the engine alone, one `generate` per page, like the official `infer`: the baseline
    for each batch size: `pipeline.run` on the pages      decode threads, pool, batcher, worker: the real path
    a table: pages/s, NVML utilization, peak VRAM, buffer allocations after warm-up, × the loop

Every page generates exactly --max-new-tokens tokens (min = max new tokens), so the work per page is fixed
and throughput comparable between runs. Pages/s is the worker's: pages over the time from its first batch
to its last (the model load is left out, as it is from the loop). Utilization is NVML's mean over the
steady part (from the end of the worker's warm-up batches to its last batch). The random model writes
noise: this measures speed, never accuracy.
"""

from __future__ import annotations

import json
import logging
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
DRAWN_PAGES = 8  # distinct drawn pages; more are copies (the model's work per page is the same anyway)
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp", ".bmp"}
DEFAULT_TOKENS = {"full": 128, "tiny": 8}


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

    @property
    def tokens(self) -> int:
        return self.max_new_tokens or DEFAULT_TOKENS[self.arch]

    def pages_for(self, batch: int) -> int:
        return self.pages or max(8, 6 * batch)


@dataclass
class Row:
    batch: int
    pages: int
    pages_per_s: float | None = None
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


def parse_sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(p) for p in text.replace(" ", "").split(",") if p)
    except ValueError:
        raise UsageError(f"--batch-sizes {text!r}: give sizes like 1,2,4,8") from None
    return sizes


def run_bench(cfg: BenchConfig, say: Callable[[str], None] = lambda line: None) -> BenchResult:
    """Build, baseline, run every batch size; `say` gets a line of progress now and then."""
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
                      dtype=torch.bfloat16 if full else None)
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
        build_s = time.monotonic() - t0
        need = max(max(cfg.pages_for(b) for b in cfg.batch_sizes), cfg.loop_pages + 1)
        pages = _pages(work / "pages", need, cfg.pages_dir)
        say(f"per-page loop on {cfg.loop_pages} pages")
        loop_rate, facts = _loop(model, pages[:cfg.loop_pages + 1], cfg.tokens, device)
        rows = []
        for batch in cfg.batch_sizes:
            n = cfg.pages_for(batch)
            if cfg.budget_s is not None and time.monotonic() - t0 > cfg.budget_s:
                rows.append(Row(batch, n, skipped=f"over the {cfg.budget_s:.0f} s budget"))
                continue
            say(f"pipeline, batch size {batch}, {n} pages")
            row = _pipeline(model, pages[:n], batch, cfg, device, work / f"out-{batch}")
            row.vs_loop = row.pages_per_s / loop_rate if row.pages_per_s and loop_rate else None
            rows.append(row)
        w, h = _size(pages[0])
        return BenchResult(cfg.arch, device, facts["dtype"], facts["params_m"], cfg.tokens, f"{w}x{h}",
                           cfg.loop_pages, loop_rate, rows, build_s)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _device(cfg: BenchConfig, torch: Any) -> str:
    device = cfg.device
    if device == "auto":
        device = "cuda:0" if cfg.arch == "full" else "cpu"
    elif device.isdigit():
        device = f"cuda:{device}"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise EngineLoadError(f"bench on {device}: torch sees no CUDA GPU (use --arch tiny, which runs on a CPU)")
    return device


def _pages(folder: Path, count: int, source: Path | None) -> list[Path]:
    """`count` page files in `folder`: --pages-dir's images, or a few drawn A4 pages, cycled (copied: each
    file is an input of its own)."""
    if source is not None:
        found = sorted(p for p in Path(source).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        if not found:
            raise UsageError(f"--pages-dir {source}: no page images there")
    else:
        drawn = folder.parent / "drawn"
        drawn.mkdir()
        found = [_draw(drawn / f"drawn-{i + 1}.png", i) for i in range(min(count, DRAWN_PAGES))]
    folder.mkdir()
    out = []
    for i in range(count):
        src = found[i % len(found)]
        dst = folder / f"page-{i + 1:04d}{src.suffix.lower()}"
        shutil.copyfile(src, dst)
        out.append(dst)
    return out


def _draw(path: Path, i: int) -> Path:
    from PIL import Image, ImageDraw

    im = Image.new("RGB", PAGE_SIZE, "white")
    d = ImageDraw.Draw(im)
    for line, y in enumerate(range(120, PAGE_SIZE[1] - 120, 40)):
        d.text((100, y), f"Page {i + 1}, line {line + 1}: the quick brown fox jumps over the lazy dog " * 2,
               fill="black")
    im.save(path)
    return path


def _size(path: Path) -> tuple[int, int]:
    from PIL import Image

    with Image.open(path) as im:
        return im.size


def _options(model: Path, tokens: int, device: str) -> Any:
    """Fixed-length generation; on a CPU one torch thread (the tiny model gains nothing from more, and the
    decode threads need the cores)."""
    from .config import EngineOptions

    return EngineOptions(model=str(model), max_new_tokens=tokens, min_new_tokens=tokens,
                         threads=1 if device == "cpu" else None)


def _loop(model: Path, paths: list[Path], tokens: int, device: str) -> tuple[float, dict[str, Any]]:
    """Pages/s of the engine alone, one page per `generate`, each page read and preprocessed on the same
    thread; the first page warms up and is not timed."""
    from PIL import Image

    from .engines.deepseek_ocr2.engine import DeepseekOcr2Engine
    from .records import Kind, PageImage, PageRef, Source

    engine = DeepseekOcr2Engine(_options(model, tokens, device))
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


def _pipeline(model: Path, paths: list[Path], batch: int, cfg: BenchConfig, device: str, out: Path) -> Row:
    import torch

    from .config import RunConfig, default_workers
    from .gpu.device import cuda_uuid, reading_for
    from .pipeline.infer import WARMUP_BATCHES
    from .pipeline.run import run

    config = RunConfig(inputs=tuple(str(p) for p in paths), output=out, engine="deepseek-ocr2",
                       engine_options=_options(model, cfg.tokens, device), devices=device, max_batch=batch,
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
    return Row(batch=batch, pages=done, wall_s=round(wall, 2), mean_batch=worker["mean_batch"],
               pages_per_s=done / worker["wall_s"] if worker["wall_s"] else None,
               util_pct=sum(util.values()) / len(util) if util else None,
               peak_vram_gib=torch.cuda.max_memory_allocated(device) / 2**30 if device.startswith("cuda") else None,
               allocations_after_warmup=worker["buffer_allocations_after_warmup"])


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


# -- output -----------------------------------------------------------------------------------------------

COLUMNS = (("batch", 5), ("pages", 5), ("pages/s", 8), ("util %", 6), ("peak VRAM", 9),
           ("allocs after warm-up", 20), ("× loop", 6))


def table(result: BenchResult) -> str:
    """The result as plain text: a heading and one row per batch size."""
    lines = [f"ocrbatch bench: random DeepSeek-OCR-2 ({result.arch}, {result.params_m:,.1f}M parameters) on "
             f"{result.device}, {result.dtype}; {result.tokens} tokens per page; pages {result.page_size}",
             f"per-page loop: {result.loop_pages} pages, {result.loop_pages_per_s:.2f} pages/s "
             f"({1 / result.loop_pages_per_s:.2f} s/page)" if result.loop_pages_per_s else "per-page loop: -",
             "",
             "  ".join(name.rjust(width) for name, width in COLUMNS)]
    for r in result.rows:
        if r.skipped:
            lines.append(f"{r.batch:>5}  {r.pages:>5}  skipped: {r.skipped}")
            continue
        cells = [str(r.batch), str(r.pages), _num(r.pages_per_s, 2), _num(r.util_pct, 0),
                 "-" if r.peak_vram_gib is None else f"{r.peak_vram_gib:.1f} GiB",
                 "-" if r.allocations_after_warmup is None else str(r.allocations_after_warmup),
                 _num(r.vs_loop, 2)]
        lines.append("  ".join(c.rjust(width) for c, (_, width) in zip(cells, COLUMNS)))
    return "\n".join(lines)


def as_json(result: BenchResult) -> str:
    return json.dumps(asdict(result), indent=2)


def _num(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def main(cfg: BenchConfig, json_out: bool = False, quiet: bool = False) -> int:
    """The command: progress on stderr, the table (or JSON) on stdout."""
    say = (lambda line: None) if quiet else (lambda line: print(f"ocrbatch bench: {line}", file=sys.stderr))
    level = log.level
    log.setLevel(logging.ERROR)  # every page "runs into the token limit": that is the benchmark, not news
    try:
        result = run_bench(cfg, say)
    finally:
        log.setLevel(level)
    sys.stdout.write((as_json(result) if json_out else table(result)) + "\n")
    return 0
