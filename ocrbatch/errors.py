"""Exit codes and the exception tree; the CLI is the only place that maps one to the other.

    OcrbatchError                 exit code carried by each subclass
     ├── UsageError               2  bad options or arguments
     ├── NoInputsError            4  nothing to convert was found
     ├── EngineLoadError          5  the engine could not be loaded (missing package, weights, device)
     ├── OutputLockedError        6  another run is writing into the same output folder
     ├── OutputWriteError         7  the output cannot be written (disk full, quota, read-only, I/O error)
     ├── StalledError             8  pages were in flight and none finished for --stall-timeout (a stuck engine)
     ├── Interrupted     129/130/143  stopped by SIGHUP / SIGINT / SIGTERM (a result: the run ends with a summary)
     └── PageError                -  one page failed; recorded in the manifest, never raised past a stage
          └── DecodeError            the file or page could not be read or rendered

A run where some pages failed ends with ExitCode.PARTIAL; that is a result, not an exception. So is a run
stopped by a signal (INTERRUPTED for SIGINT, TERMINATED for SIGTERM): it ends with a summary like any other.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0
    INTERNAL = 1  # a bug: unexpected exception (traceback with -v)
    USAGE = 2
    PARTIAL = 3  # the run finished, some pages failed (or were truncated)
    NO_INPUTS = 4
    ENGINE_LOAD = 5
    OUTPUT_LOCKED = 6  # another run holds the output folder's lock
    OUTPUT_WRITE = 7  # disk full or another error writing the output: stopped; rerun once fixed
    STALLED = 8  # no page finished for --stall-timeout while pages were in flight: those failed, the run stopped
    HANGUP = 129  # SIGHUP (the terminal closed, an ssh session killed): 128 + 1, handled as SIGTERM is
    INTERRUPTED = 130  # SIGINT (Ctrl-C): 128 + 2
    TERMINATED = 143  # SIGTERM (cron, systemd, timeout): 128 + 15


class OcrbatchError(Exception):
    """Base of every error this package raises on purpose."""

    exit_code: ExitCode = ExitCode.INTERNAL


class UsageError(OcrbatchError):
    exit_code = ExitCode.USAGE


class NoInputsError(OcrbatchError):
    exit_code = ExitCode.NO_INPUTS


class EngineLoadError(OcrbatchError):
    exit_code = ExitCode.ENGINE_LOAD


class OutputLockedError(OcrbatchError):
    exit_code = ExitCode.OUTPUT_LOCKED


class OutputWriteError(OcrbatchError):
    """Writing the output failed in a way every later write would too (disk full, quota, read-only file
    system, I/O error, file size limit): the run stops; finished pages and their records are kept."""

    exit_code = ExitCode.OUTPUT_WRITE


class StalledError(OcrbatchError):
    """Pages were in flight and none finished for the stall timeout: the engine (or a decoder) is stuck. The
    pages in flight fail with a line saying so; the run stops with its summary and a whole manifest."""

    exit_code = ExitCode.STALLED


class Interrupted(OcrbatchError):
    """The run was asked to stop by a signal; finished pages are kept."""

    def __init__(self, signal_name: str, exit_code: ExitCode) -> None:
        super().__init__(f"stopped by {signal_name}; finished pages are kept, rerun to resume")
        self.signal_name = signal_name
        self.exit_code = exit_code


class PageError(OcrbatchError):
    """A failure confined to one page (or one file, when it cannot even be opened)."""

    exit_code = ExitCode.PARTIAL


class DecodeError(PageError):
    pass


class ConverterClosedError(RuntimeError):
    """The Python API's Converter was closed: a page submitted then is refused, and a page it had not finished
    when close(wait=False) returned fails with this (never left unresolved)."""


def error_line(exc: BaseException, named: bool = True) -> str:
    """An exception as one line for the manifest and the log: its type and its message's first line (only
    the line when not `named`; only the type when the message is empty). The one formatter of the package."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if not named:
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def is_out_of_memory(exc: BaseException) -> bool:
    """torch.cuda.OutOfMemoryError, MemoryError, or an engine error that says so."""
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return True
    return "out of memory" in str(exc).lower()


def forget_frames(exc: BaseException) -> BaseException:
    """`exc` without its traceback, nor those of the exceptions chained to it: the frames they hold (and the
    tensors in them) can be freed. Returns `exc`."""
    seen = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        e.__traceback__ = None
        e = e.__cause__ or e.__context__
    return exc
