"""Page results → files: atomic Markdown writes, attachments, one manifest record per page (`run`: the
write stage's loop, on the caller's thread).

A write error that only this page meets (a name the file system refuses, a folder without permission)
fails the page; one that every later write would meet too (disk full, quota, file size limit, read-only
file system, I/O error) raises OutputWriteError, and the run stops with what it finished kept.
"""

from __future__ import annotations

import errno
import logging
import os
import time
from pathlib import Path
from typing import Callable

from ..atomic import atomic_write, is_fatal
from ..errors import OcrbatchError, OutputWriteError, UsageError
from ..config import RunConfig
from ..manifest import NAME as MANIFEST, Manifest, shard_name
from ..records import PageResult, Status
from ..safefiles import RunFiles
from .outputs import Outputs
from .queue import ClosableQueue, Closed

log = logging.getLogger("ocrbatch")


class Writer:
    def __init__(self, out_dir: Path, manifest: Manifest, engine_identity: str, outputs: Outputs | None = None) -> None:
        self.out_dir = out_dir
        self.manifest = manifest
        self.engine_identity = engine_identity
        self.counts = {s: 0 for s in Status}
        self.busy_s = 0.0
        self.last_error: str | None = None
        self.file_failures = 0  # whole files that failed before their pages were known
        # page JSON, joined documents, the review list, a line per file (outputs.py)
        self.outputs = outputs or Outputs(out_dir, manifest, engine_identity)

    def write(self, result: PageResult) -> None:
        t0 = time.perf_counter()
        if result.status in (Status.OK, Status.TRUNCATED) and result.ref is not None:
            rel = result.ref.output  # the file being written: an error names it (the JSON beside, a figure...)
            try:
                self.outputs.add_attachments(result)
                for att in result.attachments:
                    rel = att.relpath
                    atomic_write(self.out_dir / rel, att.data)
                rel = result.ref.output
                text = result.markdown if result.markdown.endswith("\n") else result.markdown + "\n"
                # A file name's undecodable bytes (surrogate escapes) cannot go into UTF-8 text as they are.
                atomic_write(self.out_dir / rel, text.encode("utf-8", errors="replace"))
                self._remove_stale(result)
            except OSError as exc:
                if is_fatal(exc):
                    raise OutputWriteError(f"cannot write {self.out_dir / rel}: "
                                           f"{exc.strerror or exc}; stopped (pages done so far are kept: "
                                           "fix it and rerun to continue)") from exc
                result.status = Status.FAILED
                result.error = f"cannot write {rel}: {exc.strerror or exc}"
        if result.status is Status.FAILED:
            self.last_error = result.message
            self.file_failures += result.ref is None
            log.error("%s", self.last_error)
        elif result.status is Status.TRUNCATED and result.ref is not None:
            log.warning("%s: output truncated at the token limit", result.ref.label)
        result.timings["write_s"] = time.perf_counter() - t0
        rec = self.manifest.record(result, self.engine_identity)
        self.counts[result.status] += 1
        self.outputs.recorded(result, rec)
        self.busy_s += time.perf_counter() - t0

    def _remove_stale(self, result: PageResult) -> None:
        """Figures an earlier run wrote for this page that the new Markdown no longer links."""
        assert result.ref is not None
        now = {a.relpath.as_posix() for a in result.attachments}
        for rel in self.manifest.attachments(result.ref):
            if rel not in now and not rel.startswith("/") and ".." not in rel.split("/"):
                (self.out_dir / rel).unlink(missing_ok=True)


def for_run(config: RunConfig, engine_identity: str, written: Callable[[PageResult], None] | None) -> Writer:
    """A run's writer: its manifest (its shard's, with --shard) and outputs (`written` sees each result once
    written and recorded)."""
    # furniture kept or not changes text-layer pages whatever the engine: resume never mixes the two
    ident = engine_identity + ("+furniture" if config.engine_options.keep_furniture else "")
    # --dpi and --text-layer change what a PDF page becomes: resume compares them too
    manifest = Manifest(config.output, ident, pdf_options={"dpi": config.dpi, "text_layer": config.text_layer},
                        name=shard_name(config.shard.name) if config.shard else MANIFEST)
    outputs = Outputs(config.output, manifest, ident, formats=config.formats, join=config.join,
                      review_below=config.review_below, pages=config.pages, dpi=config.dpi, follow=written,
                      files=RunFiles.of(config.inputs, config.output))
    return Writer(config.output, manifest, ident, outputs)


def run(results: ClosableQueue[PageResult], writer: Writer, busy: Callable[[float], None],
        failures: list[str], keep: int = 100, tick: Callable[[], None] = lambda: None,
        admit: Callable[[PageResult], bool] = lambda result: True) -> None:
    """Write every result `admit` lets through (the ledger: a page's first) until the queue is closed and
    drained; the first `keep` failures' lines are kept. `tick` is called between results, at least every half
    second. Raises OutputWriteError (the run stops)."""
    while True:
        tick()
        try:
            result = results.get(timeout=0.5)
        except Closed:
            return
        if result is not None and admit(result):
            write_one(result, writer, busy, failures, keep)


def write_one(result: PageResult, writer: Writer, busy: Callable[[float], None], failures: list[str],
              keep: int = 100) -> None:
    t0 = time.perf_counter()
    writer.write(result)
    busy(time.perf_counter() - t0)
    if result.status is Status.FAILED and len(failures) < keep:
        failures.append(writer.last_error or "")


def write_all(results: list[PageResult], writer: Writer, busy: Callable[[float], None], failures: list[str]) -> None:
    """The records of the pages a run cut short, at its end; an output that cannot take them (a full disk) is
    said by the run already."""
    try:
        for result in results:
            write_one(result, writer, busy, failures)
    except (OcrbatchError, OSError) as exc:
        log.debug("cannot record the pages cut short: %s", exc)


def check_folders(config: RunConfig) -> None:
    """The folders a run writes, before any work starts: the output, and --debug-layout's (safefiles.py)."""
    check_output(config.output)
    if config.engine_options.debug_layout:
        from ..safefiles import check_folder

        debug = Path(config.engine_options.debug_layout)
        check_folder(debug, "--debug-layout")
        RunFiles.of(config.inputs, config.output).check(debug, "--debug-layout", folder=True)


def check_output(out: Path) -> None:
    """The output folder exists (made if need be) and can be written, before any work starts. A folder that
    cannot be made or written for a reason every write would meet (read-only file system, disk full) raises
    OutputWriteError; a file in the way or a permission UsageError."""
    try:
        there = out.exists()
    except OSError as exc:  # a name over the file system's limit (ENAMETOOLONG), a file as a folder on the way
        raise UsageError(f"cannot use the output folder {out}: {exc.strerror or exc}") from exc
    if there and not out.is_dir():
        raise UsageError(f"output {out} is a file, not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        error = OutputWriteError if is_fatal(exc) else UsageError
        raise error(f"cannot create the output folder {out}: {exc.strerror or exc}") from exc
    if not os.access(out, os.W_OK | os.X_OK):
        if _read_only(out):
            raise OutputWriteError(f"cannot write to the output folder {out}: {os.strerror(errno.EROFS)}")
        raise UsageError(f"cannot write to the output folder {out}: permission denied")


def _read_only(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


__all__ = ["Writer", "atomic_write"]
