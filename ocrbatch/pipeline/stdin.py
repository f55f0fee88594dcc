"""`-`: what stdin holds, a list of paths or one document.

The first bytes decide, as tesseract and ocrmypdf users expect of `-`: a PDF, PNG, JPEG, TIFF, WebP, GIF or BMP
there is one document, named `stdin`, spooled whole into the output folder's `SPOOL` (removed when the run
ends) and converted like a file of that name. Anything else is a list of paths, one a line (`-0`: NUL-separated),
each handed on as soon as it has arrived: the head is read as the first paths arrive, never waited for past
them. A list entry that no path can be (control bytes: binary data, or a document behind a list) stops the
run with one line and exit 2 (UsageError), instead of one error per line of garbage.
"""

from __future__ import annotations

import os
import select
from pathlib import Path
from typing import IO, Callable, Iterator

from ..errors import UsageError

NAME = "stdin"  # the document's name: its output is OUT/stdin.md, or OUT/stdin/page-0001.md ...
SPOOL = ".ocrbatch-stdin"  # the folder in OUT the document is spooled into, as SPOOL/stdin
POLL_S = 0.2  # how often a wait for more of stdin looks whether the run is stopping
KINDS = "PDF, PNG, JPEG, TIFF, WebP, GIF or BMP"

# Each document kind's first bytes; None: any byte. A path list starts with none of them (a name starting
# `%PDF-` or `GIF89a` aside).
_ANY = None
_MAGIC: tuple[tuple[int | None, ...], ...] = tuple(
    tuple(p) for p in (
        b"%PDF-", b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+",
        [*b"RIFF", _ANY, _ANY, _ANY, _ANY, *b"WEBP"], b"GIF87a", b"GIF89a",
        [*b"BM", _ANY, _ANY, _ANY, _ANY, 0, 0, 0, 0],  # BMP: its 4 reserved bytes are zero
    ))
HEAD = max(map(len, _MAGIC))
# Bytes no path holds: C0 controls but tab, CR and LF, and DEL (NUL is the -0 separator).
_CONTROL = frozenset(range(32)) - {9, 10, 13} | {127}


def _agrees(head: bytes, magic: tuple[int | None, ...]) -> bool:
    return all(m is None or b == m for b, m in zip(head, magic))


def is_document(head: bytes) -> bool:
    """Whether `head` (at least HEAD bytes, or all of stdin) starts like a document."""
    return any(len(head) >= len(m) and _agrees(head, m) for m in _MAGIC)


def _may_grow_into_document(head: bytes) -> bool:
    """Whether more bytes could still make `head` a document's start."""
    return any(len(head) < len(m) and _agrees(head, m) for m in _MAGIC)


def paths_or_document(stream: IO[str], null_separated: bool, spool: Path | None,
                      stopped: Callable[[], bool] = lambda: False) -> Path | Iterator[str] | None:
    """The spooled document (its path, SPOOL/stdin), or the listed paths as they arrive; None when the run
    stopped before stdin said which. Raises UsageError for a list with an entry no path can be."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # an in-memory stream (tests, the Python API): a list
        text = stream.read()
        parts = text.split("\0") if null_separated else text.splitlines()
        return (p for p in parts if p.strip())
    head = b""
    while not is_document(head) and (not head or _may_grow_into_document(head)):
        if not _readable(fd, stopped):
            return None
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        head += chunk
    if is_document(head) and spool is not None:
        return _spooled(fd, head, spool, stopped)
    return _listed(fd, head, null_separated, stopped)


def _spooled(fd: int, head: bytes, spool: Path, stopped: Callable[[], bool]) -> Path | None:
    spool.mkdir(exist_ok=True)
    path = spool / NAME
    with open(path, "wb") as out:
        out.write(head)
        while True:
            if not _readable(fd, stopped):
                return None
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return path
            out.write(chunk)


def _listed(fd: int, pending: bytes, null_separated: bool, stopped: Callable[[], bool]) -> Iterator[str]:
    """The paths on `fd`, after those in `pending`, read as bytes so that any name survives (os.fsdecode); ends
    early once `stopped()` (checked while waiting, every POLL_S). The entries of each read are checked before
    any of them is handed on: binary data is refused before a line of it is taken for a path."""
    sep = b"\0" if null_separated else b"\n"
    seen = 0
    while True:
        *lines, pending = pending.split(sep)
        seen = _check(lines, null_separated, seen)
        yield from _names(lines, null_separated)
        if not _readable(fd, stopped):
            return
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        pending += chunk
    _check([pending], null_separated, seen)
    yield from _names([pending], null_separated)


def _check(parts: list[bytes], null_separated: bool, before: int) -> int:
    """The entries counted so far (`before` and these); raises UsageError at one that no path can be."""
    for n, part in enumerate(parts, before + 1):
        if _CONTROL.intersection(part.rstrip(b"\r")):
            what = "entry" if null_separated else "line"
            raise UsageError(f"stdin: {what} {n} is no path (it holds binary data): give - either a list of "
                             f"paths, one a {what}, or one whole document ({KINDS})")
    return before + len(parts)


def _names(parts: list[bytes], null_separated: bool) -> Iterator[str]:
    for part in parts:
        if not null_separated:
            part = part.rstrip(b"\r")
        if part.strip():
            yield os.fsdecode(part)


def _readable(fd: int, stopped: Callable[[], bool]) -> bool:
    """Wait until `fd` has data or is at its end; False when `stopped()` first."""
    while not stopped():
        try:
            ready, _, _ = select.select([fd], [], [], POLL_S)
        except (OSError, ValueError):  # not a selectable descriptor: a plain blocking read
            return True
        if ready:
            return True
    return False
