"""The options and the run's configuration.

`OPTIONS` is the one table of options, a row each: name, kind, default, help, scope, the values allowed, and the
typed config whose field it fills. From it come the `convert` and `serve` flags (cli.py), the OCRBATCH_*
variables, the `Converter`'s keywords and their checks (converter.py), the fields of the typed configs, and the
docs' Options page and man page (scripts/reference.py makes them). A row's scope says where it is given:

    run     a flag of `ocrbatch convert` (one run: its inputs, output and reporting)
    serve   a flag of `ocrbatch serve`
    engine  a keyword of `ocrbatch.Converter`: the engine side, kept across runs

and its `to` where its value goes: a field (named as the row, or `attr`) of EngineOptions (what the engine
reads), RunConfig (a run; ServiceConfig, the engine side a Converter keeps, is RunConfig's fields of the same
names), ServeConfig (serve/config.py) or Report (how a command reports). `typed_config` gives each of these a
field for every row that names it (unless declared by hand, to document it); `configure` fills them from the
values, each checked and parsed by its row, once (`Option.parse`: --pages → PageSelection, --max-batch →
BatchCap). A field no row fills is marked `by_code`: the code sets it.

Every option with a flag also reads OCRBATCH_<NAME> (a flag given wins); a value refused names where it came
from: `--dpi 20: ...`, `OCRBATCH_DPI='abc': ...`. A switch has its opposite flag (`--no-quiet`; `--progress`
for `--no-progress`), so that a flag can undo a variable.

Adding an option is its row and the code that reads its field (config.engine_options.NAME for an engine's,
config.NAME for a run's, report.NAME for the terminal's); nothing is copied by hand. The configs are frozen,
typed and validated.
"""

from __future__ import annotations

import hashlib
import os
import re
import dataclasses
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from .errors import UsageError


@dataclass(frozen=True)
class PageSelection:
    """1-based, inclusive page ranges; `end=None` means to the last page."""

    ranges: tuple[tuple[int, int | None], ...]

    @classmethod
    def parse(cls, text: "str | PageSelection") -> "PageSelection":
        if isinstance(text, cls):  # parsed already (Option.checked)
            return text
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
class Shard:
    """--shard I/N: this run converts the I-th (1-based) of N disjoint parts of its inputs, so that N machines
    (cron jobs, no Ray) can share one input folder and one output folder. A source belongs to the part that a
    stable hash of its output stem picks: its path relative to its input root as given (a folder's files
    relative to the folder; a file named on the command line, or listed on stdin, as pipeline/discover.py
    mirrors it), less the extension, casefolded. So `scans/a.pdf` goes to the same part on every machine and
    every run, whatever the machine's mount point, and files that would compete for one output name
    (`report.pdf`, `report.png`) are in one part, told apart as in one run. Each part keeps its own lock and
    manifest (pipeline/lock.py, manifest.py: `manifest.shard-I-of-N.jsonl`)."""

    index: int  # 1..count
    count: int

    @classmethod
    def parse(cls, text: "str | Shard") -> "Shard":
        if isinstance(text, cls):  # parsed already (Option.checked)
            return text
        m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
        if not m:
            raise UsageError(f"--shard {text}: use I/N, e.g. 1/3 (the first of three parts)")
        index, count = int(m.group(1)), int(m.group(2))
        if count < 1 or not 1 <= index <= count:
            raise UsageError(f"--shard {text}: I must be between 1 and N (parts count from 1), N at least 1")
        return cls(index, count)

    @property
    def name(self) -> str:
        """`shard-I-of-N`: in this part's lock and manifest file names."""
        return f"shard-{self.index}-of-{self.count}"

    def takes(self, stem: str) -> bool:
        """Whether the source whose output stem (relative path less extension) is `stem` is in this part."""
        digest = hashlib.sha256(stem.casefold().encode("utf-8", "surrogateescape")).digest()
        return int.from_bytes(digest[:8], "big") % self.count == self.index - 1


def _shard_problem(text: str) -> str | None:
    try:
        Shard.parse(text)
    except UsageError as exc:
        return str(exc).split(": ", 1)[-1]
    return None


def _ray_devices_problem(value: Any) -> str | None:
    if str(value).strip().lower() in ("auto", "cpu"):
        return None
    return ("each Ray worker has one device of its own (one per GPU, or cpu): give auto or cpu, and "
            "--ray-workers for how many")


class BatchCap(int):
    """--max-batch, parsed: the first cap on pages per batch (the number itself, so that code sizing things reads
    it as one) and whether the cap grows while throughput gains (`auto`: --max-batch auto starts at
    MAX_BATCH_START; gpu/throughput.py). Pickles (a Ray actor gets it) and compares with both."""

    auto: bool

    def __new__(cls, first: int, auto: bool = False) -> "BatchCap":
        self = super().__new__(cls, first)
        self.auto = bool(auto)
        return self

    def __getnewargs__(self) -> tuple[int, bool]:
        return int(self), self.auto

    def __eq__(self, other: object) -> bool:  # as a number; with another BatchCap, `auto` too
        return int(self) == other and (not isinstance(other, BatchCap) or self.auto == other.auto)

    __hash__ = int.__hash__

    def __repr__(self) -> str:
        return f"BatchCap({int(self)}{', auto=True' if self.auto else ''})"

    @property
    def text(self) -> str:
        """As the user gives it: auto, or the number."""
        return "auto" if self.auto else str(int(self))

    @classmethod
    def parse(cls, value: "int | str") -> "BatchCap":
        """A number of pages, or auto (checked by the row: kind batch)."""
        if isinstance(value, BatchCap):
            return value
        if isinstance(value, str) and value.strip().lower() == "auto":
            return cls(MAX_BATCH_START, True)
        return cls(int(value))


