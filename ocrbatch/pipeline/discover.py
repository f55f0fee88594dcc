"""Inputs → sources and page refs.

Inputs are files, folders (walked recursively in sorted order, hidden entries skipped, symlink loops
cut) or `-`: a list of paths on stdin, each taken as it arrives, or one document (stdin.py says which).
A file's kind comes from its first bytes, not its name. Every source gets an output key relative to its input root (names.py: told apart from other
sources', now and in earlier runs; shortened when too long for the file system), and the user is told.

Every step for one file (its name, stat, open, sniff, frame count) fails that file alone, as a failed
record with a one-line reason; so does a folder that cannot be read and, in a walk, a link to nothing
that is named like a document. With --shard I/N only the sources of that part are taken (config.Shard: by a
hash of the relative path less its extension); an input that is no file at all (a folder that cannot be read)
is recorded by part 1 alone. Special files (FIFOs, devices, sockets) are refused from `stat`, never opened
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

from ..config import PageSelection, RunConfig, Shard
from ..errors import DecodeError, error_line
from ..images import MULTIFRAME
from ..records import DOC_SUFFIXES, Kind, PageRef, PageResult, Source, Status, page_output
from .probe import Probed, probe as probe_path, sniff, special_kind, stat_error
from .names import NAME_MAX, KeyClaims, NameBook, composed, natural_key
from .queue import ClosableQueue
from .stdin import NAME as STDIN_NAME, paths_or_document

log = logging.getLogger("ocrbatch")


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
    shortened: list[tuple[str, str]] = field(default_factory=list)  # (source, output key cut to fit)
    quiet: bool = False  # a walk that only counts (count.py): what it meets is said by discovery itself


def printable(name: str) -> str:
    """A name for messages: undecodable bytes shown as \\xNN instead of lone surrogates."""
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        return os.fsencode(name).decode("utf-8", "backslashreplace")


def _rel_to_cwd(path: Path) -> PurePosixPath:
    """Mirror a listed path below the current folder; one outside it keeps only its name."""
    rel = os.path.relpath(os.path.abspath(path), os.getcwd())
    if rel.startswith(".."):
        return PurePosixPath(path.name)
    return PurePosixPath(Path(rel).as_posix())


def iter_candidates(inputs: Iterable[str], stdin: IO[str] | None, null_separated: bool,
                    skip_dirs: Iterable[Path], found: Discovery,
                    stopped: Callable[[], bool] = lambda: False,
                    spool: Path | None = None) -> Iterator[Candidate | PageResult]:
    """Candidates, or a failed result for an input that cannot be one (the run goes on). `spool`: where a
    document on stdin is kept while the run reads it (None: stdin is a list of paths, whatever it holds)."""
    skip = _Skip(skip_dirs)
    seen: set[Path] = set()
    for raw in inputs:
        if raw != "-":
            yield from _expand_safely(raw, False, seen, skip, found)
            continue
        got = paths_or_document(stdin, null_separated, spool, stopped) if stdin is not None else None
        if isinstance(got, Path):
            yield Candidate(got.resolve(), STDIN_NAME, PurePosixPath(STDIN_NAME))
            continue
        for line in got or ():
            yield from _expand_safely(line, True, seen, skip, found)


def _expand_safely(raw: str, listed: bool, seen: set[Path], skip: "_Skip",
                   found: Discovery) -> Iterator[Candidate | PageResult]:
    display = printable(raw)
    try:
        yield from _expand(Path(raw).expanduser(), display, listed, seen, skip, found)
    except (OSError, RuntimeError, ValueError) as exc:  # a name or a tree this input cannot get past
        why = stat_error(exc) if isinstance(exc, OSError) else error_line(exc)
        yield PageResult.failed_file(Path(os.path.abspath(raw)), display, why)


def _expand(path: Path, display: str, listed: bool, seen: set[Path], skip: "_Skip",
            found: Discovery) -> Iterator[Candidate | PageResult]:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        found.missing_inputs.append(display)
        if not found.quiet:
            log.error("%s: no such file or directory", display)
        return
    except OSError as exc:
        where = Path(os.path.abspath(path))
        if where not in seen:
            seen.add(where)
            yield PageResult.failed_file(where, display, stat_error(exc))
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


def _identity(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


class _Skip:
    """The folders a walk leaves out (the output, --debug-layout's): by device and inode, not by resolved path
    (resolving each folder of a tree 1,500 deep is quadratic); one not there yet (made during the run) by path."""

    def __init__(self, folders: Iterable[Path]) -> None:
        self.ids: set[tuple[int, int]] = set()
        self.paths: set[Path] = set()
        for folder in folders:
            try:
                self.ids.add(_identity(folder))
            except OSError:
                self.paths.add(folder.resolve())

    def __contains__(self, folder: Path) -> bool:
        return _identity(folder) in self.ids or (bool(self.paths) and folder.resolve() in self.paths)


def _walk(top: Path, base: PurePosixPath, seen: set[Path],
          skip: "_Skip") -> Iterator[Candidate | PageResult]:
    visited_dirs: set[tuple[int, int]] = set()
    unreadable: list[OSError] = []  # folders os.walk could not list (it goes on without them)
    for dirpath, dirnames, filenames in _tree(top, unreadable.append):
        yield from _unreadable_folders(unreadable, seen)
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
            try:  # by identity, not by resolved path: resolving each folder of a deep tree is quadratic
                if not d.startswith(".") and here / d not in skip:
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
                why = _walk_error(full, exc)
                where = Path(os.path.abspath(full))
                if why is not None and where not in seen:
                    seen.add(where)
                    yield PageResult.failed_file(where, printable(str(full)), why)
                continue
            seen.add(resolved)
            rel = base / PurePosixPath(full.relative_to(top).as_posix())
            yield Candidate(resolved, printable(str(full)), rel)
    yield from _unreadable_folders(unreadable, seen)


def _tree(top: Path, onerror: Callable[[OSError], None]) -> Iterator[tuple[str, list[str], list[str]]]:
    """os.walk(top, followlinks=True), top-down, on a stack of its own: a tree of any depth is walked (os.walk
    recurses, and a tree 1,500 folders deep was a RecursionError). `dirnames` may be pruned in place."""
    stack = [os.fspath(top)]
    while stack:
        path = stack.pop()
        try:
            with os.scandir(path) as it:
                entries = list(it)
        except OSError as exc:
            onerror(exc)
            continue
        dirs: list[str] = []
        files: list[str] = []
        for entry in entries:
            try:
                folder = entry.is_dir()  # through links, as followlinks=True
            except OSError:
                folder = False
            (dirs if folder else files).append(entry.name)
        yield path, dirs, files
        stack.extend(os.path.join(path, d) for d in reversed(dirs))


def _unreadable_folders(errors: list[OSError], seen: set[Path]) -> Iterator[PageResult]:
    """A failed record for each folder a walk could not list (one gone meanwhile is not there: no record)."""
    while errors:
        exc = errors.pop(0)
        name = os.fsdecode(exc.filename) if exc.filename is not None else "?"
        where = Path(os.path.abspath(name))
        if isinstance(exc, FileNotFoundError) or where in seen:
            continue
        seen.add(where)
        yield PageResult.failed_file(where, printable(name), f"cannot read the folder: {exc.strerror or exc}")


def _walk_error(full: Path, exc: BaseException) -> str | None:
    """Why a file met in a walk is a failed input, or None when it is not there after all (gone meanwhile, or
    a link to nothing not named like a document). Unreadable files count when named like a document."""
    if isinstance(exc, FileNotFoundError):
        try:
            target = os.readlink(full)
        except OSError:
            return None  # gone meanwhile
        if full.suffix.lower() in DOC_SUFFIXES or Path(target).suffix.lower() in DOC_SUFFIXES:
            return f"dangling symlink: it points to {printable(target)}, which does not exist"
        return None
    if full.suffix.lower() not in DOC_SUFFIXES:
        return None
    if isinstance(exc, RuntimeError):
        return "symlink loop"
    if isinstance(exc, OSError) and exc.errno in (errno.ELOOP, errno.EACCES, errno.EIO):
        return stat_error(exc)
    return None


def probe_file(cand: Candidate) -> Probed:
    """`cand` probed (probe.py: kind by content, pages checked, remembered per file)."""
    return probe_path(cand.path)


def probe(cand: Candidate) -> tuple[Kind, int, os.stat_result]:
    """Kind, page count and stat of a candidate, as discovery finds them (the Python API and serve probe what
    they are given so); raises DecodeError with a user-facing reason."""
    got = probe_path(cand.path)
    return got.kind, got.count, got.st


def _selection_text(pages: PageSelection) -> str:
    return ",".join(str(a) if a == b else f"{a}-{b or ''}" for a, b in pages.ranges)


def in_shard(cand: Candidate | PageResult, shard: Shard | None) -> bool:
    """Whether part `shard` (None: the whole run) takes `cand`: a file by its stem, a failed input in part 1."""
    if shard is None:
        return True
    if isinstance(cand, PageResult):
        return shard.index == 1
    return shard.takes(natural_key(cand.rel).as_posix())


def discover(inputs: Iterable[str], *, stdin: IO[str] | None, null_separated: bool,
             pages: PageSelection | None, skip_dirs: Iterable[Path], found: Discovery,
             is_done: Callable[[PageRef], bool], force: bool,
             emit_page: Callable[[PageRef], None], emit_result: Callable[[PageResult], None],
             names: NameBook | None = None, name_max: int = NAME_MAX,
             stopped: Callable[[], bool] = lambda: False, shard: Shard | None = None,
             spool: Path | None = None) -> None:
    """Walk the inputs; hand each page to `emit_page`, or a skip/failure record to `emit_result`. `names`: the
    output names earlier runs gave; `stopped`: the run takes no more pages (stop waiting for stdin); `shard`:
    only the sources of that part; `spool`: where a document on stdin is kept (iter_candidates)."""
    claims = KeyClaims(names, name_max)
    for cand in iter_candidates(inputs, stdin, null_separated, skip_dirs, found, stopped, spool):
        if not in_shard(cand, shard):
            continue
        if isinstance(cand, PageResult):
            emit_result(cand)
            continue
        try:
            probed = probe_file(cand)
            kind, count, st = probed.kind, probed.count, probed.st
            multipage = kind is Kind.PDF or (kind in MULTIFRAME and count > 1)
            selected = pages.select(count) if pages else list(range(1, count + 1))
            # the pages its tree claims and lacks: one line and one record, not one a page
            missing = probed.missing(cand.display, cand.path, pages)
            if not selected and missing is not None:
                emit_result(missing)
                continue
            if not selected:
                raise DecodeError(f"--pages {_selection_text(pages)} selects none of its {count} "
                                  f"page{'s' if count > 1 else ''}")
            digits = claims.digits(str(cand.path), count)
            key, full_key, kept = claims.claim(cand.rel, str(cand.path), multipage, count, digits)
            if not kept:  # kept: the name an earlier run gave this very file, named another way then
                _tell_renamed(cand.display, cand.rel, key, full_key, multipage, claims.name_max, found)
        except DecodeError as exc:
            emit_result(PageResult.failed_file(cand.path, cand.display, str(exc)))
            continue
        except Exception as exc:  # noqa: BLE001 - a reader's own bug fails this file only
            log.debug("probing %s failed", cand.display, exc_info=True)
            emit_result(PageResult.failed_file(cand.path, cand.display, f"cannot read: {error_line(exc)}"))
            continue
        source = Source(cand.path, cand.display, kind, key, st.st_size, st.st_mtime_ns, count, multipage,
                        full_key, digits)
        found.sources += 1
        for page in selected:
            ref = PageRef(source, page)
            found.pages += 1
            if not force and is_done(ref):
                emit_result(PageResult(ref=ref, status=Status.SKIPPED))
            else:
                emit_page(ref)
        if missing is not None:
            emit_result(missing)


def _tell_renamed(display: str, rel: PurePosixPath, key: PurePosixPath, full_key: PurePosixPath | None,
                  multipage: bool, name_max: int, found: Discovery) -> None:
    """Note a key other than the source's own name (the summary warns), and a shortened one (a warning now)."""
    if (full_key or key) != natural_key(composed(rel)):
        found.renamed.append((display, key.as_posix()))
    if full_key is not None:
        found.shortened.append((display, key.as_posix()))
        log.warning("%s: its output name would be longer than the file system allows (%d bytes); written as %s",
                    display, name_max, page_output(key, multipage, 1))


def written_folders(config: RunConfig) -> list[Path]:
    """The folders ocrbatch writes, never taken as inputs: the output, and --debug-layout's pictures."""
    debug = config.engine_options.debug_layout
    return [config.output] + ([Path(debug)] if debug else [])


def run(inputs: Iterable[str], refs: ClosableQueue[PageRef], results: ClosableQueue[PageResult],
        shown: Callable[[PageRef | PageResult], None] | None = None, **how) -> None:
    """The discover stage: pages to `refs`, skips and failed files to `results` (`how`: discover's options),
    each shown to `shown` first, in order (`-o -` prints pages as they finish); closes both when done, or soon
    after `refs` is aborted (the run stopping) even while waiting on stdin."""
    emit_page, emit_result = refs.put, results.put
    if shown is not None:
        emit_page, emit_result = _seen(refs.put, shown), _seen(results.put, shown)
    try:
        discover(inputs, emit_page=emit_page, emit_result=emit_result, stopped=lambda: refs.closed, **how)
    finally:
        refs.close()
        results.close()


def _seen(put: Callable, shown: Callable) -> Callable:
    """`put`, each item shown first."""
    def putting(item, *args, **kw) -> None:
        shown(item)
        put(item, *args, **kw)
    return putting
