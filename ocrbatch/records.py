"""Plain records that travel between the stages. Stages share these types and nothing else."""

from __future__ import annotations

import enum
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Hashable, Iterable

if TYPE_CHECKING:
    from .confidence import Confidence


class Kind(str, enum.Enum):
    PDF = "pdf"
    PNG = "png"
    JPEG = "jpeg"
    TIFF = "tiff"
    WEBP = "webp"
    BMP = "bmp"
    GIF = "gif"


# The names a walk takes as documents without looking inside (any other file is taken when its first bytes are
# a PDF's or an image's: pipeline/discover.py).
DOC_SUFFIXES = frozenset({".pdf", ".png", ".jpg", ".jpeg", ".jpe", ".jfif", ".tif", ".tiff", ".webp", ".bmp", ".gif"})


class Status(str, enum.Enum):
    OK = "ok"
    SKIPPED = "skipped"  # done by an earlier run for the same file and engine
    FAILED = "failed"
    TRUNCATED = "truncated"  # written, but the engine stopped at its output limit
    CANCELLED = "cancelled"  # taken, then the run was stopped (a signal) before it finished: redone on a rerun


PAGE_DIGITS = 4  # page-0001.md: the width of page numbers in file names, for a document of up to 9,999 pages


def page_digits(count: int) -> int:
    """The width of page numbers for a document of `count` pages: 4, or as many as `count` has (page-00001.md
    for 10,000 pages and more), so that a listing sorted by name is in page order."""
    return max(PAGE_DIGITS, len(str(count)))


def page_output(key: PurePosixPath, multipage: bool, page: int, digits: int = PAGE_DIGITS) -> PurePosixPath:
    """Relative Markdown path of 1-based `page` of the document with output key `key`."""
    if multipage:
        return key / f"page-{page:0{digits}d}.md"
    return key.with_name(key.name + ".md")


NAME_MAX = 255  # bytes in one file name, on most file systems (pipeline/run.py asks the output's)
HASH_CHARS = 12  # hex digits of the hash that ends a shortened name


def fit_name(name: str, suffix_bytes: int = 0, name_max: int = NAME_MAX, *, hashed: str | None = None) -> str:
    """`name` itself, or, when it and a suffix of `suffix_bytes` would be over `name_max` bytes, cut short and
    ended with `~` and a hash of `hashed` (default: the name itself), so the same input always gives the same
    result."""
    raw = os.fsencode(name)
    if len(raw) + suffix_bytes <= name_max:
        return name
    tag = "~" + hashlib.sha256(os.fsencode(name if hashed is None else hashed)).hexdigest()[:HASH_CHARS]
    cut = raw[:max(1, name_max - suffix_bytes - len(tag))]
    for end in range(len(cut), max(0, len(cut) - 4), -1):  # end on a whole character, if the name is UTF-8
        try:
            cut[:end].decode("utf-8")
        except UnicodeDecodeError:
            continue
        cut = cut[:end]
        break
    return os.fsdecode(cut) + tag


def fit_key(key: PurePosixPath, multipage: bool, name_max: int = NAME_MAX) -> PurePosixPath:
    """`key` itself, or, when a file it names would be over `name_max` bytes, its last part cut short and ended
    with `~` and a hash of the whole key (the same key always gives the same name). A multi-page document's
    key names a folder and, with --join, its joined KEY.md: room is kept for the .md either way."""
    fitted = fit_name(key.name, len(b".md"), name_max, hashed=key.as_posix())
    return key if fitted == key.name else key.with_name(fitted)


@dataclass(frozen=True)
class Source:
    """One input document, as discovered."""

    path: Path  # resolved, absolute
    display: str  # as the user named it, for messages
    kind: Kind
    out_key: PurePosixPath  # output stem relative to the output folder, e.g. a/NAME
    size: int
    mtime_ns: int
    page_count: int
    multipage: bool  # True: OUT/key/page-0001.md ...; False: OUT/key.md
    full_key: PurePosixPath | None = None  # the key before it was shortened to fit the file system; None: not
    digits: int = PAGE_DIGITS  # page numbers' width in its file names (page_digits; names.KeyClaims.digits)

    def output_for(self, page: int) -> PurePosixPath:
        """Relative Markdown path of 1-based `page`."""
        return page_output(self.out_key, self.multipage, page, self.digits)


