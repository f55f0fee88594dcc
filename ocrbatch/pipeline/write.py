"""Page results → files: atomic Markdown writes, attachments, one manifest record per page (`run`: the
write stage's loop, on the caller's thread).

A write error that only this page meets (a name the file system refuses, a folder without permission)
fails the page; one that every later write would meet too (disk full, quota, file size limit, read-only
file system, I/O error) raises OutputWriteError, and the run stops with what it finished kept.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any, Callable

from ..atomic import atomic_write, is_fatal
from ..config import PageSelection
from ..errors import OutputWriteError, UsageError
from ..manifest import Manifest
from ..records import PageResult, Status
from .queue import ClosableQueue, Closed

log = logging.getLogger("ocrbatch")
files_log = logging.getLogger("ocrbatch.files")  # one record per finished file (write.FileTally)


class Writer:
    def __init__(self, out_dir: Path, manifest: Manifest, engine_identity: str,
                 pages: PageSelection | None = None) -> None:
        self.out_dir = out_dir
        self.manifest = manifest
        self.engine_identity = engine_identity
        self.counts = {s: 0 for s in Status}
        self.busy_s = 0.0
        self.last_error: str | None = None
        self.file_failures = 0  # whole files that failed before their pages were known
        self.files = FileTally(pages)

    def write(self, result: PageResult) -> None:
        t0 = time.perf_counter()
        if result.status in (Status.OK, Status.TRUNCATED) and result.ref is not None:
            try:
                for att in result.attachments:
                    atomic_write(self.out_dir / att.relpath, att.data)
                text = result.markdown if result.markdown.endswith("\n") else result.markdown + "\n"
                # A file name's undecodable bytes (surrogate escapes) cannot go into UTF-8 text as they are.
                atomic_write(self.out_dir / result.ref.output, text.encode("utf-8", errors="replace"))
                self._remove_stale(result)
            except OSError as exc:
                if is_fatal(exc):
                    raise OutputWriteError(f"cannot write {self.out_dir / result.ref.output}: "
                                           f"{exc.strerror or exc}; stopped (pages done so far are kept: "
                                           "fix it and rerun to continue)") from exc
                result.status = Status.FAILED
                result.error = f"cannot write {result.ref.output}: {exc.strerror or exc}"
        if result.status is Status.FAILED:
            self.last_error = result.message
            self.file_failures += result.ref is None
            log.error("%s", self.last_error)
        elif result.status is Status.TRUNCATED and result.ref is not None:
            log.warning("%s: output truncated at the token limit", result.ref.label)
        result.timings["write_s"] = time.perf_counter() - t0
        self.manifest.record(result, self.engine_identity)
        self.counts[result.status] += 1
        self.files.add(result)
        self.busy_s += time.perf_counter() - t0

    def _remove_stale(self, result: PageResult) -> None:
        """Figures an earlier run wrote for this page that the new Markdown no longer links."""
        assert result.ref is not None
        now = {a.relpath.as_posix() for a in result.attachments}
        for rel in self.manifest.attachments(result.ref):
            if rel not in now and not rel.startswith("/") and ".." not in rel.split("/"):
                (self.out_dir / rel).unlink(missing_ok=True)


class FileTally:
    """Counts each file's pages as they are written; when a file's last selected page is in, one INFO record on
    the `ocrbatch.files` logger (the command line shows it with -v: one line per finished file)."""

    def __init__(self, pages: PageSelection | None) -> None:
        self.pages = pages
        self._open: dict[Path, dict[str, Any]] = {}

    def add(self, result: PageResult) -> None:
        if not files_log.isEnabledFor(logging.INFO):
            return
        if result.ref is None:  # the whole file failed
            self._done(result.source_display, {"pages": 0, "failed": 1}, None)
            return
        src = result.ref.source
        tally = self._open.setdefault(src.path, {"pages": 0})
        tally["pages"] += 1
        tally[result.status.value] = tally.get(result.status.value, 0) + 1
        conf = result.confidence
        if conf is not None and conf.score is not None:
            tally["confidence"] = min(tally.get("confidence", 1.0), conf.score)
        expected = len(self.pages.select(src.page_count)) if self.pages else src.page_count
        if tally["pages"] >= expected:
            del self._open[src.path]
            self._done(src.display, tally, src.out_key.as_posix() + ("/" if src.multipage else ".md"))

    @staticmethod
    def _done(display: str, tally: dict[str, Any], output: str | None) -> None:
        fields = {"file": display, **{k: str(v) for k, v in tally.items() if k != "confidence"}}
        if "confidence" in tally:
            fields["min_confidence"] = f"{tally['confidence']:.3f}"
        if output is not None:
            fields["output"] = output
        files_log.info("%s", display, extra={"fields": fields})


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


def check_output(out: Path) -> None:
    """The output folder exists (made if need be) and can be written, before any work starts."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"output {out} is a file, not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create the output folder {out}: {exc.strerror or exc}") from exc
    if not os.access(out, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write to the output folder {out}: permission denied")


__all__ = ["Writer", "atomic_write"]