# The typed configs a row's value goes to (Option.to): what an engine reads, a run's configuration, the server's
# own settings, how a command reports (its output on the terminal).
ENGINE_OPTIONS, RUN_CONFIG, SERVE_CONFIG, REPORT = "EngineOptions", "RunConfig", "ServeConfig", "Report"
CONFIG_NAMES = (ENGINE_OPTIONS, RUN_CONFIG, SERVE_CONFIG, REPORT)
RUN, SERVE, ENGINE = "run", "serve", "engine"
ENGINE_FLAG = frozenset({RUN, SERVE, ENGINE})  # a flag of both commands and a Converter keyword
MAX_BATCH_START = 8  # the first cap on pages per batch; --max-batch auto grows it from here (gpu/throughput.py)
# The kinds of value an option takes, and what one must be: batch is a number of pages, or auto; count a flag
# given N times (-vv).
KINDS = {"text": "text", "int": "a whole number", "count": "a whole number", "float": "a number",
         "path": "a path", "switch": "true or false", "batch": "a number of pages, or auto"}
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


@dataclass(frozen=True)
class Option:
    """One row of OPTIONS."""

    name: str  # the Converter keyword (and the field, unless `attr`); the flag --name-with-dashes, OCRBATCH_NAME
    kind: str  # one of KINDS
    default: Any
    help: str
    scope: frozenset[str]  # RUN, SERVE, ENGINE: see the module's docstring
    short: tuple[str, ...] = ()  # short flags, e.g. ("-o",)
    choices: tuple[str, ...] = ()  # the values allowed, when they are a list
    least: float | None = None  # the smallest value allowed
    most: float | None = None  # the largest value allowed
    check: Callable[[Any], str | None] | None = None  # any other rule: why a value is refused, or None
    metavar: str | None = None
    # With --ray: None, the option works as without Ray; else why a value other than the default is refused
    # there (a usage error, exit 2): a text for every such value, or a rule naming the values it refuses.
    under_ray: str | Callable[[Any], str | None] | None = None
    # Where the value goes: the typed config (ENGINE_OPTIONS, RUN_CONFIG, SERVE_CONFIG or REPORT) and its field,
    # named `name` unless `attr` says otherwise (--null: null_separated). `typed_config` gives the config a field
    # for every row that names it; `configure` fills it, each value checked and parsed by its row, once.
    to: str = ""
    attr: str | None = None
    # Text (a flag's, a variable's, a keyword's) → the field's typed value (--pages 1-3 → PageSelection); given a
    # value it made already, it returns it (checked). None: the value is the field's as checked (a path: a Path).
    parse: Callable[[Any], Any] | None = None

    def __post_init__(self) -> None:
        assert self.kind in KINDS, self.kind
        assert self.to in CONFIG_NAMES, (self.name, self.to)

    @property
    def field(self) -> str:
        """The name of the typed config's field this row fills."""
        return self.attr or self.name

    @property
    def initial(self) -> Any:
        """The default as its field holds it (parsed)."""
        return self.checked(self.default) if self.default is not None else None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def off(self) -> str | None:
        """A switch's opposite flag: --no-NAME (for a switch named no_X: --X)."""
        if self.kind != "switch":
            return None
        return "--" + self.name[3:].replace("_", "-") if self.name.startswith("no_") else "--no-" + self.flag[2:]

    @property
    def env(self) -> str:
        return "OCRBATCH_" + self.name.upper()

    def ray_problem(self, value: Any) -> str | None:
        """Why `value` (as given, or parsed) is refused with --ray, or None."""
        if self.under_ray is None or value is None or value in (self.default, self.initial):
            return None
        return self.under_ray if isinstance(self.under_ray, str) else self.under_ray(value)

    def problem(self, value: Any) -> str | None:
        """Why `value` is refused, or None."""
        if value is None:
            return None if self.default is None else "a value is needed"
        want = {"int": int, "count": int, "float": (int, float), "text": (str, os.PathLike),  # e.g. a model's path
                "path": (str, os.PathLike), "switch": bool, "batch": (int, str)}[self.kind]
        if not isinstance(value, want) or (isinstance(value, bool) and self.kind != "switch"):
            return f"{KINDS[self.kind]} is needed, not {type(value).__name__}"
        if self.kind == "path" and not str(value).strip():
            return "is empty: give a path"  # -o '' would otherwise be the current folder
        if self.kind == "batch":
            if isinstance(value, str) and value.strip().lower() == "auto":
                return None
            try:
                value = int(value)
            except ValueError:
                return f"{KINDS[self.kind]} is needed"
        if self.choices and value not in self.choices:
            return "choose " + _either(self.choices)
        if self.least is not None and self.most is not None and not self.least <= value <= self.most:
            return f"choose between {self.least:g} and {self.most:g}"
        if self.least is not None and value < self.least:
            return "cannot be negative" if self.least == 0 else f"must be at least {self.least:g}"
        return self.check(value) if self.check is not None else None

    def checked(self, value: Any, label: str | None = None) -> Any:
        """`value` as its field holds it, if allowed: parsed by the row (`parse`; a path as a Path); else
        UsageError, naming `label` (default: the flag). A value parsed already is checked by `parse` again."""
        if self.parse is not None and value is not None and not isinstance(value, (str, int, float, os.PathLike)):
            return self.parse(value)  # e.g. a PageSelection, a tuple of formats
        why = self.problem(value)
        if why is not None:
            raise UsageError(f"{label or f'{self.flag} {value if str(value) else repr(str(value))}'}: {why}")
        if value is None:
            return None
        if self.parse is not None:
            return self.parse(value)
        return Path(value) if self.kind == "path" else value

    def read(self, raw: str) -> Any:
        """The value of OCRBATCH_NAME=raw, checked; UsageError naming the variable."""
        label = f"{self.env}={raw!r}"
        text = raw.strip()
        if self.kind in ("int", "count", "float"):
            try:
                value: Any = float(text) if self.kind == "float" else int(text)
            except ValueError:
                raise UsageError(f"{label}: {KINDS[self.kind]} is needed") from None
        elif self.kind == "switch":
            if text.lower() not in _TRUE + _FALSE:
                raise UsageError(f"{label}: use 1/true/yes or 0/false/no")
            value = text.lower() in _TRUE
        else:
            value = raw if self.kind == "text" else text
        return self.checked(value, label)