@dataclass(frozen=True)
class PageRef:
    source: Source
    page: int  # 1-based

    @property
    def output(self) -> PurePosixPath:
        return self.source.output_for(self.page)

    @property
    def label(self) -> str:
        if self.source.multipage:
            return f"{self.source.display} page {self.page}"
        return self.source.display


@dataclass
class PageImage:
    """A decoded page, ready for an engine."""

    ref: PageRef
    image: Any  # PIL.Image.Image, RGB
    decode_s: float = 0.0
    prepared: Any = None  # the engine's own preprocessed inputs (Front.prepare), e.g. tiles in pool slots
    held_s: float = 0.0  # seconds `prepare` waited for free buffers (back-pressure, not work)
    reply: Any = None  # where the page's result goes (pipeline/lanes.py: Reply); None: the worker's own emit
    dpi: float | None = None  # a PDF page rendered below --dpi (pdfium.MAX_RENDER_PIXELS): the dpi it got

    @property
    def size(self) -> tuple[int, int]:
        return self.image.size

    @property
    def priority(self) -> str:
        """The lane the page came in: "interactive" or "bulk" (a page with no reply: bulk)."""
        return self.reply.lane if self.reply is not None else "bulk"


@dataclass(frozen=True)
class Batch:
    pages: tuple[PageImage, ...]
    bucket: Hashable = None

    def __len__(self) -> int:
        return len(self.pages)


@dataclass
class Attachment:
    """An extra file written beside a page's Markdown (e.g. a cropped figure)."""

    relpath: PurePosixPath  # relative to the output folder
    data: bytes


Box = tuple[float, float, float, float]  # (x0, y0, x1, y1) in pixels, y growing down


@dataclass(frozen=True)
class PlacedLine:
    """One line of a page as it was read and laid out: the line JSON of `--format json` (pagejson.py)."""

    text: str
    box: Box  # in pixels of the page as decoded (a PDF page as rendered at --dpi, an image as stored)
    score: float | None = None  # the recognizer's (0..1); None: read from a text layer, or not scored
    block: int | None = None  # the Markdown block it went into (numbered in reading order); None: left out
    kind: str = "text"  # text; furniture (a running head, page number, margin stamp: left out of the
    # Markdown unless --keep-furniture); DeepSeek-OCR-2: the label the model gave its block (title, table...)


@dataclass(frozen=True)
class PageLines:
    """The geometry behind a page's Markdown: its size, its lines in reading order, its figures."""

    width: int  # page pixels
    height: int
    lines: tuple[PlacedLine, ...] = ()  # in the order the Markdown gives them
    figures: tuple[Box, ...] = ()  # regions kept as pictures (DeepSeek-OCR-2 writes them to images/)


LINES, BLOCKS, NO_BOXES = "lines", "blocks", "none"  # PageRecord.boxes
FURNITURE = "furniture"  # a block left out of the Markdown (running head, page number) unless --keep-furniture
ITEM = "item"  # a list item: consecutive items are one tight list in the Markdown


@dataclass(frozen=True)
class RecordLine:
    """A line of a page record: its text, box and score."""

    text: str
    box: Box | None = None  # (x0, y0, x1, y1) in pixels of the page as decoded, y down
    score: float | None = None  # the recognizer's (0..1); None: a text layer, or not scored
    kind: str = "text"  # the page JSON's line kind: text, furniture, or the engine's block label


@dataclass(frozen=True)
class RecordBlock:
    """A block of a page record, in reading order."""

    kind: str  # paragraph, heading, item, table, furniture, markdown (an engine's own), or the engine's label
    markdown: str  # the block as the page's Markdown has it ("" for furniture left out)
    text: str  # the block as plain text, no Markdown markup
    lines: tuple[RecordLine, ...] = ()

    @property
    def box(self) -> Box | None:
        boxes = [ln.box for ln in self.lines if ln.box is not None]
        if not boxes:
            return None
        return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes),
                max(b[3] for b in boxes))


