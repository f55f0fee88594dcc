"""The command line: options → RunConfig → pipeline.run(); errors → exit codes. No logic lives here."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Optional

import typer

from . import __version__
from .config import EngineOptions
from .errors import ExitCode, OcrbatchError

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


def _setup_logging(quiet: bool, verbose: int) -> None:
    log.handlers[:] = [_StderrHandler()]
    log.propagate = False
    log.setLevel(logging.ERROR if quiet else logging.DEBUG if verbose else logging.WARNING)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"ocrbatch {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    pass


@app.command()
def convert(
    inputs: list[str] = typer.Argument(..., help="Files, folders, or - to read a list of paths from stdin."),
    output: Path = typer.Option(..., "-o", "--output", help="Folder for the Markdown files and manifest.jsonl."),
    engine: str = typer.Option("rapidocr", "--engine", "-e",
                               help="rapidocr (embedded, CPU), deepseek-ocr2 (GPU, needs --model) or fake."),
    model: Optional[str] = typer.Option(None, "--model", "-m",
                                        help="deepseek-ocr2 weights: a local folder or a Hugging Face id."),
    dtype: str = typer.Option("auto", "--dtype", help="auto, bfloat16, float16 or float32 (deepseek-ocr2)."),
    prompt: str = typer.Option("markdown", "--prompt",
                               help="markdown, free, or your own text containing <image> (deepseek-ocr2)."),
    max_new_tokens: int = typer.Option(8192, "--max-new-tokens", help="Most tokens per page (deepseek-ocr2)."),
    dpi: int = typer.Option(150, help="Resolution for rendering PDF pages."),
    max_batch: int = typer.Option(8, "--max-batch", help="Most pages in one engine batch."),
    max_wait_ms: int = typer.Option(200, "--max-wait-ms", help="Longest a page waits for its batch to fill."),
    workers: Optional[int] = typer.Option(None, "--workers", "-j", help="Decode threads (default: up to 4)."),
    pages: Optional[str] = typer.Option(None, "--pages", help="Pages to convert, e.g. 1-3,7,10- ."),
    force: bool = typer.Option(False, "--force", help="Redo pages an earlier run already finished."),
    null: bool = typer.Option(False, "-0", "--null", help="Paths on stdin are NUL-separated (find -print0)."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON summary on stdout."),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="Print only errors."),
    verbose: int = typer.Option(0, "-v", "--verbose", count=True, help="More detail; tracebacks on errors."),
) -> None:
    """Convert documents to Markdown: OUT/NAME.md per image, OUT/NAME/page-0001.md per PDF page."""
    _setup_logging(quiet, verbose)
    try:
        options = EngineOptions(model=model, dtype=dtype, prompt=prompt, max_new_tokens=max_new_tokens)
        code = _convert(inputs, output, engine, options, dpi, max_batch, max_wait_ms, workers, pages, force,
                        null, as_json, quiet)
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


def _convert(inputs, output, engine, options, dpi, max_batch, max_wait_ms, workers, pages, force, null, as_json,
             quiet) -> ExitCode:
    from .config import PageSelection, RunConfig, default_workers
    from .engines import registry
    from .pipeline.run import run
    from .ui import progress_reporter

    if engine not in registry.names():
        from .errors import UsageError

        raise UsageError(f"unknown engine {engine!r}; choose one of: {', '.join(registry.names())}")
    config = RunConfig(
        inputs=tuple(inputs), output=output, engine=engine, engine_options=options, dpi=dpi, max_batch=max_batch,
        max_wait_ms=max_wait_ms, workers=workers or default_workers(),
        pages=PageSelection.parse(pages) if pages else None, force=force, null_separated=null,
    )
    with progress_reporter(enabled=not quiet) as on_progress:
        summary = run(config, stdin=sys.stdin if "-" in inputs else None, on_progress=on_progress)
    for source, key in summary.renamed:
        log.warning("%s: another input maps to the same output name; written as %s", source, key)
    if not quiet:
        from .ui import print_summary

        print_summary(summary)
    if as_json:
        sys.stdout.write(json.dumps(summary.as_dict(), indent=2) + "\n")
    return summary.exit_code


def main() -> None:
    app()