def _either(choices: Iterable[str]) -> str:
    *most, last = choices
    return f"{', '.join(most)} or {last}" if most else last


FORMATS = ("md", "json")  # --format: what each page is written as


def parse_formats(text: "str | tuple[str, ...] | list[str]") -> tuple[str, ...]:
    """--format md or md,json → ("md",) or ("md", "json"); UsageError otherwise."""
    parts = [p.strip().lower() for p in (text.split(",") if isinstance(text, str) else text) if p.strip()]
    formats = tuple(sorted(set(parts), key=lambda p: FORMATS.index(p) if p in FORMATS else len(FORMATS)))
    why = _formats_problem(",".join(formats))
    if why:
        raise UsageError(f"--format {','.join(parts)}: {why}")
    return formats


def _formats_problem(text: str) -> str | None:
    parts = [p.strip().lower() for p in text.split(",") if p.strip()]
    if any(p not in FORMATS for p in parts) or "md" not in parts:
        return "choose md or md,json (the Markdown is always written)"
    return None


def _pages_problem(text: str) -> str | None:
    try:
        PageSelection.parse(text)
    except UsageError as exc:
        return str(exc).split(": ", 1)[-1]
    return None


MAX_UPLOAD_MB = 1 << 20  # --max-upload-mb's largest (1 TB): beyond, and inf or nan, is not a size a server can use

