"""What the write stage makes of a page besides its Markdown and its manifest record (write.Writer calls it), in
the formats of --format (each a renderer of the page record: ocrbatch/render/):

    page files  each per-page format but md (json, txt, hocr): NAME.EXT beside the page's NAME.md, written as one
                of the page's attachments, so that it is atomic, in the manifest, and removed when the page is
                redone without it. A renderer that refuses the page (hocr: no line boxes) leaves its file out:
                a one-line warning names the page and the reason, and the page's record keeps it
                (info.not_written). pdf needs the page JSON (the document's PDF is made from it): it is written
                too
    documents   each file's pages counted as they are written; when its last selected page is in:
                  - one INFO record on the `ocrbatch.files` logger (the command line's -v line per file),
                  - --join: OUT/…/NAME.md (and NAME.EXT for each other per-page format), the document's pages
                    joined (pipeline/joined.py), rewritten when one of its pages was written by this run or when
                    it is missing or older than its pages (a run stopped before it), atomically, with a document
                    record in the manifest
                  - pdf: OUT/…/NAME.pdf from the source and its pages' JSON (render/pdf.py), when one of its pages
                    was written by this run or when it is missing
    review      --review-below: the pages whose confidence score is lower (skipped pages by their earlier
                record's), for the summary
    follow      each recorded result to a follower (`convert -o -` prints pages as they finish)
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable

from .. import pagerecord, safefiles
from ..atomic import atomic_write, is_fatal
from ..config import PageSelection
from ..errors import DecodeError, OutputWriteError
from ..manifest import DONE, Manifest
from ..records import Attachment, PageRef, PageResult, Source, Status, fit_name, page_output
from ..render import RENDERERS, DocumentPage, Page, Refusal, Renderer

log = logging.getLogger("ocrbatch")
MAX_PAGE_BYTES = 256 << 20  # a page file read back for --join is at most this (ocrbatch's are far smaller)
files_log = logging.getLogger("ocrbatch.files")


def json_path(ref: PageRef) -> PurePosixPath:
    """The page JSON's path: the page's Markdown path with .json for .md (format_path)."""
    return format_path(ref.output, RENDERERS["json"])


def format_path(markdown: PurePosixPath, renderer: Renderer) -> PurePosixPath:
    """A page's (or a joined document's) file in a format: its Markdown's path with the format's suffix, its name
    cut short with a hash, as records.fit_name does, when it alone would be over the file system's limit (a
    251-byte stem: NAME.md fits, NAME.json would be 256 bytes). The Markdown's name never changes for it."""
    suffix = renderer.suffix
    return markdown.with_name(fit_name(markdown.stem, len(suffix.encode()), hashed=markdown.as_posix()) + suffix)


