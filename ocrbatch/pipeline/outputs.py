"""What the write stage makes of a page besides its Markdown and its manifest record (write.Writer calls it):

    page_json   --format md,json: NAME.json beside the page's NAME.md (pagejson.py), written as one of the page's
                attachments, so that it is atomic, in the manifest, and removed when the page is redone without
    documents   each file's pages counted as they are written; when its last selected page is in:
                  - one INFO record on the `ocrbatch.files` logger (the command line's -v line per file),
                  - --join: OUT/…/NAME.md, the document's pages joined (pipeline/joined.py), rewritten when one of
                    its pages was written by this run or when it is missing or older than its pages (a run
                    stopped before it), atomically, with a document record in the manifest
    review      --review-below: the pages whose confidence score is lower (skipped pages by their earlier
                record's), for the summary
    follow      each recorded result to a follower (`convert -o -` prints pages as they finish)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable

from .. import pagejson, safefiles
from ..atomic import atomic_write, is_fatal
from ..config import PageSelection
from ..errors import OutputWriteError
from ..manifest import DONE, Manifest
from ..records import Attachment, PageRef, PageResult, Source, Status, fit_name, page_output
from . import joined

log = logging.getLogger("ocrbatch")
MAX_PAGE_BYTES = 256 << 20  # a page file read back for --join is at most this (ocrbatch's are far smaller)
files_log = logging.getLogger("ocrbatch.files")


def json_path(ref: PageRef) -> PurePosixPath:
    """The page JSON's path: the page's Markdown path with .json for .md; its name cut short with a hash, as
    records.fit_name does, when it alone would be over the file system's limit (a 251-byte stem: NAME.md fits,
    NAME.json would be 256 bytes). The Markdown's name never changes for it."""
    md = ref.output
    return md.with_name(fit_name(md.stem, len(b".json"), hashed=md.as_posix()) + ".json")


@dataclass
class _Doc:
    pages: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    changed: bool = False  # a page of it was written (or failed) by this run
    lowest: float | None = None


