"""Page results → files: atomic Markdown writes, attachments, one manifest record per page.

A write error that only this page meets (a name the file system refuses, a folder without permission)
fails the page; one that every later write would meet too (disk full, quota, file size limit, read-only
file system, I/O error) raises OutputWriteError, and the run stops with what it finished kept.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from ..atomic import atomic_write, is_fatal
from ..errors import OutputWriteError
from ..manifest import Manifest
from ..records import PageResult, Status

log = logging.getLogger("ocrbatch")


class Writer:
    def __init__(self, out_dir: Path, manifest: Manifest, engine_identity: str) -> None:
        self.out_dir = out_dir
        self.manifest = manifest
        self.engine_identity = engine_identity
        self.counts = {s: 0 for s in Status}
        self.busy_s = 0.0
        self.last_error: str | None = None
        self.file_failures = 0  # whole files that failed before their pages were known

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
            where = result.ref.label if result.ref else result.source_display
            self.last_error = f"{where}: {result.error}"
            self.file_failures += result.ref is None
            log.error("%s", self.last_error)
        elif result.status is Status.TRUNCATED and result.ref is not None:
            log.warning("%s: output truncated at the token limit", result.ref.label)
        result.timings["write_s"] = time.perf_counter() - t0
        self.manifest.record(result, self.engine_identity)
        self.counts[result.status] += 1
        self.busy_s += time.perf_counter() - t0

    def _remove_stale(self, result: PageResult) -> None:
        """Figures an earlier run wrote for this page that the new Markdown no longer links."""
        assert result.ref is not None
        now = {a.relpath.as_posix() for a in result.attachments}
        for rel in self.manifest.attachments(result.ref):
            if rel not in now and not rel.startswith("/") and ".." not in rel.split("/"):
                (self.out_dir / rel).unlink(missing_ok=True)


__all__ = ["Writer", "atomic_write"]
