"""The command line: options → a Converter → convert(); errors → exit codes. No logic lives here.

The `convert` and `serve` options are made from one table (config.OPTIONS): each has its flag and its
OCRBATCH_* variable; a flag given wins. Their values, parsed by their rows (config.settle), go to the typed
configs by name: the Converter's keywords, `Converter.convert`'s (config.RUN_OWN), config.Report and
ServeConfig (config.configure)."""

from __future__ import annotations

import functools
import inspect
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any, Callable, NoReturn, Optional

import typer

from . import __version__, config, table
from .clihelp import PROG, alias, alias_name, completion_script, flag, label, panel_command, usage_line
from .config import Option
from .errors import ExitCode, OcrbatchError, UsageError

# Plain help (no Rich markup: `[vllm]` is text), -h as --help, and completion options of our own (_completion_script).
app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None, add_completion=False,
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help="Batch-convert scanned PDFs and page images to Markdown, one file per page.")
log = logging.getLogger("ocrbatch")


class _StderrHandler(logging.Handler):
    """Writes to whatever sys.stderr is at the time (a live display may have replaced it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            from .ui.fmt import safe  # a name's control characters shown, never acted on (a forged line, ESC)

            msg = f"ocrbatch: {record.levelname.lower()}: {safe(record.getMessage())}"
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


def _show_completion(ctx: typer.Context, value: Optional[str]) -> None:
    if value is None or ctx.resilient_parsing:
        return
    _setup_logging(quiet=False, verbose=0)
    _exit_with(lambda: typer.echo(completion_script(value)[1]) or ExitCode.OK, 0)


def _install_completion(ctx: typer.Context, value: Optional[str]) -> None:
    if value is None or ctx.resilient_parsing:
        return

    def install() -> int:
        from typer._completion_shared import install as typer_install

        shell, _ = completion_script(value)
        shell, path = typer_install(shell=shell, prog_name=PROG, complete_var=f"_{PROG.upper()}_COMPLETE")
        typer.echo(f"{shell} completion installed in {path}; it works in shells started from now on")
        return ExitCode.OK

    _setup_logging(quiet=False, verbose=0)
    _exit_with(install, 0)


_SHELL_HELP = "SHELL: bash, zsh, fish or powershell."


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit."),
          show_completion: Optional[str] = typer.Option(
              None, "--show-completion", metavar="SHELL", expose_value=False,
              callback=_show_completion, is_eager=True, help=f"Print the completion script for {_SHELL_HELP}"),
          install_completion: Optional[str] = typer.Option(
              None, "--install-completion", metavar="SHELL", expose_value=False,
              callback=_install_completion, is_eager=True, help=f"Install completion for {_SHELL_HELP}")) -> None:
    pass


def _given(ctx: typer.Context, rows: list[Option], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The rows' values given on the command line, read by their rows (a flag's text as its variable's), and
    those the alias flags given set."""
    given: dict[str, Any] = {}
    for o in rows:
        value = kwargs.pop(o.name, None)
        if _on_command_line(ctx, o.name):
            given[o.name] = value if o.kind in ("switch", "count") else o.read(value, label(o, value))
    for flag, (row, value, _) in table.ALIASES.items():
        if kwargs.pop(alias_name(flag), False) and any(o.name == row for o in rows):
            if row in given and given[row] != value:
                raise UsageError(f"{flag} is {table.OPTION[row].flag} {value}: give one of them")
            given[row] = table.OPTION[row].read(value, flag)
    return given