@dataclass
class Outputs:
    out_dir: Path
    manifest: Manifest
    engine: str
    formats: tuple[str, ...] = ("md",)
    join: bool = False
    review_below: float | None = None
    pages: PageSelection | None = None
    dpi: int | None = None
    follow: Callable[[PageResult], None] | None = None
    files: safefiles.RunFiles | None = None  # what the run reads: a --join file never replaces one of them
    review: list[dict[str, Any]] = field(default_factory=list)
    _docs: dict[Path, _Doc] = field(default_factory=dict)

    # -- before the page's files are written ----------------------------------------------------------
    def add_attachments(self, result: PageResult) -> None:
        """The page JSON joins the page's attachments (--format md,json)."""
        if "json" not in self.formats or result.ref is None:
            return
        rel = json_path(result.ref)
        figures = [a.relpath.relative_to(rel.parent).as_posix() for a in result.attachments
                   if a.relpath.suffix == ".png" and a.relpath.is_relative_to(rel.parent)]
        dpi = result.info.get("dpi", self.dpi) if result.ref.source.kind.value == "pdf" else None
        page = pagejson.page_json(result, self.engine, dpi=dpi, figure_files=figures)
        kept = [a for a in result.attachments if a.relpath != rel]
        result.attachments = kept + [Attachment(rel, pagejson.dumps(page))]

    def still_done(self, ref: PageRef) -> bool:
        """A page done earlier is done for this run too: with --format md,json, its JSON is there."""
        if "json" not in self.formats:
            return True
        rel = json_path(ref).as_posix()
        return rel in self.manifest.attachments(ref) and (self.out_dir / rel).is_file()

    # -- after its record ------------------------------------------------------------------------------
    def recorded(self, result: PageResult, rec: dict[str, Any]) -> None:
        score = self._score(rec)
        if self.review_below is not None and score is not None and score < self.review_below and result.ref:
            self.review.append({"source": result.ref.source.display, "page": result.ref.page,
                                "output": rec.get("output"), "score": score})
        self._count(result, score)
        if self.follow is not None:
            self.follow(result)

    @staticmethod
    def _score(rec: dict[str, Any]) -> float | None:
        conf = (rec.get("info") or {}).get("confidence") or {}
        score = conf.get("score")
        return float(score) if isinstance(score, (int, float)) and rec.get("status") in DONE else None

    def review_list(self) -> list[dict[str, Any]]:
        return sorted(self.review, key=lambda r: (r["score"], r["source"], r["page"]))

    # -- documents -----------------------------------------------------------------------------------
    def _count(self, result: PageResult, score: float | None) -> None:
        if result.ref is None:  # the whole file failed
            if files_log.isEnabledFor(logging.INFO):
                _file_line(result.source_display, {"pages": 0, "failed": 1}, None, None)
            return
        src = result.ref.source
        doc = self._docs.setdefault(src.path, _Doc())
        doc.pages += 1
        doc.counts[result.status.value] = doc.counts.get(result.status.value, 0) + 1
        doc.changed |= result.status is not Status.SKIPPED
        if score is not None:
            doc.lowest = score if doc.lowest is None else min(doc.lowest, score)
        expected = len(self.pages.select(src.page_count)) if self.pages else src.page_count
        if doc.pages < expected:
            return
        del self._docs[src.path]
        output = src.out_key.as_posix() + ("/" if src.multipage else ".md")
        if self.join and src.multipage:
            try:
                output = self._join(src, doc.changed) or output
            except OSError as exc:
                if is_fatal(exc):
                    raise OutputWriteError(f"cannot write the joined {src.out_key.as_posix()}.md: "
                                           f"{exc.strerror or exc}; stopped (pages done so far are kept: fix it "
                                           "and rerun to continue)") from exc
                log.error("%s: cannot write its joined Markdown: %s", src.display, exc.strerror or exc)
        if files_log.isEnabledFor(logging.INFO):
            _file_line(src.display, {"pages": doc.pages, **doc.counts}, doc.lowest, output)

    def _join(self, src: Source, changed: bool) -> str | None:
        """Write OUT/…/NAME.md from the document's pages on disk, when needed; its path, or None if none."""
        rel = page_output(src.out_key, False, 1)
        parts: list[tuple[int, str | None, str | None]] = []  # (page, Markdown or None, failure or None)
        for page in range(1, src.page_count + 1):
            rec = self.manifest.page_record(src, page)
            if rec is None:
                continue
            if rec.get("status") in DONE and rec.get("output") and (self.out_dir / rec["output"]).is_file():
                text = safefiles.read_text(self.out_dir / rec["output"], "the page file", MAX_PAGE_BYTES)
                parts.append((page, text, None) if text is not None else (page, None, "its page file is gone"))
            elif rec.get("status") == Status.FAILED.value:
                parts.append((page, None, rec.get("error") or "failed"))
        if not parts:
            return None
        pages = [p for p, _, _ in parts]
        earlier = self.manifest.document_record(src)
        fresh = (earlier is not None and earlier.get("output") == rel.as_posix() and earlier.get("joined") == pages
                 and earlier.get("source_size") == src.size and earlier.get("source_mtime_ns") == src.mtime_ns
                 and earlier.get("engine") == self.engine and (self.out_dir / rel).is_file())
        if fresh and not changed:
            return rel.as_posix()
        clash = self.files.clash(self.out_dir / rel, own=True) if self.files is not None else None
        if clash is not None:
            log.error("%s: its joined Markdown %s would be %s: not written", src.display, rel.as_posix(), clash)
            return None
        atomic_write(self.out_dir / rel, joined.document(parts).encode("utf-8", errors="replace"))
        self.manifest.record_document(src, rel.as_posix(), pages, self.engine)
        return rel.as_posix()


def _file_line(display: str, tally: dict[str, Any], lowest: float | None, output: str | None) -> None:
    fields = {"file": display, **{k: str(v) for k, v in tally.items()}}
    if lowest is not None:
        fields["min_confidence"] = f"{lowest:.3f}"
    if output is not None:
        fields["output"] = output
    files_log.info("%s", display, extra={"fields": fields})