OPTIONS: tuple[Option, ...] = (
    # -- a run's output -----------------------------------------------------------------------------------
    Option("output", "path", None, "Folder for the Markdown files and manifest.jsonl (required).", frozenset({RUN}),
           short=("-o",), metavar="DIR", to=RUN_CONFIG),
    # -- the engine --------------------------------------------------------------------------------------
    Option("engine", "text", "rapidocr", "rapidocr (embedded, CPU), deepseek-ocr2 (GPU, needs --model), fake "
           "(describes pages) or fake-timed (load tests).", ENGINE_FLAG, short=("-e",), to=RUN_CONFIG),
    Option("model", "text", None, "deepseek-ocr2 weights: a local folder or a Hugging Face id.", ENGINE_FLAG,
           short=("-m",), to=ENGINE_OPTIONS),
    Option("dtype", "text", "auto", "auto, bfloat16, float16 or float32 (deepseek-ocr2).", ENGINE_FLAG,
           to=ENGINE_OPTIONS),
    Option("prompt", "text", "markdown", "markdown, free, or your own text containing <image> (deepseek-ocr2).",
           ENGINE_FLAG, to=ENGINE_OPTIONS),
    Option("max_new_tokens", "int", 8192, "Most tokens per page (deepseek-ocr2).", ENGINE_FLAG, least=1,
           to=ENGINE_OPTIONS),
    Option("threads", "int", None, "CPU threads for the engine (rapidocr: default the CPUs available, up to 8; "
           "with --ray, the CPUs each worker takes, default 2).", ENGINE_FLAG, least=1, to=ENGINE_OPTIONS),
    Option("model_size", "text", "auto", "rapidocr: auto (the tiny recognizer reads every line, the small one "
           "again those it is unsure of: small's accuracy, faster), small (PP-OCRv6 small models throughout) or tiny "
           "(tiny detector too: fastest, fewer words read right).", ENGINE_FLAG, choices=("auto", "tiny", "small"),
           to=ENGINE_OPTIONS),
    Option("reread_below", "float", 0.987, "rapidocr --model-size auto or tiny: a line the tiny recognizer is "
           "less sure of than this (0-1; its weakest characters' probability) is read again with the small one, "
           "and the small one's reading kept (0: none, 1: every line).", ENGINE_FLAG, metavar="SCORE", least=0.0,
           most=1.0, to=ENGINE_OPTIONS),
    Option("int8", "switch", False, "rapidocr: read lines with static int8 copies of the recognizers, built from the "
           "wheel's models at first use (needs the onnx package; cached under ~/.cache/ocrbatch/int8). Opt-in: "
           "faster on CPUs with VNNI, but reads fewer words right (ocrbatch doctor says which runs).", ENGINE_FLAG,
           to=ENGINE_OPTIONS),
    Option("runtime", "text", "auto", "rapidocr: what runs its recognizers: auto (OpenVINO in bfloat16 on CPUs "
           "with AMX, where it is 2-3x faster; onnxruntime elsewhere), openvino or onnxruntime (ocrbatch doctor says "
           "which runs).", ENGINE_FLAG, choices=("auto", "openvino", "onnxruntime"),
           to=ENGINE_OPTIONS),
    Option("script", "text", "auto", "rapidocr: which output classes its recognizers keep: auto (a Latin head, "
           "Latin/Greek/Cyrillic, digits, punctuation and symbols, for the first reader of a cascade, whose unsure "
           "lines and lines of other scripts the full head reads again), latin (Latin heads throughout: faster, "
           "other scripts are lost) or all (the full heads throughout; ocrbatch doctor says which run).",
           ENGINE_FLAG, choices=("auto", "latin", "all"), to=ENGINE_OPTIONS),
    Option("keep_furniture", "switch", False, "Keep running heads and feet, page numbers and margin stamps (left "
           "out by default; rapidocr and PDF text layers).", ENGINE_FLAG, to=ENGINE_OPTIONS),
    Option("debug_layout", "path", None, "Write a picture of each page's layout here: its blocks, their kinds and "
           "reading order, and what set each apart (rapidocr and PDF text layers).", frozenset({RUN, ENGINE}),
           metavar="DIR", to=ENGINE_OPTIONS),
    Option("devices", "text", "auto", "Where engines run: auto (every GPU for a GPU engine), cpu, 0,1 or cuda:0; "
           "one worker per device.", ENGINE_FLAG, under_ray=_ray_devices_problem, to=RUN_CONFIG),
    Option("dpi", "int", 150, "Resolution for rendering PDF pages.", ENGINE_FLAG, least=36, most=1200, to=RUN_CONFIG),
    Option("text_layer", "text", "auto", "PDF pages with a real text layer: auto (use it, OCR the rest), off (OCR "
           "every page) or only (never OCR; other pages fail).", ENGINE_FLAG, choices=("auto", "off", "only"),
           to=RUN_CONFIG),
    Option("ray", "text", None, "Convert on a Ray cluster: auto (the cluster this machine is part of), local (a "
           "Ray instance just for this run) or the head's address.", frozenset({RUN, ENGINE}), metavar="ADDRESS",
           to=RUN_CONFIG),
    Option("ray_workers", "int", None, "Engine workers on the Ray cluster (default: one per GPU, or one per 2 CPUs "
           "for a CPU engine).", frozenset({RUN, ENGINE}), least=1, to=RUN_CONFIG),
    Option("max_batch", "batch", "auto", f"Pages one device runs at once: a number, or auto (from "
           f"{MAX_BATCH_START}, grown while pages/s gains and memory allows; CPU engines keep {MAX_BATCH_START}).",
           ENGINE_FLAG, least=1, to=RUN_CONFIG, parse=BatchCap.parse),
    Option("schedule", "text", "continuous", "deepseek-ocr2: continuous (pages leave and join the running batch "
           "between decoding steps) or static (whole batches).", ENGINE_FLAG, choices=("continuous", "static"),
           to=ENGINE_OPTIONS),
    Option("quantize", "text", "none", "deepseek-ocr2 weights: none, int8 or nf4 (4-bit), through bitsandbytes.",
           ENGINE_FLAG, choices=("none", "int8", "nf4"), to=ENGINE_OPTIONS),
    Option("backend", "text", "transformers", "deepseek-ocr2's runtime: transformers, or vllm (vLLM's engine and "
           "scheduler; pip install 'ocrbatch[vllm]').", ENGINE_FLAG, choices=("transformers", "vllm"),
           to=ENGINE_OPTIONS),
    Option("max_wait_ms", "int", 200, "Longest a page waits for its batch to fill.", ENGINE_FLAG, least=0,
           to=RUN_CONFIG),
    Option("workers", "int", None, "Decode threads (default: up to 4).", ENGINE_FLAG, short=("-j",), least=1,
           to=RUN_CONFIG),
    Option("max_pixels", "int", 200_000_000, "Largest image frame to read, in pixels (default 200 MP); a larger "
           "one fails as a page instead of taking gigabytes.", ENGINE_FLAG, least=1_000_000, to=RUN_CONFIG),
    Option("stall_timeout", "float", 1800.0, "Seconds pages may be in flight with none finished (a stuck engine) "
           "before they fail as stalled; convert then stops (exit 8).", ENGINE_FLAG, metavar="SECONDS",
           check=lambda v: None if v > 0 else "must be a positive number of seconds", to=RUN_CONFIG),
    Option("starve_ms", "int", 5000, "The longest a bulk page waits while interactive pages keep coming.",
           frozenset({ENGINE}), least=0, to=RUN_CONFIG),
    # -- a run -------------------------------------------------------------------------------------------
    Option("pages", "text", None, "Pages to convert, e.g. 1-3,7,10- .", frozenset({RUN}), check=_pages_problem,
           to=RUN_CONFIG, parse=PageSelection.parse),
    Option("shard", "text", None, "Convert only part I of N of the inputs (e.g. 1/3), for N machines sharing one "
           "input and one output folder without Ray: a hash of each file's path relative to its input root picks "
           "its part; each part has its own lock and manifest (manifest.shard-I-of-N.jsonl; `ocrbatch "
           "merge-manifests OUT` folds them into manifest.jsonl). Every machine must give the same N. Refused "
           "with --ray.", frozenset({RUN}), check=_shard_problem, metavar="I/N",
           under_ray="it splits the inputs among machines without Ray; with --ray the cluster shares the work "
                     "itself: leave one of them out", to=RUN_CONFIG, parse=Shard.parse),
    Option("force", "switch", False, "Redo pages an earlier run already finished.", frozenset({RUN}), to=RUN_CONFIG),
    Option("null", "switch", False, "Paths on stdin are NUL-separated (find -print0).", frozenset({RUN}),
           short=("-0",), to=RUN_CONFIG, attr="null_separated"),
    Option("json", "switch", False, "Print a JSON summary on stdout.", frozenset({RUN}), to=REPORT),
    Option("no_progress", "switch", False, "No live panel: plain timestamped lines every --log-every seconds.",
           frozenset({RUN}), to=REPORT),
    Option("log_every", "float", 30.0, "Seconds between plain progress lines and --metrics-file updates.",
           frozenset({RUN}), least=0, metavar="SECONDS", to=REPORT),
    Option("metrics_file", "path", None, "Keep Prometheus metrics here (node_exporter textfile format).",
           frozenset({RUN}), metavar="PATH", to=REPORT),
    Option("format", "text", "md", "md, or md,json: also a NAME.json beside each page's Markdown (its lines, boxes, "
           "scores, reading order; schema in ocrbatch/pagejson.py).", frozenset({RUN}), check=_formats_problem,
           to=RUN_CONFIG, attr="formats", parse=parse_formats),
    Option("join", "switch", False, "Also write one OUT/.../NAME.md per multi-page document, its pages joined with "
           "<!-- page N --> separators.", frozenset({RUN}), to=RUN_CONFIG),
    Option("review_below", "float", None, "List the pages whose confidence score is under SCORE (0-1) in the "
           "summary (--json: \"review\").", frozenset({RUN}), metavar="SCORE", most=1.0,
           check=lambda v: None if 0 < v <= 1 else "give a confidence between 0 and 1, e.g. 0.9", to=RUN_CONFIG),
    # -- the server --------------------------------------------------------------------------------------
    Option("host", "text", "127.0.0.1", "Address to listen on (0.0.0.0: every interface).", frozenset({SERVE}),
           check=lambda v: None if v.strip() else "is empty: give an address (0.0.0.0 for every interface)",
           to=SERVE_CONFIG),
    Option("port", "int", 8000, "Port to listen on (0: any free one, printed).", frozenset({SERVE}), short=("-p",),
           least=0, most=65535, to=SERVE_CONFIG),
    Option("max_upload_mb", "float", 50.0, "Larger uploads are refused (413).", frozenset({SERVE}),
           check=lambda v: None if 0 < v <= MAX_UPLOAD_MB else f"choose a size above 0 and at most {MAX_UPLOAD_MB} "
                                                               "(MB)", to=SERVE_CONFIG),
    Option("max_queue", "int", 256, "Most pages held for requests at once; a request beyond is refused (503 with "
           "Retry-After).", frozenset({SERVE}), least=1, to=SERVE_CONFIG),
    Option("token", "text", None, "Require Authorization: Bearer TOKEN on /v1/* (401 without).", frozenset({SERVE}),
           check=lambda v: None if v.strip() else "is empty", to=SERVE_CONFIG),
    Option("drain_s", "float", 30.0, "On SIGTERM, how long requests in flight may take to finish (then: 503, or "
           "a final error line).", frozenset({SERVE}), least=0, metavar="SECONDS", to=SERVE_CONFIG),
    Option("max_connections", "int", 1024, "Open connections beyond which only /healthz, /readyz and /metrics are "
           "answered (others: 503).", frozenset({SERVE}), least=1, to=SERVE_CONFIG),
    Option("header_timeout_s", "float", 10.0, "A request's headers must be in within this, from its first byte; "
           "else the connection is closed.", frozenset({SERVE}), metavar="SECONDS",
           check=lambda v: None if v > 0 else "must be positive", to=SERVE_CONFIG),
    Option("body_timeout_s", "float", 30.0, "The longest pause inside an upload's body, and the time a whole body may "
           "take beyond its bytes at 10 KB/s; then 408.",
           frozenset({SERVE}), metavar="SECONDS", check=lambda v: None if v > 0 else "must be positive",
           to=SERVE_CONFIG),
    # -- both commands -----------------------------------------------------------------------------------
    Option("quiet", "switch", False, "Print only errors.", frozenset({RUN, SERVE}), short=("-q",), to=REPORT),
    Option("verbose", "count", 0, "More detail, tracebacks on errors (serve: server logs; -vv every request).",
           frozenset({RUN, SERVE}), short=("-v",), least=0, to=REPORT),
)
OPTION = {o.name: o for o in OPTIONS}


