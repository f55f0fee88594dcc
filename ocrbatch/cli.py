"""The command line: options → a Converter → convert(); errors → exit codes. No logic lives here.

Every `convert` option may also come from an OCRBATCH_* variable (config.ENV); a flag given wins."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Callable, NoReturn, Optional

import typer

from . import __version__
from .config import ENV
from .errors import ExitCode, OcrbatchError, UsageError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Batch-convert scanned PDFs and page images to Markdown, one file per page.")
log = logging.getLogger("ocrbatch")


class _StderrHandler(logging.Handler):
    """Writes to whatever sys.stderr is at the time (a live display may have replaced it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = f"ocrbatch: {record.levelname.lower()}: {record.getMessage()}"
            if record.exc_info and log.isEnabledFor(logging.DEBUG):
                msg += "\n" + logging.Formatter().formatException(record.exc_info)
            sys.stderr.write(msg + "\n")
            sys.stderr.flush()
        except Exception:  # noqa: BLE001 - logging must never break a run
            self.handleError(record)


class _FileLineHandler(logging.Handler):
    """One timestamped line per finished file (the `ocrbatch.files` records, shown with -v)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            from .ui import plain

            sys.stderr.write(plain.line("file", getattr(record, "fields", {"file": record.getMessage()})) + "\n")
            sys.stderr.flush()
        except Exception:  # noqa: BLE001 - logging must never break a run
            self.handleError(record)


def _setup_logging(quiet: bool, verbose: int) -> None:
    log.handlers[:] = [_StderrHandler()]
    log.propagate = False
    log.setLevel(logging.ERROR if quiet else logging.DEBUG if verbose else logging.WARNING)
    files = logging.getLogger("ocrbatch.files")
    files.handlers[:] = [_FileLineHandler()]
    files.propagate = False
    files.setLevel(logging.INFO if verbose and not quiet else logging.WARNING)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"ocrbatch {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    pass


def _opt(name: str, default, *flags: str, **kw):
    """A `convert` option that may also come from its OCRBATCH_* variable (the flag wins)."""
    return typer.Option(default, *flags, envvar=ENV[name], show_envvar=False, **kw)


@app.command()
def convert(
    inputs: list[str] = typer.Argument(..., help="Files, folders, or - to read a list of paths from stdin."),
    output: Path = _opt("output", ..., "-o", "--output", help="Folder for the Markdown files and manifest.jsonl."),
    engine: str = _opt("engine", "rapidocr", "--engine", "-e",
                       help="rapidocr (embedded, CPU), deepseek-ocr2 (GPU, needs --model) or fake."),
    model: Optional[str] = _opt("model", None, "--model", "-m",
                                help="deepseek-ocr2 weights: a local folder or a Hugging Face id."),
    dtype: str = _opt("dtype", "auto", "--dtype", help="auto, bfloat16, float16 or float32 (deepseek-ocr2)."),
    prompt: str = _opt("prompt", "markdown", "--prompt",
                       help="markdown, free, or your own text containing <image> (deepseek-ocr2)."),
    max_new_tokens: int = _opt("max_new_tokens", 8192, "--max-new-tokens",
                               help="Most tokens per page (deepseek-ocr2)."),
    threads: Optional[int] = _opt("threads", None, "--threads",
                                  help="CPU threads for the engine (rapidocr: default the CPUs available, "
                                       "up to 8; with --ray, the CPUs each worker takes, default 2)."),
    model_size: str = _opt("model_size", "small", "--model-size",
                           help="rapidocr: small (PP-OCRv6 small models) or tiny (about 3x faster, fewer words "
                                "read right; unsure lines read again with small)."),
    keep_furniture: bool = _opt("keep_furniture", False, "--keep-furniture",
                                help="Keep running heads and feet, page numbers and margin stamps (left out by "
                                     "default; rapidocr and PDF text layers)."),
    devices: str = _opt("devices", "auto", "--devices",
                        help="Where engines run: auto (every GPU for a GPU engine), cpu, 0,1 or cuda:0; "
                             "one worker per device."),
    dpi: int = _opt("dpi", 150, "--dpi", help="Resolution for rendering PDF pages."),
    text_layer: str = _opt("text_layer", "auto", "--text-layer",
                           help="PDF pages with a real text layer: auto (use it, OCR the rest), "
                                "off (OCR every page) or only (never OCR; other pages fail)."),
    ray: Optional[str] = _opt("ray", None, "--ray", metavar="ADDRESS",
                              help="Convert on a Ray cluster: auto (the cluster this machine is part "
                                   "of), local (a Ray instance just for this run) or the head's address."),
    ray_workers: Optional[int] = _opt("ray_workers", None, "--ray-workers",
                                      help="Engine workers on the Ray cluster (default: one per GPU, "
                                           "or one per 2 CPUs for a CPU engine)."),
    max_batch: str = _opt("max_batch", "auto", "--max-batch",
                          help="Pages one device runs at once: a number, or auto (from 8, grown while pages/s "
                               "gains and memory allows)."),
    schedule: str = _opt("schedule", "continuous", "--schedule",
                         help="deepseek-ocr2: continuous (pages leave and join the running batch between "
                              "decoding steps) or static (whole batches)."),
    quantize: str = _opt("quantize", "none", "--quantize",
                         help="deepseek-ocr2 weights: none, int8 or nf4 (4-bit), through bitsandbytes."),
    max_wait_ms: int = _opt("max_wait_ms", 200, "--max-wait-ms",
                            help="Longest a page waits for its batch to fill."),
    workers: Optional[int] = _opt("workers", None, "--workers", "-j", help="Decode threads (default: up to 4)."),
    pages: Optional[str] = _opt("pages", None, "--pages", help="Pages to convert, e.g. 1-3,7,10- ."),
    max_pixels: int = _opt("max_pixels", 200_000_000, "--max-pixels",
                           help="Largest image frame to read, in pixels (default 200 MP); a larger one "
                                "fails as a page instead of taking gigabytes."),
    force: bool = _opt("force", False, "--force", help="Redo pages an earlier run already finished."),
    null: bool = _opt("null", False, "-0", "--null", help="Paths on stdin are NUL-separated (find -print0)."),
    as_json: bool = _opt("json", False, "--json", help="Print a JSON summary on stdout."),
    formats: str = _opt("format", "md", "--format",
                        help="md, or md,json: a NAME.json beside each page's Markdown (its lines, boxes, scores, "
                             "reading order; schema in ocrbatch/pagejson.py)."),
    join: bool = _opt("join", False, "--join",
                      help="Also write one OUT/.../NAME.md per multi-page document, its pages joined with "
                           "<!-- page N --> separators."),
    review_below: Optional[float] = _opt("review_below", None, "--review-below", metavar="SCORE",
                                         help="List the pages whose confidence is under SCORE (0-1) in the "
                                              "summary (--json: \"review\")."),
    quiet: bool = _opt("quiet", False, "-q", "--quiet", help="Print only errors."),
    no_progress: bool = _opt("no_progress", False, "--no-progress",
                             help="No live panel: plain timestamped lines every --log-every seconds."),
    log_every: float = _opt("log_every", 30.0, "--log-every", metavar="SECONDS",
                            help="Seconds between plain progress lines and --metrics-file updates."),
    metrics_file: Optional[Path] = _opt("metrics_file", None, "--metrics-file", metavar="PATH",
                                        help="Keep Prometheus metrics here (node_exporter textfile format)."),
    verbose: int = _opt("verbose", 0, "-v", "--verbose", count=True, help="More detail; tracebacks on errors."),
) -> None:
    """Convert documents to Markdown: OUT/NAME.md per image, OUT/NAME/page-0001.md per PDF page.
    Every option can also be set by an OCRBATCH_* variable (OCRBATCH_ENGINE, OCRBATCH_MAX_BATCH, ...)."""
    _setup_logging(quiet, verbose)

    def convert_all() -> ExitCode:
        from .converter import Converter

        converter = Converter(engine=engine, model=model, devices=devices, max_batch=max_batch, dtype=dtype,
                              prompt=prompt, max_new_tokens=max_new_tokens, threads=threads, dpi=dpi,
                              model_size=model_size, keep_furniture=keep_furniture, text_layer=text_layer,
                              ray=ray, ray_workers=ray_workers, max_wait_ms=max_wait_ms, workers=workers,
                              max_pixels=max_pixels, schedule=schedule, quantize=quantize)
        return _run_convert(converter, inputs, output, pages=pages, force=force, null=null, as_json=as_json,
                            quiet=quiet, progress=not no_progress, log_every=log_every, metrics_file=metrics_file,
                            verbose=verbose, formats=formats, join=join, review_below=review_below)

    _exit_with(convert_all, verbose)


def _exit_with(command: Callable[[], int], verbose: int) -> NoReturn:
    """Run a command and exit with its code; the one place where errors become exit codes."""
    try:
        code = command()
    except OcrbatchError as exc:
        log.error("%s", exc, exc_info=verbose > 0)
        code = exc.exit_code
    except KeyboardInterrupt:
        log.error("interrupted; finished pages are kept, rerun to resume")
        code = ExitCode.INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - a bug: one line unless -v
        log.error("unexpected %s: %s (rerun with -v for the traceback)", type(exc).__name__, exc,
                  exc_info=verbose > 0)
        code = ExitCode.INTERNAL
    raise typer.Exit(int(code))


def _run_convert(converter, inputs: list[str], output: Path, *, pages: str | None, force: bool, null: bool,
                 as_json: bool, quiet: bool, progress: bool, log_every: float, metrics_file: Path | None,
                 verbose: int = 0, formats: str = "md", join: bool = False,
                 review_below: float | None = None) -> ExitCode:
    from .pipeline.signals import catch_stop_signals
    from .ui.reporter import stderr_is_terminal

    to_stdout = str(output) == "-"
    follow, work = (_stdout_run(inputs, as_json, formats, join) if to_stdout else (None, output))
    reporter = _reporter(quiet, progress, log_every, metrics_file, converter.engine, output, verbose)
    try:
        with converter, reporter, catch_stop_signals():  # SIGINT/SIGTERM: stop taking pages, end with a summary
            summary = converter.convert(inputs, work, pages=pages, force=force, null_separated=null,
                                        stdin=sys.stdin if "-" in inputs else None, watch=reporter.watch,
                                        formats=formats, join=join, review_below=review_below, follow=follow)
            if to_stdout:
                summary.output = "-"
            reporter.finish(summary)
    finally:
        if to_stdout:
            import shutil

            shutil.rmtree(work, ignore_errors=True)
    for source, key in summary.renamed:
        log.warning("%s: another input maps to the same output name; written as %s", source, key)
    if not quiet and (verbose or stderr_is_terminal()):
        from .ui import print_summary  # off a terminal without -v, the reporter's `finished` line is the summary

        print_summary(summary)
    if summary.stopped_by is not None:  # a signal or a write error ended the run before its end
        log.error("%s", summary.stopped_by)
    if as_json:
        sys.stdout.write(json.dumps(summary.as_dict(), indent=2) + "\n")
    return summary.exit_code


def _stdout_run(inputs: list[str], as_json: bool, formats: str, join: bool):
    """`-o -`: a printer of the pages to stdout, and the private folder the run writes into."""
    import tempfile

    from .pipeline.stdout import StdoutPrinter

    for clash, why in ((as_json, "--json prints on stdout"), (join, "--join writes files"),
                       ("json" in formats, "--format json writes files")):
        if clash:
            raise UsageError(f"-o - puts the Markdown on stdout; {why}: give -o a folder for that")
    several = len(inputs) > 1 or any(i == "-" or Path(i).is_dir() for i in inputs)
    return StdoutPrinter(sys.stdout.buffer, announce=several), Path(tempfile.mkdtemp(prefix="ocrbatch-stdout-"))


def _reporter(quiet, progress, log_every, metrics_file, engine, output, verbose=0):
    from .metrics import MetricsFile
    from .ui import Reporter

    metrics = MetricsFile(metrics_file) if metrics_file is not None else None
    return Reporter(mode=Reporter.choose_mode(quiet=quiet, progress=progress), log_every=log_every,
                    metrics=metrics, about={"engine": engine, "output": str(output)}, verbose=bool(verbose))


@app.command()
def bench(
    arch: str = typer.Option("tiny", "--arch",
                             help="full: a random model of the published size (~3.4B parameters), on a GPU; "
                                  "tiny: the same architecture at toy width, on a CPU."),
    batch_sizes: str = typer.Option("1,2,4,8,16,32", "--batch-sizes", help="Batch sizes to run, one row each."),
    pages: Optional[int] = typer.Option(None, "--pages",
                                        help="Pages per batch size (default: six batches' worth, at least 8)."),
    pages_dir: Optional[Path] = typer.Option(None, "--pages-dir",
                                             help="Page images to use (cycled) instead of drawn A4 pages."),
    max_new_tokens: Optional[int] = typer.Option(None, "--max-new-tokens",
                                                 help="Most tokens a page generates (default: 1024 full, 2048 tiny "
                                                      "with --lengths mix; 128 and 8 fixed)."),
    loop_pages: int = typer.Option(4, "--loop-pages", help="Pages timed in the per-page loop baseline."),
    device: str = typer.Option("auto", "--device", help="auto (cuda:0 for full, cpu for tiny), cpu, 0 or cuda:1."),
    workers: Optional[int] = typer.Option(None, "--workers", "-j", help="Decode threads (default: up to 4)."),
    budget_s: Optional[float] = typer.Option(None, "--budget-s", metavar="SECONDS",
                                             help="Start no new batch size after this many seconds."),
    lengths: str = typer.Option("mix", "--lengths",
                                help="mix: page lengths drawn log-normal around --median-tokens, 1 in 20 to the "
                                     "limit --max-new-tokens; fixed: every page --max-new-tokens."),
    median_tokens: Optional[int] = typer.Option(None, "--median-tokens",
                                                help="The mix's median length (default: 1000/8192 of "
                                                     "--max-new-tokens, the realistic mix's proportion: "
                                                     "--max-new-tokens 8192 gives its median of 1000)."),
    schedules: str = typer.Option("static,continuous", "--schedules", help="Schedules to run, one row each."),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON instead of a table."),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="No progress lines on stderr."),
    verbose: int = typer.Option(0, "-v", "--verbose", count=True, help="Tracebacks on errors."),
) -> None:
    """Throughput of the pipeline on a random DeepSeek-OCR-2 (no weights needed): pages/s per batch size,
    GPU utilization, peak VRAM, buffer allocations after warm-up, and the gain over a one-page-at-a-time loop."""
    _setup_logging(quiet, verbose)

    def run_bench() -> int:
        from .bench import BenchConfig, main as bench_main, parse_sizes

        config = BenchConfig(arch=arch, batch_sizes=parse_sizes(batch_sizes), pages=pages, pages_dir=pages_dir,
                             max_new_tokens=max_new_tokens, loop_pages=loop_pages, device=device, workers=workers,
                             budget_s=budget_s, lengths=lengths, median_tokens=median_tokens,
                             schedules=tuple(p.strip() for p in schedules.split(",") if p.strip()))
        return bench_main(config, json_out=as_json, quiet=quiet)

    _exit_with(run_bench, verbose)


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (0.0.0.0: every interface)."),
    port: int = typer.Option(8000, "--port", "-p", help="Port to listen on (0: any free one, printed)."),
    engine: str = _opt("engine", "rapidocr", "--engine", "-e",
                       help="rapidocr, deepseek-ocr2 (needs --model), fake or fake-timed (load tests)."),
    model: Optional[str] = _opt("model", None, "--model", "-m",
                                help="deepseek-ocr2 weights: a local folder or a Hugging Face id."),
    dtype: str = _opt("dtype", "auto", "--dtype", help="auto, bfloat16, float16 or float32 (deepseek-ocr2)."),
    prompt: str = _opt("prompt", "markdown", "--prompt", help="markdown, free, or your own text (deepseek-ocr2)."),
    max_new_tokens: int = _opt("max_new_tokens", 8192, "--max-new-tokens",
                               help="Most tokens per page (deepseek-ocr2)."),
    threads: Optional[int] = _opt("threads", None, "--threads", help="CPU threads for the engine."),
    model_size: str = _opt("model_size", "small", "--model-size", help="rapidocr: small or tiny (faster)."),
    keep_furniture: bool = _opt("keep_furniture", False, "--keep-furniture",
                                help="Keep running heads and feet, page numbers and margin stamps."),
    devices: str = _opt("devices", "auto", "--devices", help="Where engines run: auto, cpu, 0,1 or cuda:0."),
    dpi: int = _opt("dpi", 150, "--dpi", help="Resolution for rendering PDF pages."),
    text_layer: str = _opt("text_layer", "auto", "--text-layer", help="PDF text layers: auto, off or only."),
    max_batch: int = _opt("max_batch", 8, "--max-batch", help="Most pages in one engine batch."),
    schedule: str = _opt("schedule", "continuous", "--schedule",
                         help="deepseek-ocr2: continuous (pages of every request leave and join the running "
                              "batch between decoding steps) or static (whole batches)."),
    quantize: str = _opt("quantize", "none", "--quantize", help="deepseek-ocr2 weights: none, int8 or nf4."),
    max_wait_ms: int = _opt("max_wait_ms", 200, "--max-wait-ms",
                            help="Longest a page waits for its batch to fill."),
    workers: Optional[int] = _opt("workers", None, "--workers", "-j", help="Decode threads (default: up to 4)."),
    max_upload_mb: float = typer.Option(50.0, "--max-upload-mb", help="Larger uploads are refused (413)."),
    max_queue: int = typer.Option(256, "--max-queue",
                                  help="Most pages held for requests at once; a request beyond is refused "
                                       "(503 with Retry-After)."),
    token: Optional[str] = typer.Option(None, "--token", envvar="OCRBATCH_TOKEN", show_envvar=True,
                                        help="Require Authorization: Bearer TOKEN on /v1/* (401 without)."),
    drain_s: float = typer.Option(30.0, "--drain-s", metavar="SECONDS",
                                  help="On SIGTERM, how long requests in flight may take to finish."),
    quiet: bool = _opt("quiet", False, "-q", "--quiet", help="Print only errors."),
    verbose: int = _opt("verbose", 0, "-v", "--verbose", count=True, help="Server logs (-vv: every request)."),
) -> None:
    """Serve conversions over HTTP: one loaded engine; concurrent requests share its batches."""
    _setup_logging(quiet, verbose)

    def run_server() -> int:
        try:
            from .serve.run import serve as serve_main
        except ImportError as exc:
            raise UsageError(f"ocrbatch serve needs the serve extra: pip install 'ocrbatch[serve]' ({exc})") from exc
        from .serve.config import ServeConfig

        config = ServeConfig(host=host, port=port, max_upload_mb=max_upload_mb, max_queue=max_queue,
                             token=token, drain_s=drain_s, window=2 * max(1, max_batch))
        options = dict(engine=engine, model=model, dtype=dtype, prompt=prompt, max_new_tokens=max_new_tokens,
                       threads=threads, model_size=model_size, keep_furniture=keep_furniture, devices=devices,
                       dpi=dpi, text_layer=text_layer, max_batch=max_batch, max_wait_ms=max_wait_ms,
                       workers=workers, schedule=schedule, quantize=quantize)
        return serve_main(options, config, verbose=verbose, quiet=quiet)

    _exit_with(run_server, verbose)


@app.command()
def doctor(as_json: bool = typer.Option(False, "--json", help="Print the findings as one JSON object.")) -> None:
    """Check the install: Python, torch and CUDA, GPUs, flash-attn, engines, cached models, onnxruntime."""
    from .doctor import main as doctor_main

    raise typer.Exit(doctor_main(as_json=as_json))


def main() -> None:
    app()
