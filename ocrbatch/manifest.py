"""OUT/manifest.jsonl: one JSON record per page, the latest state of each.

During a run records are appended as pages finish, each line in one write (cut back off if the disk
fills halfway through it), so a crash loses nothing and the file is always whole JSON lines; at the end
the file is rewritten atomically with one line per page, from what the file holds then (so records another
writer added are kept). A rerun reads it to skip finished pages; a line cut short by an older crash, or a
record whose fields have the wrong types (edited by hand, written by another tool), is ignored with a warning.

An output name belongs to the source whose record names it (the latest such record, should older files
disagree): discovery gives a source the names it holds and never gives them to another one, and a page is done
only while the name it was written under is still its source's.

With --shard I/N each part writes its own `OUT/manifest.shard-I-of-N.jsonl` (`shard_name`), the same way; every
run also reads the folder's other manifests (read only), so that resume and output names see what the other
parts, or runs without --shard, did: of two records of one page, the one finished last counts. `merge` folds them
all into manifest.jsonl (`ocrbatch merge-manifests OUT`, while no run writes into the folder).

File names that are not valid UTF-8 keep their undecodable bytes as surrogate escapes (Python's
`surrogateescape`), written as `\\udcXX` JSON escapes: `os.fsencode(record["source"])` gives the name's bytes.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from pathlib import Path, PurePosixPath
from typing import Any, Iterator

from . import atomic, safefiles
from .errors import OutputWriteError, UsageError
from .records import Kind, PageRef, PageResult, Source, Status, page_output

log = logging.getLogger("ocrbatch")

NAME = "manifest.jsonl"
SHARDS = "manifest.shard-*-of-*.jsonl"  # the parts' manifests (--shard), as a glob
MAX_LINE_BYTES = 1 << 20  # a record longer than this (1 MB) is not one ocrbatch wrote: skipped with a warning
MAX_BYTES = 4 << 30  # a manifest larger than this (4 GB, some 8 million pages) is refused, not read into memory
DONE = {Status.OK.value, Status.TRUNCATED.value, Status.SKIPPED.value}
# What a PDF page's output depends on beside the engine (--dpi, --text-layer); records written before these
# were recorded are taken to have been made with the defaults.
PDF_OPTION_DEFAULTS = {"dpi": 150, "text_layer": "auto"}

_PAGE_FILE = re.compile(r"page-\d{4,}\.md")  # records.page_output's name for a page of a multi-page source
_INT_OR_NONE = (lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool)))
_STR_OR_NONE = (lambda v: v is None or isinstance(v, str))
# The fields a record must have (or leave out) with these types to be read; anything else is skipped.
_FIELD_TYPES = {
    "page": _INT_OR_NONE, "output": _STR_OR_NONE, "status": _STR_OR_NONE, "engine": _STR_OR_NONE,
    "source_size": _INT_OR_NONE, "source_mtime_ns": _INT_OR_NONE, "finished_at": _STR_OR_NONE,
    "done_as": _STR_OR_NONE, "error": _STR_OR_NONE, "shortened_from": _STR_OR_NONE,
    "timings": lambda v: isinstance(v, dict), "info": lambda v: isinstance(v, dict),
    "options": lambda v: isinstance(v, dict),
    "attachments": lambda v: isinstance(v, list) and all(isinstance(a, str) for a in v),
}


def well_formed(rec: Any) -> bool:
    """A record this module can use: an object with a string `source` and every known field of its type."""
    return (isinstance(rec, dict) and isinstance(rec.get("source"), str)
            and all(check(rec[k]) for k, check in _FIELD_TYPES.items() if k in rec))


def output_stem(output: str) -> PurePosixPath:
    """The key of the source an output file was written for: `a/b.md` is the single page (or the joined
    document) of `a/b`, `a/b/page-0001.md` page 1 of `a/b`."""
    path = PurePosixPath(output)
    return path.parent if _PAGE_FILE.fullmatch(path.name) and path.parent.name else path.with_suffix("")


def output_names(output: str) -> set[str]:
    """The names an output file holds for claims (pipeline/discover.py: the file, and the stem its source's key
    has: output_stem)."""
    return {output.casefold(), "stem:" + output_stem(output).as_posix().casefold()}


def _key(source: str, page: int | None) -> tuple[str, int]:
    return (source, page or 0)


def dumps(rec: dict[str, Any]) -> str:
    """One manifest line: UTF-8 text as is, but surrogate escapes (undecodable file-name bytes) as \\u escapes."""
    line = json.dumps(rec, ensure_ascii=False)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(rec, ensure_ascii=True)
    return line


def check(path: Path) -> None:
    """The manifest is a regular file of a size ocrbatch could have written, or absent; UsageError (exit 2)
    otherwise: a FIFO, a device, a folder or a link to one, or a file over MAX_BYTES."""
    st = safefiles.check_file(path, "the manifest")
    if st is not None and st.st_size > MAX_BYTES:
        raise UsageError(f"the manifest {path} is {st.st_size / 2**30:.1f} GiB, over the {MAX_BYTES >> 30} GiB "
                         "ocrbatch reads: it is not one ocrbatch wrote (move it away, or choose another -o)")


def read_records(path: Path, *, warn: bool = False) -> Iterator[dict[str, Any]]:
    """The records in `path`, in order; lines that are not whole JSON records (cut short, nested too deep,
    over MAX_LINE_BYTES), and records whose fields have the wrong types, are skipped (with a warning when
    `warn`). A path that is not a regular file, or too large, raises UsageError (`check`)."""
    cut = malformed = long = 0
    check(path)
    try:
        fd = safefiles.open_file(path, os.O_RDONLY, "the manifest")
    except FileNotFoundError:
        return
    with os.fdopen(fd, "rb") as fh:
        for raw in safefiles.lines(fh, MAX_LINE_BYTES):
            if raw is None:
                long += 1
                continue
            line = raw.decode("utf-8", errors="surrogateescape").strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except (ValueError, RecursionError):  # JSONDecodeError; a line of brackets nested too deep
                cut += 1  # a line cut short by a crash, or not ocrbatch's
                continue
            if well_formed(rec):
                yield rec
            else:
                malformed += 1
    if cut and warn:
        log.warning("%s: ignored %d line(s) that are not whole JSON records (cut short when an earlier "
                    "run was stopped); their pages will be redone", path, cut)
    if long and warn:
        log.warning("%s: ignored %d line(s) over %d bytes (not records ocrbatch wrote); their pages will be "
                    "redone", path, long, MAX_LINE_BYTES)
    if malformed and warn:
        log.warning("%s: ignored %d record(s) whose fields have the wrong type (e.g. a page number in quotes); "
                    "their pages will be redone", path, malformed)


def shard_name(shard: str) -> str:
    """The manifest of part `shard` (config.Shard.name: shard-I-of-N)."""
    return f"manifest.{shard}.jsonl"


def manifest_files(out_dir: Path) -> list[Path]:
    """Every manifest in `out_dir`: manifest.jsonl (if there), then the parts', in name order."""
    main = out_dir / NAME
    return ([main] if main.is_file() else []) + sorted(out_dir.glob(SHARDS))