def options(scope: str) -> list[Option]:
    """The rows of `scope` (RUN, SERVE or ENGINE), in the table's order."""
    return [o for o in OPTIONS if scope in o.scope]


def settle(scope: str, given: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Every option of `scope`: its value in `given` (flags given, or keywords) if there, else its OCRBATCH_*
    variable's in `environ`, else its default. Each checked and parsed by its row (the value its field holds:
    Option.checked); UsageError for an unknown name or a value refused, naming where it came from (the flag for
    `given`, the variable for `environ`)."""
    rows = options(scope)
    unknown = set(given) - {o.name for o in rows}
    if unknown:
        raise UsageError(f"unknown option(s) {', '.join(sorted(unknown))}; choose from "
                         f"{', '.join(sorted(o.name for o in rows))}")
    values = env_values(scope, environ or {}, skip=given)
    return {o.name: o.checked(given[o.name]) if o.name in given else values.get(o.name, o.initial) for o in rows}


def env_values(scope: str, environ: Mapping[str, str], skip: Iterable[str] = ()) -> dict[str, Any]:
    """The options of `scope` set in `environ` (OCRBATCH_DPI=300 → {"dpi": 300}), typed and checked; those named
    in `skip` (given otherwise, which wins) are not read."""
    skip = set(skip)
    for o in options(scope):
        # Set but empty reads as unset, except where the flag refuses an empty value (--pages '', -o '',
        # --token ''): a template not filled in is a mistake, not a wish for the default.
        if o.name not in skip and environ.get(o.env) == "" and o.kind in ("text", "path") and o.problem(""):
            flags = "/".join([*o.short, o.flag])
            raise UsageError(f"{o.env} is set but empty ({flags} {o.problem('')}): give a value, or unset it")
    return {o.name: o.read(environ[o.env]) for o in options(scope)
            if o.name not in skip and environ.get(o.env, "") != ""}


def check(values: Mapping[str, Any]) -> None:
    """UsageError, naming the flag, for the first value refused (names without a row are not checked)."""
    for name, value in values.items():
        if name in OPTION:
            OPTION[name].checked(value)


def options_help(scope: str) -> str:
    """The options of `scope`, a line each: name=default (OCRBATCH_NAME): help (for docstrings)."""
    return "\n".join(f"- {o.name}={o.default!r} ({o.env}): {o.help}" for o in options(scope))


def _default(name: str) -> Any:
    return OPTION[name].initial


# -- the typed configs, made from the table -----------------------------------------------------------------
CONFIGS: dict[str, type] = {}  # the typed configs, by name (Option.to): filled as each is defined
FILLS: dict[tuple[str, str], Option] = {(o.to, o.field): o for o in OPTIONS}  # (config, field) → its row
assert len(FILLS) == len(OPTIONS), "two rows fill one field"
_FIELD_TYPES = {"text": "str", "int": "int", "count": "int", "float": "float", "path": "Path", "switch": "bool",
                "batch": "BatchCap"}
BY_CODE = {"by": "code"}  # a field's metadata: set by the code (or a benchmark), not an option: no row


def by_code(default: Any = MISSING, *, factory: Any = MISSING) -> Any:
    """A field of a typed config that no row fills: the code sets it (the run's inputs, buffer sizes...)."""
    return field(default=default, default_factory=factory, metadata=BY_CODE)


def typed_config(cls: type) -> type:
    """Make `cls` a frozen dataclass, typed config `cls.__name__` (a name of CONFIG_NAMES), with a field for every
    row of OPTIONS whose `to` names it: a field declared in the class keeps its declaration (its type, a comment,
    a default of its own for direct construction), the others are added here, typed by the row's kind, defaulting
    to the row's default. A new option is its row and the code that reads the field: nothing to copy by hand."""
    name = cls.__name__
    assert name in CONFIG_NAMES, name
    made = _with_fields(cls, [o for o in OPTIONS if o.to == name])
    CONFIGS[name] = made
    return made


def _with_fields(cls: type, rows: Iterable[Option]) -> type:
    """`cls` as a frozen dataclass with a field for each of `rows` it does not declare."""
    notes = dict(cls.__dict__.get("__annotations__", {}))
    for o in rows:
        if o.field not in notes:
            kind = "Any" if o.parse is not None else _FIELD_TYPES[o.kind]
            notes[o.field] = kind if o.default is not None else f"{kind} | None"
            setattr(cls, o.field, o.initial)
    cls.__annotations__ = notes
    return dataclass(frozen=True)(cls)


def rows_as_fields(select: Callable[[Option], bool]) -> Callable[[type], type]:
    """A class decorator: `cls` a frozen dataclass with a field for each row `select` picks (_with_fields)."""
    return lambda cls: _with_fields(cls, filter(select, OPTIONS))


def engine_side(o: Option) -> bool:
    """A row of RunConfig's that is the engine's side (a Converter's keyword, kept across runs): ServiceConfig's."""
    return o.to == RUN_CONFIG and ENGINE in o.scope


def row_of(config: type, name: str) -> Option | None:
    """The row that fills field `name` of typed config `config`, or None (a field the code sets)."""
    return FILLS.get((config.__name__, name))


def validate(config: Any) -> None:
    """UsageError, naming the flag, for the first field of a typed config whose value its row refuses (a config
    made directly, not by `configure`: tests, benchmarks)."""
    for f in fields(config):
        row = row_of(type(config), f.name)
        value = getattr(config, f.name)
        if row is not None and value is not None:
            row.checked(value)


def configure(config: type, values: Mapping[str, Any], *, strict: bool = False, **own: Any) -> Any:
    """A typed config from option values: each field a row fills takes `values[row's name]` (or by the field's
    name), checked and parsed by the row, and its default where the value is absent or None; a field that is a
    typed config itself (RunConfig.engine_options) is made from the same values; `own` sets fields directly (the
    code's: a run's inputs). `values` are keywords' values (Converter(dpi=300)) or values settled already
    (`settle`'s, parsed). With `strict`, a name in `values` that fills no field (a field the code sets, named,
    is taken as it is) is a UsageError."""
    used: set[str] = set()
    made = _configure(config, values, own, used)
    if strict and set(values) - used:
        raise UsageError(f"unknown option(s) {', '.join(sorted(set(values) - used))}")
    return made


def _configure(config: type, values: Mapping[str, Any], own: Mapping[str, Any], used: set[str]) -> Any:
    kwargs = dict(own)
    for f in fields(config):
        if f.name in kwargs:
            continue
        row = row_of(config, f.name)
        names = [f.name] if row is None else list(dict.fromkeys((row.name, f.name)))
        given = [n for n in names if values.get(n) is not None]
        used.update(n for n in names if n in values)
        if f.default_factory in CONFIGS.values() and not given:  # a typed config in this one
            kwargs[f.name] = _configure(f.default_factory, values, {}, used)
        elif given:
            kwargs[f.name] = values[given[0]] if row is None else row.checked(values[given[0]])
    return config(**kwargs)


def with_values(config: Any, values: Mapping[str, Any]) -> Any:
    """`config` with the fields `values` names (by a row's name or its field's) set, each checked and parsed by
    its row; UsageError for a name that fills none of its fields."""
    rows = {n: o for o in OPTIONS if o.to == type(config).__name__ for n in (o.name, o.field)}
    unknown = set(values) - set(rows)
    if unknown:
        raise UsageError(f"unknown option(s) {', '.join(sorted(unknown))}; choose from "
                         f"{', '.join(sorted(set(rows)))}")
    return dataclasses.replace(config, **{rows[n].field: rows[n].checked(v) for n, v in values.items()})


@typed_config
class EngineOptions:
    """What an engine reads: the rows of OPTIONS to ENGINE_OPTIONS (their fields declared here to document them),
    then the pipeline's settings for it. Each engine documents which ones it uses."""

    model: str | None = _default("model")  # weights: a local folder or a Hugging Face id
    dtype: str = _default("dtype")  # auto | bfloat16 | float16 | float32
    prompt: str = _default("prompt")
    max_new_tokens: int = _default("max_new_tokens")
    threads: int | None = _default("threads")  # CPU threads (rapidocr: tasks in parallel; torch on a CPU)
    quantize: str = _default("quantize")  # none | int8 | nf4 (bitsandbytes weights)
    schedule: str = _default("schedule")  # continuous: rows leave and join between decoding steps; static: batches
    model_size: str = _default("model_size")  # rapidocr: auto (the cascade), small, or tiny (engines/rapid.py)
    reread_below: float = _default("reread_below")  # rapidocr's cascade: lines less sure than it are read again
    int8: bool = _default("int8")  # rapidocr: static int8 copies of the recognizers (engines/int8.py)
    runtime: str = _default("runtime")  # rapidocr: auto | openvino | onnxruntime (engines/runtimes.py)
    keep_furniture: bool = _default("keep_furniture")  # keep running heads and feet, page numbers, margin stamps
    backend: str = _default("backend")  # deepseek-ocr2: transformers or vllm (engines/registry.py: _BACKENDS)
    debug_layout: Path | None = _default("debug_layout")  # a folder: a picture of each page's layout
    # -- set by the pipeline (pipeline/service.py) or by benchmarks, not by users --
    min_new_tokens: int = by_code(0)  # benchmarks: equal to max_new_tokens, every page gets exactly that many
    buffer_pages: int = by_code(0)  # pages whose preprocessed inputs may wait in buffers at once; 0: the default
    pin_memory: bool | None = by_code(None)  # page-locked host buffers; None: when CUDA is available
    batch_pages: int = by_code(0)  # most pages one batch can hold (device buffers are sized for it); 0: grow
    reserve_buffers: bool = by_code(True)  # make every buffer at once (a fixed cap); False: as pages need them
    page_lengths: tuple[tuple[str, int], ...] = by_code(())  # benchmarks: (file name, tokens) each page ends after

    def __post_init__(self) -> None:
        validate(self)


MODEL_SIZES = OPTION["model_size"].choices  # --model-size (engines/rapid.py: PROFILES)


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask, which containers and taskset narrow)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def default_workers() -> int:
    return min(4, available_cpus())


