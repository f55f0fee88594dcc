"""What a renderer is (one output format), and what it renders: a page (its record and what is known of it
besides), or a document's pages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..records import BLOCKS, LINES, PageRecord, Source

Part = tuple[int, "bytes | None", "str | None"]  # (page number, the page's file or None, why not: a failure)


class Refusal(Exception):
    """A renderer cannot make its format from this page (it lacks what the format needs); the message says
    why, in a few words."""


@dataclass(frozen=True)
class Page:
    """One page for a renderer: its record, and what the page JSON says of it besides."""

    record: PageRecord
    source: str = ""  # the input, as it was named
    number: int = 1  # 1-based
    status: str = "ok"  # or "truncated"
    engine: str = ""
    confidence: dict[str, Any] | None = None
    figure_files: tuple[str, ...] = ()  # the figures' files, relative to the page's own file
    text_layer: bool = False  # read from the PDF's own text layer, not OCR


@dataclass(frozen=True)
class DocumentPage:
    """A page of a document-wide format (pdf): its record, None when it failed or was never read."""

    number: int
    record: PageRecord | None
    text_layer: bool = False


@dataclass(frozen=True)
class Renderer:
    """One output format. A per-page format has `render` (one page's file, beside its Markdown: NAME.EXT) and
    may have `join` (several pages' files as one: --join's OUT/NAME.EXT, serve's answer for a document) and
    `stream` (a page's part on stdout, `-o -`); a per-document format has `document` (OUT/NAME.EXT from the
    source and its pages, once the last is done). `needs` LINES: a page whose record has no line boxes is
    refused (`check`: `page` raises Refusal); a per-document format puts such a page in without what it needs
    (pdf: the page with no text over it), and the write stage says so."""

    name: str  # the --format value
    suffix: str  # of its files
    media: str  # its HTTP media type (serve's Accept)
    about: str  # one line, for the docs
    render: Callable[[Page], bytes] | None = None
    join: Callable[[Sequence[Part]], bytes] | None = None
    stream: Callable[[Part, bool], bytes] | None = None  # (part, the document has several pages) for `-o -`
    between: bytes = b"\n"  # what `-o -` prints between two pages (or documents)
    # (source, its pages, image_of(page): an image's page as decoded): a per-document format
    document: Callable[[Source, Sequence[DocumentPage], Callable[[int], Any]], bytes] | None = None
    needs: str | None = None  # LINES: every page must have line boxes

    @property
    def per_document(self) -> bool:
        return self.document is not None

    def check(self, record: PageRecord) -> str | None:
        """Why this format cannot be made from `record`, or None when it can."""
        if self.needs == LINES and record.boxes != LINES:
            have = ("boxes for whole blocks, not lines (DeepSeek-OCR-2 tags blocks)" if record.boxes == BLOCKS
                    else "no boxes")
            return f"{self.name} needs each line's box, and the engine gave {have}"
        return None

    def page(self, page: Page) -> bytes:
        """The page's file; Refusal when the page lacks what the format needs."""
        assert self.render is not None, f"{self.name} is made per document"
        why = self.check(page.record)
        if why is not None:
            raise Refusal(why)
        return self.render(page)
