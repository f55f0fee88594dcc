"""The option table: `OPTIONS`, a row (rows.Option) for every option of `convert`, `serve` and the Converter,
and the functions that read values through it (settle, env_values, check). See config.py's docstring."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from .engines import catalog
from .errors import UsageError
from .rows import ENGINE, ENGINE_FLAG, ENGINE_OPTIONS, REPORT, RUN, RUN_CONFIG, SERVE, SERVE_CONFIG, Option
from .values import FORMATS, MAX_BATCH_START, BatchCap, PageSelection, Shard, _formats_problem, parse_formats


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



def _pages_problem(text: str) -> str | None:
    try:
        PageSelection.parse(text)
    except UsageError as exc:
        return str(exc).split(": ", 1)[-1]
    return None


MAX_UPLOAD_MB = 1 << 20  # --max-upload-mb's largest (1 TB): beyond, and inf or nan, is not a size a server can use

_OWN: tuple[Option, ...] = (  # ocrbatch's own rows; each engine's are in engines/NAME/plugin.py
    # -- a run's output -----------------------------------------------------------------------------------
    Option("output", "path", None, "Folder for the Markdown files and manifest.jsonl (required).", frozenset({RUN}),
           short=("-o",), metavar="DIR", to=RUN_CONFIG),
    # -- the engine --------------------------------------------------------------------------------------
    Option("engine", "text", "rapidocr", f"{catalog.describe(first='rapidocr')}. Each engine's own options "
           "follow under its name.", ENGINE_FLAG, short=("-e",), metavar="NAME", choices_of=catalog.names,
           to=RUN_CONFIG),
    Option("threads", "int", None, "CPU threads for the engine (rapidocr: default the CPUs available, up to 8; "
           "with --ray, the CPUs each worker takes, default 2).", ENGINE_FLAG, least=1, to=ENGINE_OPTIONS),
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
    Option("force", "switch", False, "Redo pages an earlier run already finished (to OCR pages that have a "
           "text layer: --force-ocr).", frozenset({RUN}), to=RUN_CONFIG),
    Option("null", "switch", False, "Paths on stdin are NUL-separated (find -print0).", frozenset({RUN}),
           short=("-0",), to=RUN_CONFIG, attr="null_separated"),
    Option("json", "switch", False, "Print a JSON summary on stdout.", frozenset({RUN}), to=REPORT),
    Option("no_progress", "switch", False, "No live panel: plain timestamped lines every --log-every seconds.",
           frozenset({RUN}), to=REPORT),
    Option("log_every", "float", 30.0, "Seconds between plain progress lines and --metrics-file updates.",
           frozenset({RUN}), least=0, metavar="SECONDS", to=REPORT),
    Option("metrics_file", "path", None, "Keep Prometheus metrics here (node_exporter textfile format).",
           frozenset({RUN}), metavar="PATH", to=REPORT),
    Option("format", "text", "md", f"Any of {','.join(FORMATS)}; the Markdown is always written. json: NAME.json "
           "beside each page's Markdown (its lines, boxes, scores, reading order; schema in ocrbatch/pagejson.py); "
           "txt: NAME.txt, plain text; hocr: NAME.hocr; pdf: one searchable NAME.pdf per document (docs: "
           "Converting).", frozenset({RUN}), check=_formats_problem,
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
OPTIONS: tuple[Option, ...] = (*_OWN, *catalog.option_rows(_OWN))  # the engines' rows after ocrbatch's
OPTION = {o.name: o for o in OPTIONS}

# The headings --help shows ocrbatch's own rows under, in this order; an engine's own rows are under its plug-in's
# title, after RUN_CONTROL (`panel`). A row added to the table gets a heading here (tests/test_ui_cli.py checks).
IN_OUT, RUN_CONTROL, FORMATS_PANEL, SERVER, LOGGING = ("Input and output", "Run control", "Output formats", "Server",
                                                       "Logging")
PANELS: dict[str, tuple[str, ...]] = {
    IN_OUT: ("output", "pages", "force", "null", "text_layer", "dpi", "max_pixels", "shard"),
    RUN_CONTROL: ("engine", "devices", "threads", "workers", "max_batch", "max_wait_ms", "stall_timeout", "ray",
                  "ray_workers", "starve_ms"),
    FORMATS_PANEL: ("format", "join", "review_below", "keep_furniture"),
    SERVER: ("host", "port", "max_upload_mb", "max_queue", "token", "drain_s", "max_connections", "header_timeout_s",
             "body_timeout_s"),
    LOGGING: ("quiet", "verbose", "json", "no_progress", "log_every", "metrics_file", "debug_layout"),
}
_PANEL_OF = {name: title for title, names in PANELS.items() for name in names}

# Flags that give a row a value under the name users of other tools know it by: flag → (row, value, help).
ALIASES: dict[str, tuple[str, str, str]] = {
    "--force-ocr": ("text_layer", "off", "OCR every page, even where a PDF page has a text layer (--text-layer off; "
                                         "as ocrmypdf's, marker's and docling's --force-ocr)."),
}


def panel(o: Option) -> str:
    """The heading `o` is under in --help: its engine's title for an engine's row, else its PANELS heading
    (RUN_CONTROL for a row not placed there yet)."""
    owner = catalog.owner(o.name)
    if owner is not None:
        return owner.title or f"{owner.name} engine"
    return _PANEL_OF.get(o.name, RUN_CONTROL)


def panel_order() -> list[str]:
    """The headings in the order --help shows them."""
    first = OPTION["engine"].default
    engines = [t for _, t in sorted(((p.name != first), p.title or f"{p.name} engine")
                                    for p in catalog.plugins().values() if p.options)]
    return [IN_OUT, RUN_CONTROL, *dict.fromkeys(engines), FORMATS_PANEL, SERVER, LOGGING]


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