class _Batching:
    """What ServiceConfig and RunConfig derive from their batching fields (max_batch, max_wait_ms, starve_ms)."""

    @property
    def max_batch_auto(self) -> bool:
        """--max-batch auto: the cap grows while throughput gains (gpu/throughput.py)."""
        return getattr(self.max_batch, "auto", False)

    @property
    def max_wait_s(self) -> float:
        return self.max_wait_ms / 1000.0

    @property
    def starve_s(self) -> float:
        return self.starve_ms / 1000.0


@rows_as_fields(engine_side)
class ServiceConfig(_Batching):
    """The engine side of a run, kept by a Converter across runs (pipeline/service.py): the engine's options and
    RunConfig's fields of the engine side (the rows to RUN_CONFIG whose scope has ENGINE: engine_side), of the
    same names: RunConfig.service copies them. A row added there is a field here too (_with_fields)."""

    engine: str = _default("engine")
    engine_options: EngineOptions = field(default_factory=EngineOptions)
    devices: str = _default("devices")
    max_batch: int = MAX_BATCH_START  # the first cap (a BatchCap from --max-batch: `.auto`, it grows)
    max_wait_ms: int = _default("max_wait_ms")
    workers: int = 4  # decode threads feeding it (sizes the buffers)
    ray: str | None = None
    starve_ms: int = _default("starve_ms")  # the longest a bulk page waits while interactive pages come
    stall_timeout: float = _default("stall_timeout")  # a device with pages in hand and none finished for this long