def latest_records(paths: list[Path], warn: bool = False) -> dict[tuple[str, int], str]:
    """The latest record of each page in `paths` (as its JSON line): within a file the last one, across files
    the one finished last (the later file's on a tie)."""
    latest: dict[tuple[str, int], str] = {}
    for path in paths:
        mine: dict[tuple[str, int], str] = {}
        for rec in read_records(path, warn=warn):
            mine[_key(rec["source"], rec.get("page"))] = dumps(rec)
        if not latest:
            latest = mine
            continue
        for key, line in mine.items():
            earlier = latest.get(key)
            if earlier is None or _finished(line) >= _finished(earlier):
                latest[key] = line
    return latest


def _finished(line: str) -> str:
    return json.loads(line).get("finished_at") or ""


def merge(out_dir: Path) -> tuple[int, int]:
    """Fold every manifest of `out_dir` into manifest.jsonl (atomically) and remove the parts' files; (records
    written, files read). The caller holds the folder's lock."""
    paths = manifest_files(out_dir)
    latest = latest_records(paths, warn=True)
    target = out_dir / NAME
    if latest:
        _rewrite(target, latest)
    for path in paths:
        if path != target:
            path.unlink(missing_ok=True)
    return len(latest), len(paths)


def _rewrite(path: Path, latest: dict[tuple[str, int], str]) -> None:
    fd, tmp = atomic.temporary(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            for key in sorted(latest):
                fh.write(latest[key].encode("utf-8") + b"\n")
        atomic.finish(tmp, path)
    except BaseException:
        atomic.discard(tmp)
        raise


class Manifest:
    """`pdf_options`: what a PDF page's output depends on beside the engine ({"dpi", "text_layer"}), recorded
    with each PDF page and compared on resume; None: neither recorded nor compared. `name`: the file this run
    writes (a part's: shard_name); the folder's other manifests are read too."""

    def __init__(self, out_dir: Path, engine_identity: str, pdf_options: dict[str, Any] | None = None,
                 name: str = NAME) -> None:
        self.path = out_dir / name
        self.out_dir = out_dir
        self.engine_identity = engine_identity
        self.pdf_options = pdf_options
        # The latest record per page, kept as its JSON line: a third of the memory of the dict.
        others = [p for p in manifest_files(out_dir) if p != self.path] if out_dir.is_dir() else []
        self._latest: dict[tuple[str, int], str] = latest_records(others + [self.path], warn=True)
        # Who holds each output name (output_names), and when it was written: the latest writer wins.
        self._holders: dict[str, tuple[str, str]] = {}  # name → (finished_at, source)
        self._held: dict[str, set[str]] = {}  # source → the output files its records name, as written
        self._source_names: dict[str, str] = {}
        for line in self._latest.values():
            rec = json.loads(line)
            if rec.get("output"):
                self._hold(rec["source"], rec["output"], rec.get("finished_at") or "")
        self._fd: int | None = None

    def _hold(self, source: str, output: str, when: str) -> None:
        held = self._held.setdefault(source, set())
        source = self._source_names.setdefault(source, source)  # one string per source, whatever its pages
        held.add(output)
        for name in output_names(output):
            earlier = self._holders.get(name)
            if earlier is None or earlier[1] == source or earlier[0] <= when:
                self._holders[name] = (when, source)

    # -- output names (pipeline/discover.py: KeyClaims) ---------------------------------------------------
    def held(self, source: str) -> set[str]:
        """The output files that records of `source` name, as written (not casefolded)."""
        return set(self._held.get(source, ()))

    def holder(self, name: str) -> str | None:
        """The source whose record names `name` (an output file or a "stem:" name, casefolded), if any."""
        held = self._holders.get(name)
        return held[1] if held else None

    def _get(self, source: str, page: int | None) -> dict[str, Any] | None:
        line = self._latest.get(_key(source, page))
        return None if line is None else json.loads(line)

    def is_done(self, ref: PageRef) -> bool:
        """Done earlier for this very file (size and mtime) with this engine and these PDF options, and its
        output is there under the same name (discovery gives a source a name only while it holds it: no other
        source's record has taken it since)."""
        rec = self._get(str(ref.source.path), ref.page)
        return bool(
            rec
            and rec.get("status") in DONE
            and rec.get("engine") == self.engine_identity
            and rec.get("source_size") == ref.source.size
            and rec.get("source_mtime_ns") == ref.source.mtime_ns
            and rec.get("output") == ref.output.as_posix()
            and self._same_options(ref, rec)
            and (self.out_dir / ref.output).is_file()
        )

    def _same_options(self, ref: PageRef, rec: dict[str, Any]) -> bool:
        if self.pdf_options is None or ref.source.kind is not Kind.PDF:
            return True
        return {**PDF_OPTION_DEFAULTS, **rec.get("options", {})} == {**PDF_OPTION_DEFAULTS, **self.pdf_options}

    def attachments(self, ref: PageRef) -> list[str]:
        """Files an earlier run wrote beside this page's Markdown (relative to the output folder)."""
        return list((self._get(str(ref.source.path), ref.page) or {}).get("attachments", []))

    def record(self, result: PageResult, engine_identity: str) -> dict[str, Any]:
        ref = result.ref
        rec: dict[str, Any] = {
            "source": str(ref.source.path) if ref else result.source_path,
            "page": ref.page if ref else None,
            "output": ref.output.as_posix() if ref and result.status is not Status.FAILED else None,
            "status": result.status.value,
            "engine": engine_identity,
            "error": result.error,
            "timings": {k: round(v, 4) for k, v in result.timings.items()},
            "source_size": ref.source.size if ref else None,
            "source_mtime_ns": ref.source.mtime_ns if ref else None,
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        if ref is not None and ref.source.full_key is not None and rec["output"] is not None:
            rec["shortened_from"] = page_output(ref.source.full_key, ref.source.multipage, ref.page,
                                                ref.source.digits).as_posix()
        if ref is not None and ref.source.kind is Kind.PDF and self.pdf_options is not None:
            rec["options"] = dict(self.pdf_options)
        if result.info:
            rec["info"] = result.info
        if result.attachments and result.status is not Status.FAILED:
            rec["attachments"] = [a.relpath.as_posix() for a in result.attachments]
        if result.status is Status.SKIPPED:
            # A skip keeps what the earlier run measured and found, so the manifest stays the page's history.
            earlier = self._get(rec["source"], rec["page"]) or {}
            rec["done_as"] = earlier.get("done_as") or earlier.get("status")
            rec["timings"] = earlier.get("timings", {})
            for kept in ("attachments", "info"):
                if earlier.get(kept):
                    rec[kept] = earlier[kept]
            rec["finished_at"] = earlier.get("finished_at", rec["finished_at"])
        self._append(rec)
        if rec["output"] is not None:
            self._hold(rec["source"], rec["output"], rec["finished_at"])
        return rec

    # -- documents (convert --join: pipeline/outputs.py) -------------------------------------------------
    def page_record(self, source: Source, page: int) -> dict[str, Any] | None:
        """The latest record of a page of this very file (same size and mtime) and engine; None if none."""
        rec = self._get(str(source.path), page)
        if rec is None or rec.get("engine") != self.engine_identity or rec.get("source_size") != source.size \
                or rec.get("source_mtime_ns") != source.mtime_ns:
            return None
        return rec

    def document_record(self, source: Source) -> dict[str, Any] | None:
        """The record of the document's joined Markdown (--join), if it has one."""
        rec = self._get(str(source.path), None)
        return rec if rec is not None and isinstance(rec.get("joined"), list) else None

    def record_document(self, source: Source, output: str, pages: list[int], engine_identity: str) -> None:
        """The document's joined Markdown was written: one record for the document (page null), `joined` its
        pages; its name is the source's, as its pages' are."""
        rec = {"source": str(source.path), "page": None, "output": output, "status": Status.OK.value,
               "engine": engine_identity, "error": None, "joined": pages, "source_size": source.size,
               "source_mtime_ns": source.mtime_ns, "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        self._append(rec)
        self._hold(rec["source"], output, rec["finished_at"])

    def _append(self, rec: dict[str, Any]) -> None:
        """Add one whole line; raises OutputWriteError (and leaves the file as it was) when it cannot."""
        line = dumps(rec)
        data = (line + "\n").encode("utf-8")
        try:
            if self._fd is None:
                self._fd = self._open_for_append()
            start = os.fstat(self._fd).st_size
            try:
                written = 0
                while written < len(data):
                    written += os.write(self._fd, data[written:])
            except OSError:
                os.ftruncate(self._fd, start)  # never leave half a line
                raise
        except OSError as exc:
            raise OutputWriteError(f"cannot write {self.path}: {exc.strerror or exc}; stopped (pages done "
                                   "so far are kept: fix it and rerun to continue)") from exc
        self._latest[_key(rec["source"], rec["page"])] = line

    def _open_for_append(self) -> int:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        fd = safefiles.open_file(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, "the manifest", atomic.file_mode())
        try:
            _cut_partial_line(fd)
        except OSError:
            os.close(fd)
            raise
        return fd

    def close(self) -> None:
        """Rewrite the file with one line per page (the latest), atomically. When that cannot be done, the
        appended file stays: whole lines, the latest record of a page last; a disk full, a read-only file
        system and their kind (atomic.is_fatal) raise OutputWriteError then, other errors are a warning."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if not self._latest:
            return
        latest: dict[tuple[str, int], str] = {}
        for rec in read_records(self.path):  # what the file holds now, other writers' records included
            latest[_key(rec["source"], rec.get("page"))] = dumps(rec)
        if not latest:
            return
        try:
            _rewrite(self.path, latest)
        except OSError as exc:
            if atomic.is_fatal(exc):
                raise OutputWriteError(f"cannot rewrite {self.path} at the end of the run: {exc.strerror or exc}; "
                                       "it keeps whole lines, several for pages done more than once (pages done "
                                       "are kept: fix it and rerun to continue)") from exc
            log.warning("cannot compact %s (%s); it keeps one line per page and run", self.path,
                        exc.strerror or exc)


def _cut_partial_line(fd: int) -> None:
    """Cut a last line without its newline (a write cut short by a crash), so appends start a fresh line."""
    size = os.fstat(fd).st_size
    end = size
    while end > 0:
        begin = max(0, end - 65536)
        chunk = os.pread(fd, end - begin, begin)
        if end == size and chunk.endswith(b"\n"):
            return
        nl = chunk.rfind(b"\n")
        if nl >= 0:
            os.ftruncate(fd, begin + nl + 1)
            return
        end = begin
    if size:
        os.ftruncate(fd, 0)
