"""The files ocrbatch keeps that are not input pages (the manifest, the metrics file, the lock, the page files
and joined documents it writes, the --debug-layout folder): what is at their path is checked by type before it
is opened, and read within bounds.

    check_file(path, what)          a regular file or nothing: its stat (None: nothing there); else UsageError
    check_folder(path, what)        a folder or nothing, likewise
    open_file(path, flags, what)    os.open of a regular file (made if O_CREAT): a FIFO never blocks the open,
                                    and what it turns out to be is checked again on the descriptor
    read_text(path, what, limit)    a small file's text (None: nothing there); over `limit` bytes: UsageError
    lines(fh, limit)                a binary file's lines; one over `limit` bytes comes as None, skipped whole

What a write could overwrite is checked too (`RunFiles.check`): the metrics file, the file --json's stdout goes
to, the --debug-layout folder and each --join file may never be an input, a folder the run reads, the manifest
(a part's too), a lock, or a page's output; each such path is one line and exit 2 (UsageError).

A FIFO would block the run forever (a SIGTERM included), a character device such as /dev/zero or /dev/full
would be read without end, and a device replaced by a rename would be gone (as root, /dev/null): each is one
line and exit 2 instead (UsageError), naming the path and what it is.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Iterable, Iterator

from .errors import UsageError
from .records import DOC_SUFFIXES

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def kind(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def _stat(path: Path, what: str, usage: bool = True) -> os.stat_result | None:
    try:
        return os.stat(path)  # through symlinks: a link to /dev/zero is /dev/zero
    except FileNotFoundError:
        return None
    except OSError as exc:
        if not usage:  # the caller's to judge (a page file's name too long fails that page only)
            raise
        if exc.errno == errno.ENAMETOOLONG:
            raise UsageError(f"{what} {path}: the name is too long for the file system") from exc
        if exc.errno == errno.ENOTDIR:
            raise UsageError(f"{what} {path}: a part of the path is a file, not a folder") from exc
        raise UsageError(f"{what} {path}: {exc.strerror or exc}") from exc


def _regular(st: os.stat_result, path: Path, what: str) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{what} {path} is {kind(st.st_mode)}, not a regular file: ocrbatch neither reads "
                         "nor replaces it (move it away, or choose another path)")


def check_file(path: Path, what: str, usage: bool = True) -> os.stat_result | None:
    """The stat of `path` if it is a regular file, None if nothing is there; UsageError otherwise (an OSError
    looking, such as a name too long, too, unless not `usage`: then it is raised as is)."""
    st = _stat(path, what, usage)
    if st is not None:
        _regular(st, path, what)
    return st


def check_folder(path: Path, what: str) -> os.stat_result | None:
    """The stat of `path` if it is a folder, None if nothing is there; UsageError otherwise."""
    st = _stat(path, what)
    if st is not None and not stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{what} {path} is {kind(st.st_mode)}, not a folder (choose another path)")
    return st


def open_file(path: Path, flags: int, what: str, mode: int = 0o666) -> int:
    """`os.open(path, flags)` for a regular file only: checked before, opened without blocking (a FIFO that
    appeared meanwhile cannot hang it), checked again on the descriptor. OSError from the open itself (a full
    disk, a permission) is the caller's."""
    check_file(path, what)
    fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    try:
        _regular(os.fstat(fd), path, what)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_text(path: Path, what: str, limit: int) -> str | None:
    """The text of a regular file of at most `limit` bytes (None when there is none); UsageError when it is
    something else or larger."""
    data = read_bytes(path, what, limit)
    return None if data is None else data.decode("utf-8", errors="replace")


def read_bytes(path: Path, what: str, limit: int) -> bytes | None:
    """The bytes of a regular file of at most `limit` bytes (None when there is none); UsageError when it is
    something else or larger."""
    st = check_file(path, what)
    if st is None:
        return None
    if st.st_size > limit:
        raise UsageError(f"{what} {path} is {st.st_size:,} bytes, over the {limit:,} ocrbatch reads: it is not one "
                         "ocrbatch wrote (move it away, or choose another path)")
    try:
        fd = open_file(path, os.O_RDONLY, what)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as fh:
        return fh.read(limit + 1)[:limit]


def lines(fh: BinaryIO, limit: int) -> Iterator[bytes | None]:
    """The lines of `fh` (newline kept off); a line longer than `limit` bytes is read past in pieces, never held
    whole, and comes as None."""
    while True:
        line = fh.readline(limit + 1)
        if not line:
            return
        if len(line) > limit and not line.endswith(b"\n"):
            while line and not line.endswith(b"\n"):
                line = fh.readline(limit + 1)
            yield None
            continue
        yield line.rstrip(b"\r\n")


# The output folder's own files, by name (manifest.py, pipeline/lock.py, records.page_output): no other write of
# the run may take one.
_KEPT = (("manifest*.jsonl", "the manifest"), ("*.lock", "a lock file"), (".*", "a file the run keeps (hidden)"),
         ("*.md", "a page's output (or a joined document)"), ("*.json", "a page's JSON output"))


@dataclass(frozen=True)
class RunFiles:
    """What a run reads and keeps: its inputs (files and folders, as named) and its output folder."""

    inputs: tuple[Path, ...]
    output: Path | None = None

    @classmethod
    def of(cls, inputs: Iterable[str], output: Path | str | None) -> "RunFiles":
        named = tuple(_real(Path(i)) for i in inputs if i != "-")
        return cls(named, None if output is None or str(output) == "-" else _real(Path(output)))

    def clash(self, path: Path, folder: bool = False, own: bool = False) -> str | None:
        """What `path` is of the run's, in words ("an input of the run"...), or None when a write there (a
        folder's, with `folder`) replaces nothing the run reads or keeps. `own`: one of the output folder's
        own files (a --join file), checked against the inputs only."""
        where = _real(path)
        for given in self.inputs:
            if where == given:
                return "a folder the run reads" if given.is_dir() else "an input of the run"
            if given in where.parents and given.is_dir():
                if folder:
                    continue  # a folder inside an input folder: discovery leaves it out (written_folders)
                if where.suffix.lower() in DOC_SUFFIXES or where.is_dir():
                    return f"inside the input folder {given}: a document the run reads"
        if self.output is not None and not (folder or own) and (where == self.output or self.output in where.parents):
            rel = PurePosixPath(where.relative_to(self.output).as_posix())
            if len(rel.parts) > 1:
                return f"inside the output folder {self.output}, among the pages' files"
            for pattern, what in _KEPT:
                if rel.match(pattern):
                    return f"{what} in the output folder {self.output}"
        return None

    def check(self, path: Path, what: str, folder: bool = False) -> None:
        """UsageError when `path` (the `what` a run writes) could overwrite what the run reads or keeps."""
        clash = self.clash(path, folder)
        if clash is not None:
            raise UsageError(f"{what} {path} is {clash}: ocrbatch never writes {'into' if folder else 'over'} it "
                             "(choose another path)")


def _real(path: Path) -> Path:
    """`path` absolute, its links resolved as far as they exist (what a write there would replace)."""
    try:
        return Path(os.path.realpath(os.path.expanduser(path)))
    except (OSError, ValueError):
        return Path(os.path.abspath(path))


def stdout_path() -> Path | None:
    """The regular file stdout writes to (`> FILE`), when it is one; None for a terminal, a pipe..."""
    try:
        if not stat.S_ISREG(os.fstat(1).st_mode):
            return None
        return Path(os.readlink("/proc/self/fd/1"))
    except (OSError, ValueError):
        return None
