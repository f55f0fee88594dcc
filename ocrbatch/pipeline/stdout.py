"""`convert -o -`: the Markdown of every page on stdout, in the order discovery found the pages, each page as
soon as it and every page before it are written, with the separators of pipeline/joined.py:

    <!-- document: scans/a.pdf -->        (only when the run may have several documents)

    <!-- page 1 -->

    ...

With `--format txt`, the plain text instead, pages (and documents) apart by a form feed: the format's renderer
(render/: one with `stream`) says what a page prints as and what goes between two.

The run itself writes into a private temporary folder (its manifest, its lock), removed afterwards; what the
command line prints besides the Markdown (progress, errors, the summary) goes to stderr as always. When the
reader goes away (`| head`), the run stops as a full disk stops it: OutputWriteError, exit 7.
"""

from __future__ import annotations

import collections
import os
import sys
import threading
from typing import BinaryIO, Hashable, TextIO

from ..errors import OutputWriteError
from ..records import PageRef, PageResult, Status
from ..render import RENDERERS, Renderer
from .joined import comment, document_header


def _key(item: PageRef | PageResult) -> Hashable:
    if isinstance(item, PageRef):
        return (str(item.source.path), item.page)
    if item.ref is not None:
        return (str(item.ref.source.path), item.ref.page)
    return ("file", item.source_path, item.source_display)


class StdoutPrinter:
    """A run's follower (pipeline/run.py): `found` sees what discovery hands on, in order; `written` each result
    once recorded."""

    def __init__(self, stream: BinaryIO, announce: bool, renderer: Renderer = RENDERERS["md"]) -> None:
        assert renderer.stream is not None, f"{renderer.name} is not printed on stdout"
        self.stream, self.announce, self.renderer = stream, announce, renderer
        self._lock = threading.Lock()
        self._order: collections.deque[Hashable] = collections.deque()
        self._done: dict[Hashable, PageResult] = {}
        self._document: str | None = None  # the one being printed
        self._first = True
        self.closed = False  # the reader went away

    def found(self, item: PageRef | PageResult) -> None:
        with self._lock:
            self._order.append(_key(item))

    def written(self, result: PageResult) -> None:
        with self._lock:
            self._done[_key(result)] = result
            while self._order and self._order[0] in self._done:
                self._print(self._done.pop(self._order.popleft()))

    def _print(self, result: PageResult) -> None:
        if self.closed:
            return
        ref = result.ref
        name = ref.source.display if ref is not None else result.source_display
        parts: list[bytes] = []
        if not self._first:
            parts.append(self.renderer.between)
        if self.announce and name != self._document:
            parts.append(document_header(name).encode("utf-8", errors="replace"))
        self._document, self._first = name, False
        if ref is None:
            if self.renderer.name == "md":  # a whole file failed: a comment where its pages would be
                parts.append(f"<!-- failed: {comment(result.error or 'failed')} -->\n".encode("utf-8",
                                                                                          errors="replace"))
        else:
            done = result.status in (Status.OK, Status.TRUNCATED, Status.SKIPPED)
            parts.append(self.renderer.stream((ref.page, self._data(result) if done else None, result.error),
                                              ref.source.multipage))
        try:
            self.stream.write(b"".join(parts))
            self.stream.flush()
        except OSError as exc:
            self.closed = True
            _silence(self.stream)
            if isinstance(exc, BrokenPipeError):
                raise OutputWriteError("stdout was closed (its reader went away); stopped") from exc
            raise OutputWriteError(f"cannot write to stdout: {exc.strerror or exc}; stopped") from exc

    def _data(self, result: PageResult) -> bytes | None:
        """The page in the printed format: its Markdown, or its file of that format among its attachments."""
        assert result.ref is not None
        if self.renderer.name == "md":
            return result.markdown.encode("utf-8", errors="replace")
        rel = result.ref.output.with_suffix(self.renderer.suffix)
        return next((a.data for a in result.attachments if a.relpath == rel), None)


def _silence(stream: BinaryIO | TextIO | None) -> None:
    """Nothing more can reach stdout's reader: what is left in its buffer goes nowhere, and Python's own
    complaint at exit (flushing it) is spared."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno() if stream is not None else 1)
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def stdout_binary() -> BinaryIO:
    """sys.stdout's bytes, for `-o -`; OutputWriteError (exit 7) when stdout is closed (`>&-`)."""
    stream = getattr(sys.stdout, "buffer", None)
    if stream is None:
        raise OutputWriteError("stdout is closed: nowhere to print the pages (give -o a folder, or open stdout)")
    return stream


def print_stdout(text: str) -> None:
    """`text` on stdout (the --json summary), flushed. A reader gone away (`| true`, `| head`) is its choice:
    nothing is said and the run's exit code stands. Any other failure (a full disk: `> /dev/full`) raises
    OutputWriteError (exit 7) once; later prints go nowhere."""
    global _gone
    if _gone:
        return
    stream = sys.stdout
    try:
        if stream is None:
            raise BrokenPipeError  # closed before we started: as if its reader had gone
        stream.write(text)
        stream.flush()
    except OSError as exc:
        _gone = True
        _silence(stream)
        if isinstance(exc, BrokenPipeError):
            return
        raise OutputWriteError(f"cannot write to stdout: {exc.strerror or exc}") from exc


_gone = False  # stdout failed once: nothing more is printed there