@dataclass(frozen=True)
class PageRecord:
    """What an engine read on a page, as data: every output format is made from it (ocrbatch/render/; builders
    and the meaning of `boxes` in pagerecord.py)."""

    width: int  # pixels of the page as decoded (a PDF page as rendered at dpi)
    height: int
    blocks: tuple[RecordBlock, ...] = ()  # in reading order
    boxes: str = NO_BOXES  # what the lines' boxes are: LINES (each its line's), BLOCKS (each its block's), none
    dpi: float | None = None  # a PDF page's rendering resolution; None: an image (its own pixels), or not known
    figures: tuple[Box, ...] = ()  # regions kept as pictures
    markdown: str | None = None  # an engine's own Markdown as it wrote it (DeepSeek-OCR-2); None: the blocks'

    @property
    def lines(self) -> list[RecordLine]:
        """Every line in reading order, furniture included."""
        return [ln for b in self.blocks for ln in b.lines]

    def markdown_text(self) -> str:
        """The page's Markdown: the engine's own, or its blocks joined (blocks apart by a blank line,
        consecutive list items one tight list, a final newline, furniture left out)."""
        if self.markdown is not None:
            return self.markdown
        return join_markdown((b.kind, b.markdown) for b in self.blocks)


def join_markdown(blocks: Iterable[tuple[str, str]]) -> str:
    """A page's Markdown from its blocks' (kind, Markdown) in order (PageRecord.markdown_text)."""
    parts: list[str] = []
    prev = None
    for kind, md in blocks:
        if kind == FURNITURE:
            continue
        if kind == ITEM and prev == ITEM:
            parts[-1] += "\n" + md  # consecutive items form one tight list
        else:
            parts.append(md)
        prev = kind
    return "\n\n".join(parts) + "\n" if parts else ""


@dataclass
class PageOutput:
    """What an engine returns for one page. `tokens` and `confidence` are typed: the pipeline reads them (the
    throughput controller, tokens/s; the page JSON and serve, through PageResult.confidence). An engine also
    keeps them in `info` ("tokens", "confidence": its as_dict()), which the manifest writes as it is."""

    markdown: str
    status: Status = Status.OK
    attachments: list[Attachment] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)  # engine-specific facts for the manifest
    lines: PageLines | None = None  # None: the engine keeps no geometry (fake engines)
    tokens: int | None = None  # tokens the engine generated for the page; None: it does not generate tokens
    confidence: "Confidence | None" = None  # how sure the engine was; None: it does not say (or not typed yet)
    # The page as data (pagerecord.py): what every output format is made from (render/). None: the engine gives
    # Markdown only (the fake engines); the write stage then makes one from `markdown` and `lines`.
    record: PageRecord | None = None

    @classmethod
    def of(cls, record: PageRecord, **fields: Any) -> "PageOutput":
        """An engine's result from its page record: `markdown` is the record's Markdown (the md renderer's)."""
        return cls(markdown=record.markdown_text(), record=record, **fields)


@dataclass
class PageResult:
    """The end of a page's journey: handed to the writer."""

    ref: PageRef | None  # None when a whole file failed before its pages were known
    status: Status
    markdown: str = ""
    attachments: list[Attachment] = field(default_factory=list)
    error: str | None = None
    source_display: str = ""  # set when ref is None
    source_path: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    lines: PageLines | None = None  # the page's lines and boxes (written with --format json)
    # How sure the engine was of this page (PageOutput.confidence; the page JSON and serve read it). The manifest
    # keeps its as_dict() as `info.confidence`; a result made with only that key (an engine that does not type
    # it yet) gets it from there.
    confidence: "Confidence | None" = None
    record: PageRecord | None = None  # the engine's page record (PageOutput.record); render.record_of reads it

    def __post_init__(self) -> None:
        if self.confidence is None and "confidence" in self.info:
            from .confidence import Confidence

            self.confidence = Confidence.from_dict(self.info["confidence"])

    @property
    def message(self) -> str | None:
        """A failure as the one line the CLI prints: where (file, page) and why; None when it did not fail."""
        if self.status is not Status.FAILED:
            return None
        return f"{self.ref.label if self.ref else self.source_display}: {self.error}"

    @property
    def ok(self) -> bool:
        return self.status in (Status.OK, Status.SKIPPED)

    @classmethod
    def failed_file(cls, path: Path, display: str, error: str) -> "PageResult":
        return cls(ref=None, status=Status.FAILED, error=error, source_display=display,
                   source_path=str(path))


@dataclass(frozen=True)
class TextLine:
    """One recognised line of text with its box in page pixels (x0, y0, x1, y1), y growing down."""

    text: str
    box: tuple[float, float, float, float]
    score: float = 1.0

    @property
    def height(self) -> float:
        return self.box[3] - self.box[1]