def page_formats(formats: tuple[str, ...]) -> list[Renderer]:
    """The per-page formats written beside the Markdown: those asked for, and json when pdf is (it is made from
    the page JSON)."""
    wanted = set(formats) | ({"json"} if any(RENDERERS[f].per_document for f in formats) else set())
    return [r for name, r in RENDERERS.items() if name in wanted and name != "md" and not r.per_document]


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
        """The page's file in each per-page format joins its attachments (--format md,json,txt,hocr)."""
        if result.ref is None:
            return
        refused: dict[str, str] = {}
        for renderer in page_formats(self.formats):
            rel = format_path(result.ref.output, renderer)
            kept = [a for a in result.attachments if a.relpath != rel]
            try:
                data = renderer.page(self._page(result, rel))
            except Refusal as exc:
                refused[renderer.name] = str(exc)
                log.warning("%s: no %s: %s", result.ref.label, renderer.suffix.lstrip("."), exc)
                result.attachments = kept
                continue
            result.attachments = kept + [Attachment(rel, data)]
        if refused:
            result.info = {**result.info, "not_written": refused}
        if any(RENDERERS[f].per_document for f in self.formats):  # what the page JSON's boxes are, for the PDF
            result.info = {**result.info, "boxes": pagerecord.record_of(result).boxes}

    def _page(self, result: PageResult, rel: PurePosixPath) -> Page:
        """The page as the renderers take it: its record (with the dpi of a PDF page) and what is known of it."""
        assert result.ref is not None
        figures = tuple(a.relpath.relative_to(rel.parent).as_posix() for a in result.attachments
                        if a.relpath.suffix == ".png" and a.relpath.is_relative_to(rel.parent))
        dpi = result.info.get("dpi", self.dpi) if result.ref.source.kind.value == "pdf" else None
        record = dataclasses.replace(pagerecord.record_of(result), dpi=dpi)
        conf = result.confidence
        return Page(record, source=result.ref.source.display, number=result.ref.page, status=result.status.value,
                    engine=self.engine, confidence=conf.as_dict() if conf is not None else None,
                    figure_files=figures, text_layer=result.info.get("path") == "text-layer")

    def still_done(self, ref: PageRef) -> bool:
        """A page done earlier is done for this run too: its file in each per-page format is there (or its
        earlier record says that format refused it)."""
        renderers = page_formats(self.formats)
        if not renderers:
            return True
        rec = self.manifest.page_record(ref.source, ref.page) or {}
        refused = (rec.get("info") or {}).get("not_written") or {}
        written = self.manifest.attachments(ref)
        for renderer in renderers:
            rel = format_path(ref.output, renderer).as_posix()
            if renderer.name not in refused and not (rel in written and (self.out_dir / rel).is_file()):
                return False
        return True

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
            output = self._fatal_or_logged(src, "joined Markdown", lambda: self._join(src, doc.changed)) or output
        for renderer in (RENDERERS[f] for f in self.formats if RENDERERS[f].per_document):
            self._fatal_or_logged(src, renderer.name, lambda: self._document(src, renderer, doc.changed))
        if files_log.isEnabledFor(logging.INFO):
            _file_line(src.display, {"pages": doc.pages, **doc.counts}, doc.lowest, output)

    def _fatal_or_logged(self, src: Source, what: str, write: Callable[[], str | None]) -> str | None:
        """`write()`; an error every later write would meet too stops the run, any other is said and passed."""
        try:
            return write()
        except OSError as exc:
            if is_fatal(exc):
                raise OutputWriteError(f"cannot write the {what} of {src.out_key.as_posix()}: "
                                       f"{exc.strerror or exc}; stopped (pages done so far are kept: fix it "
                                       "and rerun to continue)") from exc
            log.error("%s: cannot write its %s: %s", src.display, what, exc.strerror or exc)
        except DecodeError as exc:
            log.error("%s: cannot write its %s: %s", src.display, what, exc)
        return None

    def _pages(self, src: Source) -> list[tuple[int, dict[str, Any]]]:
        """The document's pages that have a record (done or failed), with it, in order."""
        out = []
        for page in range(1, src.page_count + 1):
            rec = self.manifest.page_record(src, page)
            if rec is not None and ((rec.get("status") in DONE and rec.get("output"))
                                    or rec.get("status") == Status.FAILED.value):
                out.append((page, rec))
        return out

    def _join(self, src: Source, changed: bool) -> str | None:
        """Write OUT/…/NAME.md (and NAME.EXT for each other per-page format) from the document's pages on disk,
        when needed; the Markdown's path, or None if no page has a record."""
        rel = page_output(src.out_key, False, 1)
        renderers = [RENDERERS["md"], *(r for r in page_formats(self.formats) if r.name in self.formats and r.join)]
        joins: dict[str, list[tuple[int, bytes | None, str | None]]] = {r.name: [] for r in renderers}
        for page, rec in self._pages(src):
            if rec.get("status") == Status.FAILED.value:
                for parts in joins.values():
                    parts.append((page, None, rec.get("error") or "failed"))
                continue
            refused = (rec.get("info") or {}).get("not_written") or {}
            for r in renderers:
                file = self.out_dir / format_path(PurePosixPath(rec["output"]), r)
                data = safefiles.read_bytes(file, "the page file", MAX_PAGE_BYTES)
                why = refused.get(r.name) or ("its page file is gone" if data is None else None)
                joins[r.name].append((page, data, why))
        if not joins["md"]:
            return None
        pages = [p for p, _, _ in joins["md"]]
        earlier = self.manifest.document_record(src)
        fresh = (earlier is not None and earlier.get("output") == rel.as_posix() and earlier.get("joined") == pages
                 and earlier.get("source_size") == src.size and earlier.get("source_mtime_ns") == src.mtime_ns
                 and earlier.get("engine") == self.engine
                 and all((self.out_dir / format_path(rel, r)).is_file() for r in renderers))
        if fresh and not changed:
            return rel.as_posix()
        for r in renderers:
            clash = self.files.clash(self.out_dir / format_path(rel, r), own=True) if self.files is not None else None
            if clash is not None:
                log.error("%s: its joined %s %s would be %s: not written", src.display, r.name,
                          format_path(rel, r).as_posix(), clash)
                return None
        for r in renderers:
            atomic_write(self.out_dir / format_path(rel, r), r.join(joins[r.name]))  # type: ignore[misc]
        self.manifest.record_document(src, rel.as_posix(), pages, self.engine)
        return rel.as_posix()

    def _document(self, src: Source, renderer: Renderer, changed: bool) -> str | None:
        """Write OUT/…/NAME.EXT of a per-document format (pdf) from the source and its pages' JSON, when one of
        its pages was written by this run or the file is missing; its path, or None if no page has a record."""
        rel = format_path(page_output(src.out_key, False, 1), renderer)
        if not changed and (self.out_dir / rel).is_file():
            return rel.as_posix()
        pages: list[DocumentPage] = []
        bare: list[str] = []
        why = ""
        for page, rec in self._pages(src):
            record = None
            if rec.get("status") in DONE:
                found = safefiles.read_bytes(self.out_dir / json_path(PageRef(src, page)), "the page JSON",
                                             MAX_PAGE_BYTES)
                record = pagerecord.of_page_json(json.loads(found), (rec.get("info") or {}).get("boxes")) \
                    if found is not None else None
            text_layer = (rec.get("info") or {}).get("path") == "text-layer"
            refused = renderer.check(record) if record is not None and not text_layer else None
            if refused is not None:
                bare.append(str(page))
                why = refused
            pages.append(DocumentPage(page, record, text_layer))
        if not pages:
            return None
        if bare:
            log.warning("%s: %s: page%s %s without text: %s", src.display, rel.as_posix(), "s" * (len(bare) > 1),
                        ", ".join(bare), why)
        assert renderer.document is not None

        def image_of(number: int) -> Any:
            from .decode import decode_page

            return decode_page(PageRef(src, number), self.dpi or 200, pdfs=None).image  # type: ignore[arg-type]

        atomic_write(self.out_dir / rel, renderer.document(src, pages, image_of))
        return rel.as_posix()


def _file_line(display: str, tally: dict[str, Any], lowest: float | None, output: str | None) -> None:
    fields = {"file": display, **{k: str(v) for k, v in tally.items()}}
    if lowest is not None:
        fields["min_confidence"] = f"{lowest:.3f}"
    if output is not None:
        fields["output"] = output
    files_log.info("%s", display, extra={"fields": fields})
