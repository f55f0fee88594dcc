"""Exit codes and the exception tree; the CLI is the only place that maps one to the other.

    OcrbatchError                 exit code carried by each subclass
     ├── UsageError               2  bad options or arguments
     ├── NoInputsError            4  nothing to convert was found
     ├── EngineLoadError          5  the engine could not be loaded (missing package, weights, device)
     └── PageError                -  one page failed; recorded in the manifest, never raised past a stage
          └── DecodeError            the file or page could not be read or rendered

A run where some pages failed ends with ExitCode.PARTIAL; that is a result, not an exception.
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
    INTERRUPTED = 130


class OcrbatchError(Exception):
    """Base of every error this package raises on purpose."""

    exit_code: ExitCode = ExitCode.INTERNAL


class UsageError(OcrbatchError):
    exit_code = ExitCode.USAGE


class NoInputsError(OcrbatchError):
    exit_code = ExitCode.NO_INPUTS


class EngineLoadError(OcrbatchError):
    exit_code = ExitCode.ENGINE_LOAD


class PageError(OcrbatchError):
    """A failure confined to one page (or one file, when it cannot even be opened)."""

    exit_code = ExitCode.PARTIAL


class DecodeError(PageError):
    pass


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
