"""`convert -o -`: the Markdown of every page on stdout, in the order discovery found the pages, each page as
soon as it and every page before it are written, with the separators of pipeline/joined.py:

    <!-- document: scans/a.pdf -->        (only when the run may have several documents)

    <!-- page 1 -->

    ...

The run itself writes into a private temporary folder (its manifest, its lock), removed afterwards; what the
command line prints besides the Markdown (progress, errors, the summary) goes to stderr as always. When the
reader goes away (`| head`), the run stops as a full disk stops it: OutputWriteError, exit 7.
"""

from __future__ import annotations

import collections
import os
import threading
from typing import BinaryIO, Hashable

from ..errors import OutputWriteError
from ..records import PageRef, PageResult, Status
from .joined import comment, document_header, page_part


def _key(item: PageRef | PageResult) -> Hashable:
    if isinstance(item, PageRef):
        return (str(item.source.path), item.page)
    if item.ref is not None:
        return (str(item.ref.source.path), item.ref.page)
    return ("file", item.source_path, item.source_display)


class StdoutPrinter:
    """A run's follower (pipeline/run.py): `found` sees what discovery hands on, in order; `written` each result
    once recorded."""

    def __init__(self, stream: BinaryIO, announce: bool) -> None:
        self.stream, self.announce = stream, announce
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
        parts = []
        if not self._first:
            parts.append("\n")
        if self.announce and name != self._document:
            parts.append(document_header(name))
        self._document, self._first = name, False
        if ref is None:
            parts.append(f"<!-- failed: {comment(result.error or 'failed')} -->\n")
        else:
            done = result.status in (Status.OK, Status.TRUNCATED, Status.SKIPPED)
            parts.append(page_part(ref.page, result.markdown if done else None, result.error,
                                   separated=ref.source.multipage))
        try:
            self.stream.write("".join(parts).encode("utf-8", errors="replace"))
            self.stream.flush()
        except BrokenPipeError as exc:
            self.closed = True
            try:  # nothing more can reach the reader; spare Python's own complaint at exit
                os.dup2(os.open(os.devnull, os.O_WRONLY), self.stream.fileno())
            except (OSError, ValueError, AttributeError):
                pass
            raise OutputWriteError("stdout was closed (its reader went away); stopped") from exc
