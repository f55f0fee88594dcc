"""Inputs → sources and page refs.

Inputs are files, folders (walked recursively in sorted order, hidden entries skipped, symlink loops
cut) or `-` for a list of paths on stdin. A file's kind comes from its first bytes, not its name.
Every source gets an output key relative to its input root; two sources that would write the same
file are told apart, and the user is told.

Every step for one file (its name, stat, open, sniff, frame count) fails that file alone, as a failed
record with a one-line reason. Special files (FIFOs, devices, sockets) are refused from `stat`, never opened
(opening a FIFO waits for a writer forever). Names are carried as the OS gives them: bytes that are not
UTF-8 ride along as surrogate escapes (`os.fsdecode`), so the output and the manifest name the same file.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Callable, Iterable, Iterator

from .. import pdfium
from ..config import PageSelection
from ..errors import DecodeError, error_line
from ..images import MULTIFRAME, frame_count, open_image
from ..records import Kind, PageRef, PageResult, Source, Status, page_output
from .queue import ClosableQueue

log = logging.getLogger("ocrbatch")

DOC_SUFFIXES = {".pdf", ".png", ".jpg", ".jpeg", ".jpe", ".jfif", ".tif", ".tiff", ".webp", ".bmp", ".gif"}


def sniff(head: bytes) -> Kind | None:
    """The document kind from a file's first bytes."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return Kind.PNG
    if head.startswith(b"\xff\xd8\xff"):
        return Kind.JPEG
    if head[:4] in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"):
        return Kind.TIFF
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return Kind.WEBP
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return Kind.GIF
    if head[:2] == b"BM" and len(head) >= 26:
        return Kind.BMP
    if b"%PDF-" in head[:1024]:  # the spec allows junk before the header
        return Kind.PDF
    return None


def _describe(head: bytes) -> str:
    if not head:
        return "empty file (0 bytes)"
    sample = head[:512]
    try:
        sample.decode("utf-8")
        return "not a PDF or image: it holds plain text"
    except UnicodeDecodeError:
        return "not a PDF or image this tool can read"


@dataclass(frozen=True)
class Candidate:
    path: Path  # absolute, resolved: identity of the file
    display: str  # as the user named it (or as walked)
    rel: PurePosixPath  # path relative to its input root, as named: the output mirrors it


@dataclass
class Discovery:
    """What discovery found, as it goes (read by the orchestrator for totals)."""

    sources: int = 0
    pages: int = 0
    missing_inputs: list[str] = field(default_factory=list)
    renamed: list[tuple[str, str]] = field(default_factory=list)  # (source, new output key)


def read_path_list(stream: IO[str], null_separated: bool) -> list[str]:
    """Paths listed on `stream`, read as bytes when it has them so that any name survives (os.fsdecode)."""
    raw = getattr(stream, "buffer", None)
    if raw is not None:
        data = raw.read()
        parts = data.split(b"\0") if null_separated else [p.rstrip(b"\r") for p in data.split(b"\n")]
        return [os.fsdecode(p) for p in parts if p.strip()]
    text = stream.read()
    parts = text.split("\0") if null_separated else text.splitlines()
    return [p for p in parts if p.strip()]


def printable(name: str) -> str:
    """A name for messages: undecodable bytes shown as \\xNN instead of lone surrogates."""
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        return os.fsencode(name).decode("utf-8", "backslashreplace")


