"""The run's configuration: frozen, typed, validated once when built."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from .errors import UsageError


@dataclass(frozen=True)
class PageSelection:
    """1-based, inclusive page ranges; `end=None` means to the last page."""

    ranges: tuple[tuple[int, int | None], ...]

    @classmethod
    def parse(cls, text: str) -> "PageSelection":
        ranges: list[tuple[int, int | None]] = []
        for part in text.replace(" ", "").split(","):
            m = re.fullmatch(r"(\d+)(?:(-)(\d*))?", part)
            if not m:
                raise UsageError(f"--pages: cannot read {part!r} (use e.g. 1-3,7,10-)")
            start = int(m.group(1))
            end: int | None = start
            if m.group(2):
                end = int(m.group(3)) if m.group(3) else None
            if start < 1 or (end is not None and end < start):
                raise UsageError(f"--pages: {part!r} is not a valid range (pages count from 1)")
            ranges.append((start, end))
        return cls(tuple(ranges))

    def select(self, page_count: int) -> list[int]:
        chosen: set[int] = set()
        for start, end in self.ranges:
            last = page_count if end is None else min(end, page_count)
            chosen.update(range(start, last + 1))
        return sorted(chosen)


@dataclass(frozen=True)
class EngineOptions:
    """Options an engine may read; each engine documents which ones it uses."""

    model: str | None = None  # weights: a local folder or a Hugging Face id
    dtype: str = "auto"  # auto | bfloat16 | float16 | float32
    prompt: str = "markdown"
    max_new_tokens: int = 8192
    min_new_tokens: int = 0  # benchmarks: equal to max_new_tokens, every page gets exactly that many
    threads: int | None = None  # CPU threads for the engine (rapidocr: tasks in parallel; torch on a CPU)
    buffer_pages: int = 0  # pages whose preprocessed inputs may wait in buffers at once; 0: the engine's default
    pin_memory: bool | None = None  # page-locked host buffers; None: when CUDA is available
    batch_pages: int = 0  # most pages one batch can hold (device buffers are sized for it); 0: grow as needed
    reserve_buffers: bool = True  # make every buffer at once (a fixed cap); False: as pages need them (auto)
    quantize: str = "none"  # none | int8 | nf4 (bitsandbytes weights)
    schedule: str = "continuous"  # continuous: rows leave and join between decoding steps; static: whole batches
    page_lengths: tuple[tuple[str, int], ...] = ()  # benchmarks: (file name, tokens) each page ends after
    model_size: str = "small"  # rapidocr: PP-OCRv6 small, or tiny (faster, below the accuracy goals)
    keep_furniture: bool = False  # keep running heads and feet, page numbers, margin stamps (rapidocr, text layer)


MODEL_SIZES = ("small", "tiny")  # --model-size (rapid.py also knows bench-only mixes)


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask, which containers and taskset narrow)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def default_workers() -> int:
    return min(4, available_cpus())


@dataclass(frozen=True)
class ServiceConfig:
    """The engine side of a run, kept by a Converter across runs (pipeline/service.py)."""

    engine: str = "rapidocr"
    engine_options: EngineOptions = field(default_factory=EngineOptions)
    devices: str = "auto"
    max_batch: int = 8  # the first cap
    max_batch_auto: bool = False  # the cap grows while throughput gains (gpu/throughput.py)
    max_wait_s: float = 0.2
    workers: int = 4  # decode threads feeding it (sizes the buffers)
    ray: str | None = None
    starve_s: float = 5.0  # the longest a bulk page waits while interactive pages keep coming


@dataclass(frozen=True)
class RunConfig:
    inputs: tuple[str, ...]
    output: Path
    engine: str = "rapidocr"
    engine_options: EngineOptions = field(default_factory=EngineOptions)
    devices: str = "auto"  # resolved when the run starts (gpu/device.py)
    dpi: int = 150
    max_batch: int = 8  # the first cap on pages per batch (rows decoding at once)
    max_batch_auto: bool = False  # --max-batch auto: the cap grows while throughput gains (gpu/throughput.py)
    max_wait_ms: int = 200
    workers: int = field(default_factory=default_workers)
    pages: PageSelection | None = None
    force: bool = False
    null_separated: bool = False  # `-` reads NUL-separated paths (find -print0)
    text_layer: str = "auto"  # PDF text layer: auto (use it when usable), off (always OCR), only (never OCR)
    ray: str | None = None  # convert on a Ray cluster: auto, local, or the head's address (pipeline/remote.py)
    ray_workers: int | None = None  # actors on it; None: one per GPU, or per `threads` CPUs
    max_pixels: int = 200_000_000  # an image frame larger than this fails as a page (images.DEFAULT_MAX_PIXELS)
    # The watchdog: pages in flight and none finished for this long → they fail, the run stops (exit 8). Long
    # enough for an 8,192-token page and its one retry on a slow GPU (a T4 decodes ~10 tokens/s per row).
    stall_timeout: float = 1800.0
    # What a run writes besides each page's Markdown (issue 22): `formats` ("md", or "md", "json": NAME.json beside
    # each page, pagejson.py), `join` (one NAME.md per multi-page document, pipeline/joined.py), `review_below`
    # (pages whose confidence score is lower are listed in the summary: --json's "review").
    formats: tuple[str, ...] = ("md",)
    join: bool = False
    review_below: float | None = None

    def __post_init__(self) -> None:
        if not self.inputs:
            raise UsageError("no inputs given")
        check_formats(self.formats)
        if self.review_below is not None and not 0 < self.review_below <= 1:
            raise UsageError(f"--review-below {self.review_below}: give a confidence between 0 and 1 (e.g. 0.9)")
        if not self.stall_timeout > 0:
            raise UsageError("--stall-timeout must be a positive number of seconds")
        if not 36 <= self.dpi <= 1200:
            raise UsageError(f"--dpi {self.dpi}: choose between 36 and 1200")
        if self.max_batch < 1:
            raise UsageError("--max-batch must be at least 1")
        if self.max_wait_ms < 0:
            raise UsageError("--max-wait-ms cannot be negative")
        if self.workers < 1:
            raise UsageError("--workers must be at least 1")
        if self.engine_options.threads is not None and self.engine_options.threads < 1:
            raise UsageError("--threads must be at least 1")
        if self.engine_options.model_size not in MODEL_SIZES:
            raise UsageError(f"--model-size {self.engine_options.model_size}: choose "
                             f"{' or '.join(MODEL_SIZES)}")
        if self.ray_workers is not None and self.ray_workers < 1:
            raise UsageError("--ray-workers must be at least 1")
        if self.ray_workers is not None and not self.ray:
            raise UsageError("--ray-workers needs --ray")
        if self.engine_options.schedule not in ("continuous", "static"):
            raise UsageError(f"--schedule {self.engine_options.schedule}: choose continuous or static")
        if self.max_pixels < 1_000_000:
            raise UsageError("--max-pixels must be at least 1000000 (1 MP)")
        if self.text_layer not in ("auto", "off", "only"):
            raise UsageError(f"--text-layer {self.text_layer}: choose auto, off or only")

    @property
    def max_wait_s(self) -> float:
        return self.max_wait_ms / 1000.0

    @classmethod
    def build(cls, inputs: tuple[str, ...], output: Path, *, model: str | None = None, dtype: str = "auto",
              prompt: str = "markdown", max_new_tokens: int = 8192, threads: int | None = None,
              model_size: str = EngineOptions.model_size, keep_furniture: bool = False,
              workers: int | None = None, pages: str | PageSelection | None = None, schedule: str = "continuous",
              quantize: str = "none", max_batch: int | str = 8, **fields) -> "RunConfig":
        """From the command line's flat options (engine options in, `pages` as text, `max_batch` a number or
        auto)."""
        start, auto = parse_max_batch(max_batch)
        return cls(inputs=tuple(inputs), output=output, workers=workers or default_workers(),
                   engine_options=EngineOptions(model=model, dtype=dtype, prompt=prompt,
                                                max_new_tokens=max_new_tokens, threads=threads,
                                                model_size=model_size, keep_furniture=keep_furniture,
                                                schedule=schedule, quantize=quantize),
                   pages=PageSelection.parse(pages) if isinstance(pages, str) else pages, max_batch=start,
                   max_batch_auto=auto, **fields)

    @property
    def service(self) -> ServiceConfig:
        return ServiceConfig(engine=self.engine, engine_options=self.engine_options, devices=self.devices,
                             max_batch=self.max_batch, max_batch_auto=self.max_batch_auto,
                             max_wait_s=self.max_wait_s, workers=self.workers,
                             ray=self.ray)


FORMATS = ("md", "json")  # --format: what each page is written as


def parse_formats(text: str | tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """--format md or md,json → ("md",) or ("md", "json"); UsageError otherwise."""
    parts = [p.strip().lower() for p in (text.split(",") if isinstance(text, str) else text) if p.strip()]
    return check_formats(tuple(dict.fromkeys(sorted(parts, key=lambda p: FORMATS.index(p) if p in FORMATS else 9))))


def check_formats(formats: tuple[str, ...]) -> tuple[str, ...]:
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or "md" not in formats:
        raise UsageError(f"--format {','.join(formats)}: choose md or md,json (the Markdown is always written)")
    return formats


# Every `convert` option can come from the environment (flags win): option name → variable.
ENV = {name: "OCRBATCH_" + name.upper() for name in (
    "output", "engine", "model", "dtype", "prompt", "max_new_tokens", "threads", "model_size", "keep_furniture",
    "devices", "dpi", "text_layer", "ray", "ray_workers", "max_batch", "schedule", "quantize", "max_wait_ms",
    "workers", "pages", "max_pixels", "force", "null", "json", "quiet", "no_progress", "log_every", "metrics_file",
    "verbose", "format", "join", "review_below")}
_INTS = {"max_new_tokens", "threads", "dpi", "ray_workers", "max_wait_ms", "workers", "verbose",
         "max_pixels"}
_FLAGS = {"force", "null", "json", "quiet", "no_progress", "keep_furniture", "join"}
# The options a Converter takes (the others belong to one run, or to the command line).
CONVERTER_OPTIONS = ("engine", "model", "dtype", "prompt", "max_new_tokens", "threads", "model_size",
                     "keep_furniture", "devices", "dpi", "text_layer", "ray", "ray_workers", "max_batch",
                     "max_wait_ms", "workers", "max_pixels", "schedule", "quantize")


def parse_max_batch(value: "int | str") -> tuple[int, bool]:
    """(first cap, grows automatically) from --max-batch: a number, or auto."""
    if isinstance(value, int):
        return value, False
    if str(value).strip().lower() == "auto":
        return 8, True
    try:
        return int(value), False
    except ValueError:
        raise UsageError(f"--max-batch {value!r}: give a number of pages, or auto") from None


def env_options(environ: "os._Environ[str] | dict[str, str]") -> dict[str, object]:
    """The options set in `environ` (OCRBATCH_ENGINE=... → {"engine": ...}), typed; UsageError if unreadable."""
    found: dict[str, object] = {}
    for name, var in ENV.items():
        raw = environ.get(var)
        if raw is None or raw == "":
            continue
        if name in _INTS:
            try:
                found[name] = int(raw)
            except ValueError:
                raise UsageError(f"{var}={raw!r}: a whole number is needed") from None
        elif name == "max_batch":
            if raw.strip().lower() != "auto" and not raw.strip().isdigit():
                raise UsageError(f"{var}={raw!r}: a whole number or auto is needed")
            found[name] = raw.strip()
        elif name in _FLAGS:
            if raw.lower() not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
                raise UsageError(f"{var}={raw!r}: use 1/true/yes or 0/false/no")
            found[name] = raw.lower() in ("1", "true", "yes", "on")
        elif name in ("log_every", "review_below"):
            try:
                found[name] = float(raw)
            except ValueError:
                raise UsageError(f"{var}={raw!r}: a number is needed") from None
        else:
            found[name] = raw
    return found