def _with_options(scope: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Gives the command a flag for every option of `scope` in config.OPTIONS, and calls it with `options`:
    each option's value from its flag if given, else from its OCRBATCH_* variable, else its default, checked
    (a refused value names its flag or its variable, and exits 2)."""
    rows = config.options(scope)

    def wrap(command: Callable[..., None]) -> Callable[..., None]:
        own = [p for p in inspect.signature(command).parameters.values() if p.name != "options"]

        @functools.wraps(command)
        def with_options(ctx: typer.Context, **kwargs) -> None:
            as_json = _json_asked(ctx, kwargs) if scope == config.RUN else False
            try:
                given = _given(ctx, rows, kwargs)
                options = config.settle(scope, given, os.environ)
            except UsageError as exc:  # a variable's value (or a flag's) refused: exit 2, naming it
                _setup_logging(quiet=False, verbose=0)
                _exit_with(functools.partial(_raise, exc), verbose=0, as_json=as_json)
            command(**kwargs, options=options)

        context = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)
        aliases = [alias(f) for f, (row, _, _) in table.ALIASES.items() if any(o.name == row for o in rows)]
        signature = inspect.Signature([context, *own, *map(flag, rows), *aliases])
        with_options.__signature__ = signature  # type: ignore[attr-defined]
        del with_options.__wrapped__  # typer reads __signature__, not the command's own
        return with_options

    return wrap


def _json_asked(ctx: typer.Context, kwargs: dict[str, Any]) -> bool:
    """--json given (or OCRBATCH_JSON set, unless --no-json is): a usage error gets its JSON summary too."""
    if _on_command_line(ctx, "json"):
        return bool(kwargs.get("json"))
    return os.environ.get(config.OPTION["json"].env, "").strip().lower() in ("1", "true", "yes", "on")


def _raise(exc: BaseException) -> NoReturn:
    raise exc


def _on_command_line(ctx: typer.Context, name: str) -> bool:
    source = ctx.get_parameter_source(name)  # click's ParameterSource (typer carries its own click)
    return source is not None and source.name == "COMMANDLINE"


def _converter_options(options: dict[str, Any]) -> dict[str, Any]:
    """The Converter's keywords among a command's options."""
    return {o.name: options[o.name] for o in config.options(config.ENGINE) if o.name in options}


def _run_options(options: dict[str, Any]) -> dict[str, Any]:
    """Converter.convert's keywords among convert's options: a run's own (config.RUN_OWN), by their fields."""
    return {o.field: options[o.name] for o in config.RUN_OWN}


@app.command(cls=panel_command(config.options(config.RUN)),
             short_help="Convert documents to Markdown, a file per page.")
@_with_options(config.RUN)
def convert(inputs: list[str] = typer.Argument(..., metavar="INPUT...",
                                              help="Files, folders, or - for stdin: a list of paths, or one "
                                                   "document piped in."),
            *, options: dict[str, Any]) -> None:
    """Convert documents to Markdown: OUT/NAME.md per image, OUT/NAME/page-0001.md per PDF page.
    Every option can also be set by an OCRBATCH_* variable (OCRBATCH_ENGINE, OCRBATCH_MAX_BATCH, ...);
    a flag given wins."""
    report: config.Report = config.configure(config.Report, options)
    _setup_logging(report.quiet, report.verbose)
    output = options["output"]

    clash = _json_clash(inputs, output) if report.json else None  # stdout itself is where its error would go

    def convert_all() -> ExitCode:
        from .converter import Converter

        if clash is not None:
            raise UsageError(clash)
        if output is None:
            raise UsageError("missing -o/--output DIR (or OCRBATCH_OUTPUT): where the Markdown files go")
        converter = Converter(**_converter_options(options))
        return _run_convert(converter, inputs, output, report, _run_options(options))

    _exit_with(convert_all, report.verbose, as_json=report.json and clash is None, output=output)


def _json_clash(inputs: list[str], output: Path | None) -> str | None:
    """Why --json's stdout must not be written (`> FILE` names what the run reads or keeps), or None."""
    from .safefiles import RunFiles, stdout_path

    target = stdout_path()
    clash = RunFiles.of(inputs, output).clash(target) if target is not None else None
    return None if clash is None else (f"--json: stdout goes to {target}, which is {clash}: ocrbatch never writes "
                                       "over it (send it elsewhere)")


def _exit_with(command: Callable[[], int], verbose: int, as_json: bool = False,
               output: Path | None = None) -> NoReturn:
    """Run a command and exit with its code; the one place where errors become exit codes. With `as_json`
    (convert --json, into `output`), an error also gets its JSON summary on stdout."""
    error: str | None = None
    try:
        code = command()
    except OcrbatchError as exc:
        log.error("%s", exc, exc_info=verbose > 0)
        code, error = exc.exit_code, str(exc)
    except KeyboardInterrupt:
        error = "interrupted; finished pages are kept, rerun to resume"
        log.error("%s", error)
        code = ExitCode.INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - a bug: one line unless -v
        log.error("unexpected %s: %s (rerun with -v for the traceback)", type(exc).__name__, exc,
                  exc_info=verbose > 0)
        code, error = ExitCode.INTERNAL, f"unexpected {type(exc).__name__}: {exc}"
    if error is not None and as_json:
        _print_error_json(int(code), error, output)
    raise typer.Exit(int(code))


def _print_error_json(code: int, error: str, output: Path | None) -> None:
    from .pipeline.stats import error_summary

    from .errors import OutputWriteError
    from .pipeline.stdout import print_stdout

    try:
        print_stdout(json.dumps(error_summary(code, error, None if output is None else str(output)), indent=2) + "\n")
    except OutputWriteError:
        pass  # the error it would carry has been said on stderr already


def _run_convert(converter, inputs: list[str], output: Path, report: config.Report,
                 run: dict[str, Any]) -> ExitCode:
    """`_convert_and_report` inside `running()`."""
    from .pipeline.signals import running

    with running():  # a second signal now stops the run at once, yet its records and summary (--json) are kept
        return _convert_and_report(converter, inputs, output, report, run)


def _convert_and_report(converter, inputs: list[str], output: Path, report: config.Report,
                        run: dict[str, Any]) -> ExitCode:
    """`run`: Converter.convert's keywords (a run's own options, _run_options)."""
    from .pipeline.signals import catch_stop_signals
    from .ui.reporter import stderr_is_terminal

    quiet, verbose, as_json = report.quiet, report.verbose, report.json
    to_stdout = str(output) == "-"
    follow, work = (_stdout_run(inputs, as_json, run["formats"], run["join"]) if to_stdout else (None, output))
    reporter = _reporter(report, converter.engine, output, inputs)
    try:
        with converter, reporter, catch_stop_signals():  # SIGINT/TERM/HUP: stop taking pages, end with a summary
            summary = converter.convert(inputs, work, stdin=sys.stdin if "-" in inputs else None,
                                        watch=reporter.watch, follow=follow, **run)
            if to_stdout:
                summary.output = "-"
            reporter.finish(summary)
    finally:
        if to_stdout:
            import shutil

            shutil.rmtree(work, ignore_errors=True)
    for source, key in summary.renamed:
        log.warning("%s: another input maps (now, or in an earlier run into %s) to the same output name; "
                    "written as %s", source, output, key)
    if not quiet and (verbose or stderr_is_terminal()):
        from .ui import print_summary  # off a terminal without -v, the reporter's `finished` line is the summary

        print_summary(summary)
    if summary.stopped_by is not None:  # a signal or a write error ended the run before its end
        log.error("%s", summary.stopped_by)
    if as_json:
        from .pipeline.stdout import print_stdout

        print_stdout(json.dumps(summary.as_dict(), indent=2) + "\n")  # a full disk: exit 7; `| true`: quiet
    return summary.exit_code


def _stdout_run(inputs: list[str], as_json: bool, formats: tuple[str, ...], join: bool):
    """`-o -`: a printer of the pages to stdout, and the private folder the run writes into."""
    import tempfile

    from .pipeline.stdout import StdoutPrinter, stdout_binary

    from .render import RENDERERS

    printed = [f for f in formats if f != "md"] or ["md"]
    files = [f for f in printed if RENDERERS[f].stream is None]
    for clash, why in ((as_json, "--json prints on stdout"), (join, "--join writes files"),
                       (bool(files), f"--format {','.join(files)} writes files"),
                       (len(printed) > 1, f"--format {','.join(printed)} is more than one")):
        if clash:
            raise UsageError(f"-o - puts the Markdown on stdout (or the text, with --format txt); {why}: give -o a "
                             "folder for that")
    several = len(inputs) > 1 or any(i == "-" or Path(i).is_dir() for i in inputs)
    renderer = RENDERERS[printed[0]]
    return (StdoutPrinter(stdout_binary(), announce=several and renderer.name == "md", renderer=renderer),
            Path(tempfile.mkdtemp(prefix="ocrbatch-stdout-")))


def _reporter(report: config.Report, engine: str, output: Path, inputs: list[str]):
    from .metrics import MetricsFile
    from .safefiles import RunFiles
    from .ui import Reporter

    if report.metrics_file is not None:  # never an input, the manifest, a lock, a page's output...
        RunFiles.of(inputs, output).check(report.metrics_file, "--metrics-file")
    metrics = MetricsFile(report.metrics_file) if report.metrics_file is not None else None
    return Reporter(mode=Reporter.choose_mode(quiet=report.quiet, progress=not report.no_progress),
                    log_every=report.log_every, metrics=metrics, about={"engine": engine, "output": str(output)},
                    verbose=bool(report.verbose))


@app.command("throughput", short_help="Pages/s of the GPU pipeline on a random model.")
def throughput(
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
    """Throughput of the GPU pipeline on a random DeepSeek-OCR-2 (no weights needed): pages/s per batch size,
    GPU utilization, peak VRAM, buffer allocations after warm-up, and the gain over a one-page-at-a-time loop."""
    _setup_logging(quiet, verbose)

    def run_bench() -> int:
        from .throughput_bench import BenchConfig, main as bench_main, parse_sizes
        from .errors import EngineLoadError

        try:
            import torch  # noqa: F401 - the benchmark builds a random DeepSeek-OCR-2 with these
            import transformers  # noqa: F401
        except ImportError as exc:
            raise EngineLoadError(f"ocrbatch throughput needs torch and transformers ({exc}): install torch for your "
                                  "platform (https://pytorch.org), then pip install 'ocrbatch[gpu]'") from exc

        config = BenchConfig(arch=arch, batch_sizes=parse_sizes(batch_sizes), pages=pages, pages_dir=pages_dir,
                             max_new_tokens=max_new_tokens, loop_pages=loop_pages, device=device, workers=workers,
                             budget_s=budget_s, lengths=lengths, median_tokens=median_tokens,
                             schedules=tuple(p.strip() for p in schedules.split(",") if p.strip()))
        return bench_main(config, json_out=as_json, quiet=quiet)

    _exit_with(run_bench, verbose)


app.command("bench", hidden=True, help="The old name of `ocrbatch throughput`.")(throughput)


@app.command(cls=panel_command(config.options(config.SERVE)), short_help="Serve conversions over HTTP.")
@_with_options(config.SERVE)
def serve(*, options: dict[str, Any]) -> None:
    """Serve conversions over HTTP: one loaded engine; concurrent requests share its batches.
    Every option can also be set by an OCRBATCH_* variable (OCRBATCH_TOKEN, OCRBATCH_ENGINE, ...); a flag
    given wins."""
    report: config.Report = config.configure(config.Report, options)
    _setup_logging(report.quiet, report.verbose)

    def run_server() -> int:
        try:
            from .serve.run import serve as serve_main
        except ImportError as exc:
            raise UsageError(f"ocrbatch serve needs the serve extra: pip install 'ocrbatch[serve]' ({exc})") from exc
        from .pipeline.batcher import window
        from .serve.config import ServeConfig

        # a request's pages in the queue at a time: the one window policy for one caller (--max-batch: a BatchCap)
        serve_config = config.configure(ServeConfig, options, window=window(options["max_batch"]))
        return serve_main(_converter_options(options), serve_config, verbose=report.verbose, quiet=report.quiet)

    _exit_with(run_server, report.verbose)


@app.command("merge-manifests", short_help="Fold --shard parts' manifests into one.")
def merge_manifests(output: Path = typer.Argument(..., help="The output folder that the parts (--shard I/N) "
                                                            "wrote into."),
                    quiet: bool = typer.Option(False, "-q", "--quiet", help="Print only errors.")) -> None:
    """Fold the parts' manifests (manifest.shard-I-of-N.jsonl, written by convert --shard) into
    OUT/manifest.jsonl: one view of the folder. Refused (exit 6) while any run writes into OUT."""
    _setup_logging(quiet, 0)

    def run_merge() -> int:
        from .pipeline.merge import merge_manifests as merge

        records, files = merge(output)
        if not quiet:
            typer.echo(f"merged {files} manifest file(s) into {output / 'manifest.jsonl'}: {records} record(s)")
        return ExitCode.OK

    _exit_with(run_merge, 0)


@app.command(short_help="Check what this install can run, and why not.")
def doctor(as_json: bool = typer.Option(False, "--json", help="Print the findings as one JSON object.")) -> None:
    """Check the install: Python, torch and CUDA, GPUs, flash-attn, engines, cached models, onnxruntime."""
    from .doctor import main as doctor_main

    raise typer.Exit(doctor_main(as_json=as_json))


def main() -> None:
    if sys.argv[1:2] == ["convert"]:  # as early as this module allows (python -m ocrbatch: earlier still)
        from .pipeline.signals import install

        install()
    from typer.completion import completion_init

    completion_init()  # the shells' completion requests (_OCRBATCH_COMPLETE=complete_zsh ...) are answered
    try:
        code = app(standalone_mode=False, prog_name=PROG)
    except typer.Abort:
        sys.exit(1)
    except Exception as exc:  # the parser's ClickException (typer's own copy of click in newer versions)
        if not all(hasattr(exc, a) for a in ("show", "format_message", "exit_code")):
            raise
        if type(exc).__name__ == "NoArgsIsHelpError":  # `ocrbatch` alone: the help
            exc.show()
            sys.exit(exc.exit_code)
        line = usage_line(exc)  # one line, as the table's own usage errors are (_exit_with)
        sys.stderr.write(f"ocrbatch: error: {line}\n")
        if _json_wanted(sys.argv[1:]):  # convert --json: a usage error the parser finds also gets its JSON summary
            _print_error_json(exc.exit_code, line, None)
        sys.exit(exc.exit_code)
    sys.exit(code if isinstance(code, int) else 0)


def _json_wanted(args: list[str]) -> bool:
    """`convert` with --json (the last of --json and --no-json given), or else OCRBATCH_JSON set."""
    if args[:1] != ["convert"]:
        return False
    named = [a for a in (args[:args.index("--")] if "--" in args else args) if a in ("--json", "--no-json")]
    if named:
        return named[-1] == "--json"
    return os.environ.get(config.OPTION["json"].env, "").lower() in ("1", "true", "yes", "on")