def special_kind(mode: int) -> str | None:
    """What a file that is neither a regular file nor a folder is, in words; None for those two."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    for test, what in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return what
    return "not a regular file"


def _stat_error(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "symlink loop (the link points back to itself)"
    return f"cannot read: {exc.strerror or exc}"


def _rel_to_cwd(path: Path) -> PurePosixPath:
    """Mirror a listed path below the current folder; one outside it keeps only its name."""
    rel = os.path.relpath(os.path.abspath(path), os.getcwd())
    if rel.startswith(".."):
        return PurePosixPath(path.name)
    return PurePosixPath(Path(rel).as_posix())


def iter_candidates(inputs: Iterable[str], stdin: IO[str] | None, null_separated: bool,
                    skip_dirs: Iterable[Path], found: Discovery) -> Iterator[Candidate | PageResult]:
    """Candidates, or a failed result for an input that cannot be one (the run goes on)."""
    skip = {p.resolve() for p in skip_dirs}
    seen: set[Path] = set()
    for raw in inputs:
        if raw == "-":
            listed = read_path_list(stdin, null_separated) if stdin is not None else []
            for line in listed:
                yield from _expand_safely(line, True, seen, skip, found)
        else:
            yield from _expand_safely(raw, False, seen, skip, found)


def _expand_safely(raw: str, listed: bool, seen: set[Path], skip: set[Path],
                   found: Discovery) -> Iterator[Candidate | PageResult]:
    display = printable(raw)
    try:
        yield from _expand(Path(raw).expanduser(), display, listed, seen, skip, found)
    except (OSError, RuntimeError, ValueError) as exc:  # a name or a tree this input cannot get past
        why = _stat_error(exc) if isinstance(exc, OSError) else error_line(exc)
        yield PageResult.failed_file(Path(os.path.abspath(raw)), display, why)


def _expand(path: Path, display: str, listed: bool, seen: set[Path], skip: set[Path],
            found: Discovery) -> Iterator[Candidate | PageResult]:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        found.missing_inputs.append(display)
        log.error("%s: no such file or directory", display)
        return
    except OSError as exc:
        where = Path(os.path.abspath(path))
        if where not in seen:
            seen.add(where)
            yield PageResult.failed_file(where, display, _stat_error(exc))
        return
    if stat.S_ISDIR(st.st_mode):
        base = _rel_to_cwd(path) if listed else PurePosixPath()
        yield from _walk(path, base, seen, skip)
        return
    special = special_kind(st.st_mode)
    if special:
        yield PageResult.failed_file(Path(os.path.abspath(path)), display,
                                     f"{special}, not a document: refused without opening it")
        return
    resolved = path.resolve()
    if resolved not in seen:
        seen.add(resolved)
        rel = _rel_to_cwd(path) if listed else PurePosixPath(path.name)
        yield Candidate(resolved, display, rel)


def _walk(top: Path, base: PurePosixPath, seen: set[Path],
          skip: set[Path]) -> Iterator[Candidate | PageResult]:
    visited_dirs: set[tuple[int, int]] = set()
    for dirpath, dirnames, filenames in os.walk(top, followlinks=True):
        try:
            st = os.stat(dirpath)
        except OSError:
            dirnames[:] = []
            continue
        if (st.st_dev, st.st_ino) in visited_dirs:  # a symlink loop, or the same folder twice
            dirnames[:] = []
            continue
        visited_dirs.add((st.st_dev, st.st_ino))
        here = Path(dirpath)
        kept = []
        for d in sorted(dirnames):
            try:
                if not d.startswith(".") and (here / d).resolve() not in skip:
                    kept.append(d)
            except (OSError, RuntimeError):
                continue
        dirnames[:] = kept
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            full = here / name
            try:
                st = os.stat(full)  # follows links; FIFOs, devices and sockets are skipped unopened
                if not stat.S_ISREG(st.st_mode):
                    continue
                resolved = full.resolve()
                if resolved in seen:
                    continue
                if full.suffix.lower() not in DOC_SUFFIXES:
                    with open(resolved, "rb") as fh:
                        if sniff(fh.read(1024)) is None:
                            continue  # not a document: ignore quietly
            except (OSError, RuntimeError) as exc:
                if full.suffix.lower() in DOC_SUFFIXES and (
                        isinstance(exc, RuntimeError) or exc.errno in (errno.ELOOP, errno.EACCES, errno.EIO)):
                    why = _stat_error(exc) if isinstance(exc, OSError) else "symlink loop"
                    where = Path(os.path.abspath(full))
                    if where not in seen:
                        seen.add(where)
                        yield PageResult.failed_file(where, printable(str(full)), why)
                continue  # a dangling link, a file gone meanwhile: not there
            seen.add(resolved)
            rel = base / PurePosixPath(full.relative_to(top).as_posix())
            yield Candidate(resolved, printable(str(full)), rel)


def _probe(cand: Candidate) -> tuple[Kind, int, os.stat_result]:
    """Kind and page count of a candidate; raises DecodeError with a user-facing reason."""
    try:
        st = os.stat(cand.path)
        special = special_kind(st.st_mode)
        if special:  # replaced since it was found
            raise DecodeError(f"{special}, not a document: refused without opening it")
        # O_NONBLOCK: should it have become a FIFO after all, opening it must not wait for a writer.
        fd = os.open(cand.path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise DecodeError("not a regular file: refused")
            head = fh.read(1024)
    except OSError as exc:
        raise DecodeError(_stat_error(exc)) from exc
    kind = sniff(head)
    if kind is None:
        raise DecodeError(_describe(head))
    if kind is Kind.PDF:
        count = pdfium.page_count(cand.path)
        if count == 0:
            raise DecodeError("the PDF has no pages")
        return kind, count, st
    from PIL import UnidentifiedImageError

    try:
        with open_image(cand.path) as im:
            count = frame_count(im, kind)
    except (UnidentifiedImageError, OSError, ValueError, EOFError, SyntaxError) as exc:
        raise DecodeError(f"cannot read the {kind.value.upper()} image: {exc}") from exc
    return kind, count, st


probe = _probe  # the Python API probes what it is given the same way


class KeyClaims:
    """Output keys taken so far; case-insensitive, since some file systems are."""

    def __init__(self) -> None:
        self._taken: set[str] = set()

    def claim(self, cand: Candidate, kind: Kind, multipage: bool, page_count: int,
              found: Discovery) -> PurePosixPath:
        rel = cand.rel
        stem = rel.with_suffix("") if rel.suffix else rel
        options = [stem, stem.with_name(rel.name)] + [stem.with_name(f"{stem.name}-{i}") for i in range(2, 1000)]
        for n, key in enumerate(options):
            names = self._names(key, multipage, page_count)
            if not names & self._taken:
                self._taken |= names
                if n:
                    found.renamed.append((cand.display, key.as_posix()))
                return key
        raise DecodeError("too many inputs map to the same output name")

    @staticmethod
    def _names(key: PurePosixPath, multipage: bool, page_count: int) -> set[str]:
        names = {"stem:" + key.as_posix().casefold()}
        names |= {page_output(key, multipage, p).as_posix().casefold() for p in range(1, page_count + 1)}
        return names


def discover(inputs: Iterable[str], *, stdin: IO[str] | None, null_separated: bool,
             pages: PageSelection | None, skip_dirs: Iterable[Path], found: Discovery,
             is_done: Callable[[PageRef], bool], force: bool,
             emit_page: Callable[[PageRef], None], emit_result: Callable[[PageResult], None]) -> None:
    """Walk the inputs; hand each page to `emit_page`, or a skip/failure record to `emit_result`."""
    claims = KeyClaims()
    for cand in iter_candidates(inputs, stdin, null_separated, skip_dirs, found):
        if isinstance(cand, PageResult):
            emit_result(cand)
            continue
        try:
            kind, count, st = _probe(cand)
            multipage = kind is Kind.PDF or (kind in MULTIFRAME and count > 1)
            key = claims.claim(cand, kind, multipage, count, found)
        except DecodeError as exc:
            emit_result(PageResult.failed_file(cand.path, cand.display, str(exc)))
            continue
        except Exception as exc:  # noqa: BLE001 - a reader's own bug fails this file only
            log.debug("probing %s failed", cand.display, exc_info=True)
            emit_result(PageResult.failed_file(cand.path, cand.display, f"cannot read: {error_line(exc)}"))
            continue
        source = Source(cand.path, cand.display, kind, key, st.st_size, st.st_mtime_ns, count, multipage)
        found.sources += 1
        selected = pages.select(count) if pages else list(range(1, count + 1))
        for page in selected:
            ref = PageRef(source, page)
            found.pages += 1
            if not force and is_done(ref):
                emit_result(PageResult(ref=ref, status=Status.SKIPPED))
            else:
                emit_page(ref)


def run(inputs: Iterable[str], refs: ClosableQueue[PageRef], results: ClosableQueue[PageResult], **how) -> None:
    """The discover stage: pages to `refs`, skips and failed files to `results` (`how`: discover's options);
    closes both when done."""
    try:
        discover(inputs, emit_page=refs.put, emit_result=results.put, **how)
    finally:
        refs.close()
        results.close()
