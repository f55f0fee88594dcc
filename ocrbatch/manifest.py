"""OUT/manifest.jsonl: one JSON record per page, the latest state of each.

During a run records are appended (and flushed) as pages finish, so a crash loses nothing; at the end
the file is rewritten atomically with one line per page. A rerun reads it to skip finished pages.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

from .records import PageRef, PageResult, Status

NAME = "manifest.jsonl"
DONE = {Status.OK.value, Status.TRUNCATED.value, Status.SKIPPED.value}


def _key(source: str, page: int | None) -> tuple[str, int]:
    return (source, page or 0)


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if not line:
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut short by a crash
                if isinstance(rec, dict) and "source" in rec:
                    yield rec
    except FileNotFoundError:
        return


class Manifest:
    def __init__(self, out_dir: Path, engine_identity: str) -> None:
        self.path = out_dir / NAME
        self.out_dir = out_dir
        self.engine_identity = engine_identity
        self._latest: dict[tuple[str, int], dict[str, Any]] = {}
        for rec in read_records(self.path):
            self._latest[_key(rec["source"], rec.get("page"))] = rec
        self._fh = None

    def is_done(self, ref: PageRef) -> bool:
        """Done earlier for this very file (size and mtime) with this engine, and its output is there."""
        rec = self._latest.get(_key(str(ref.source.path), ref.page))
        return bool(
            rec
            and rec.get("status") in DONE
            and rec.get("engine") == self.engine_identity
            and rec.get("source_size") == ref.source.size
            and rec.get("source_mtime_ns") == ref.source.mtime_ns
            and rec.get("output") == ref.output.as_posix()
            and (self.out_dir / ref.output).is_file()
        )

    def attachments(self, ref: PageRef) -> list[str]:
        """Files an earlier run wrote beside this page's Markdown (relative to the output folder)."""
        return list(self._latest.get(_key(str(ref.source.path), ref.page), {}).get("attachments", []))

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
        if result.info:
            rec["info"] = result.info
        if result.attachments and result.status is not Status.FAILED:
            rec["attachments"] = [a.relpath.as_posix() for a in result.attachments]
        if result.status is Status.SKIPPED:
            # A skip keeps what the earlier run measured, so the manifest stays the page's history.
            earlier = self._latest.get(_key(rec["source"], rec["page"]), {})
            rec["done_as"] = earlier.get("done_as") or earlier.get("status")
            rec["timings"] = earlier.get("timings", {})
            if earlier.get("attachments"):
                rec["attachments"] = earlier["attachments"]
            rec["finished_at"] = earlier.get("finished_at", rec["finished_at"])
        self._append(rec)
        return rec

    def _append(self, rec: dict[str, Any]) -> None:
        if self._fh is None:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "a", encoding="utf-8")
        self._fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
        self._fh.flush()
        self._latest[_key(rec["source"], rec["page"])] = rec

    def close(self) -> None:
        """Rewrite the file with one line per page (the latest), atomically."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        if not self._latest:
            return
        fd, tmp = tempfile.mkstemp(prefix=".manifest-", dir=self.out_dir)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                for rec in sorted(self._latest.values(), key=lambda r: (r["source"], r["page"] or 0)):
                    fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