@typed_config
class RunConfig(_Batching):
    """One run: the rows of OPTIONS to RUN_CONFIG (a field declared here documents it, or gives a default of its
    own to direct construction; the others come from their rows: see typed_config), and the engine's."""

    inputs: tuple[str, ...] = by_code()
    output: Path
    engine: str = _default("engine")
    engine_options: EngineOptions = by_code(factory=EngineOptions)
    devices: str = _default("devices")  # resolved when the run starts (gpu/device.py)
    dpi: int = _default("dpi")
    # The first cap on pages per batch (rows decoding at once); --max-batch auto (a BatchCap, `auto`): the cap
    # grows while throughput gains (gpu/throughput.py). Made directly (tests, benchmarks), a fixed 8.
    max_batch: int = MAX_BATCH_START
    max_wait_ms: int = _default("max_wait_ms")
    workers: int = field(default_factory=default_workers)  # --workers; None (its default): up to 4
    pages: PageSelection | None = None
    shard: Shard | None = None  # --shard I/N: only this part of the sources (its own lock and manifest)
    force: bool = False
    null_separated: bool = False  # `-` reads NUL-separated paths (find -print0)
    text_layer: str = _default("text_layer")  # auto (use it when usable), off (always OCR), only (never OCR)
    ray: str | None = None  # convert on a Ray cluster: auto, local, or the head's address (pipeline/remote.py)
    ray_workers: int | None = None  # actors on it; None: one per GPU, or per `threads` CPUs
    max_pixels: int = _default("max_pixels")  # an image frame larger than this fails as a page (images.py)
    # The watchdog: pages in flight and none finished for this long → they fail, the run stops (exit 8). Long
    # enough for an 8,192-token page and its one retry on a slow GPU (a T4 decodes ~10 tokens/s per row).
    stall_timeout: float = _default("stall_timeout")
    # What a run writes besides each page's Markdown (issue 22): `formats` ("md", or "md", "json": NAME.json beside
    # each page, pagejson.py), `join` (one NAME.md per multi-page document, pipeline/outputs.py), `review_below`
    # (pages whose confidence score is lower are listed in the summary: --json's "review").
    formats: tuple[str, ...] = _default("format")
    join: bool = _default("join")
    review_below: float | None = _default("review_below")

    def __post_init__(self) -> None:
        if not self.inputs:
            raise UsageError("no inputs given")
        validate(self)
        if self.ray_workers is not None and not self.ray:
            raise UsageError("--ray-workers needs --ray")
        if self.ray:  # the rows whose values --ray refuses (OPTIONS: under_ray)
            for part in (self, self.engine_options):
                for f in fields(part):
                    o = row_of(type(part), f.name)
                    if o is not None and (why := o.ray_problem(getattr(part, f.name))) is not None:
                        raise UsageError(f"{o.flag} with --ray: {why}")

    @classmethod
    def build(cls, inputs: Iterable[str], output: str | os.PathLike, **values: Any) -> "RunConfig":
        """From options by their names (rows of OPTIONS, to this config or to EngineOptions: `pages` may be text,
        `max_batch` a number or auto, `workers` None for the default), and fields the code sets (EngineOptions'
        `min_new_tokens`...) by theirs. UsageError for a name that is neither."""
        return configure(cls, values, strict=True, inputs=tuple(inputs), output=Path(output))

    def rerun(self, inputs: Iterable[str], output: str | os.PathLike, **values: Any) -> "RunConfig":
        """This configuration for another run: its inputs, its output, and its own options (`values`, by a row's
        name or its field's: pages, force, null_separated, ...), each checked and parsed by its row."""
        unknown = set(values) - {n for o in RUN_OWN for n in (o.name, o.field)}
        if unknown:  # the engine's side is the Converter's, kept across runs
            raise UsageError(f"unknown option(s) of a run {', '.join(sorted(unknown))}; choose from "
                             f"{', '.join(o.field for o in RUN_OWN)}")
        return with_values(dataclasses.replace(self, inputs=tuple(inputs), output=Path(output)), values)

    @property
    def service(self) -> ServiceConfig:
        """The engine side: ServiceConfig's fields, copied by name."""
        return ServiceConfig(**{f.name: getattr(self, f.name) for f in fields(ServiceConfig)})


# A run's own options (not the engine's, which a Converter keeps across runs): Converter.convert's keywords, by
# their fields' names (pages, force, null_separated, formats, ...).
RUN_OWN = tuple(o for o in OPTIONS if o.to == RUN_CONFIG and ENGINE not in o.scope and o.name != "output")


@typed_config
class Report:
    """How a command reports on the terminal: the rows to REPORT (--json, --quiet, -v, --no-progress,
    --log-every, --metrics-file), every field made from its row."""
