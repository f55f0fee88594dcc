"""DeepSeek-OCR-2's raw output → a page's Markdown and its cropped figures.

With the grounding prompt the model precedes each block of the page with a tag naming what it is and
where it lies, in coordinates 0–999 of the page's width and height:

    <|ref|>image<|/ref|><|det|>[[x1, y1, x2, y2], ...]<|/det|>
    <|ref|>text<|/ref|><|det|>[[...]]<|/det|>Some paragraph...

Blocks labelled `image` are cropped out of the page and linked in their place
(`images/page-0001-1.png` beside `page-0001.md`); every other tag is dropped and its text kept. Then
LaTeX leftovers that Markdown renderers do not know are replaced and runs of blank lines collapsed.

Pure Python and Pillow: no model needed, so every rule here is tested on fixed strings.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Iterable

from ...records import NAME_MAX, Attachment, PageLines, PlacedLine, fit_key

COORD_MAX = 999  # the model's boxes are in 0..999 of the page
FIGURE_LABEL = "image"

# Labels and boxes never contain "<", so a stray opening tag cannot swallow the text up to a later tag.
_TAGGED = re.compile(r"<\|ref\|>(?P<label>[^<]*)<\|/ref\|>\s*<\|det\|>(?P<boxes>[^<]*)<\|/det\|>")
_STRAY_PAIR = re.compile(r"<\|ref\|>[^<]*<\|/ref\|>|<\|det\|>[^<]*<\|/det\|>")
_UNCLOSED = re.compile(r"<\|(?:ref|det)\|>[^<\n]{0,300}\Z")  # a tag cut off by the token limit: short, one line
_STRAY_TAG = re.compile(r"<\|/?(?:ref|det|grounding)\|>")
_NUMBER = r"\s*(-?\d+(?:\.\d+)?)\s*"
_BOX = re.compile(r"\[" + ",".join([_NUMBER] * 4) + r"\]")
_BLANK_RUNS = re.compile(r"\n{3,}")
# Commands from LaTeX packages (mathtools) that KaTeX/MathJax setups often lack, with plain equivalents.
_LATEX = (("\\coloneqq", ":="), ("\\eqqcolon", "=:"))

Box = tuple[float, float, float, float]


@dataclass(frozen=True)
class Region:
    """One tagged block: its label and boxes in 0..999 page coordinates."""

    label: str
    boxes: tuple[Box, ...]
    start: int
    end: int


def parse_regions(text: str) -> list[Region]:
    """Every complete `<|ref|>…<|/ref|><|det|>…<|/det|>` tag in `text`, in order."""
    regions = []
    for m in _TAGGED.finditer(text):
        boxes = tuple(tuple(float(v) for v in b.groups()) for b in _BOX.finditer(m.group("boxes")))
        regions.append(Region(m.group("label").strip(), boxes, m.start(), m.end()))  # type: ignore[arg-type]
    return regions


def pixel_box(box: Box, width: int, height: int) -> tuple[int, int, int, int] | None:
    """A 0..999 box → page pixels, clamped to the page; None when nothing of it is left."""
    x1, y1, x2, y2 = box
    x1, x2 = sorted((x1, x2))
    y1, y2 = sorted((y1, y2))

    def scale(v: float, size: int) -> int:
        return round(min(max(v, 0.0), COORD_MAX) / COORD_MAX * size)

    px = (scale(x1, width), scale(y1, height), scale(x2, width), scale(y2, height))
    if px[2] - px[0] < 1 or px[3] - px[1] < 1:
        return None
    return px


def figure_path(md_relpath: PurePosixPath, k: int) -> PurePosixPath:
    """Where the k-th figure (1-based) of the page written at `md_relpath` goes, relative to the output folder:
    `images/` beside the Markdown, named after it; cut short with a hash, as page names are, when the name
    would be over the file system's limit (a page name within a few bytes of it)."""
    stem = fit_key(PurePosixPath(f"{md_relpath.stem}-{k}"), multipage=True, name_max=NAME_MAX - len(".png"))
    return md_relpath.parent / "images" / f"{stem.name}.png"


def tidy(text: str) -> str:
    """LaTeX leftovers replaced, trailing spaces and runs of blank lines removed, one final newline."""
    for old, new in _LATEX:
        text = text.replace(old, new)
    text = "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").split("\n"))
    text = _BLANK_RUNS.sub("\n\n", text).strip()
    return text + "\n" if text else ""


def strip_specials(text: str, specials: Iterable[str]) -> str:
    """Remove the tokenizer's own markers (begin/end of sentence, padding) from decoded text."""
    for s in specials:
        if s:
            text = text.replace(s, "")
    return text


def to_markdown(text: str, page_image: Any, md_relpath: PurePosixPath,
                specials: Iterable[str] = ()) -> tuple[str, list[Attachment]]:
    """Decoded model output (special tokens kept) → (Markdown, cropped figures).

    `page_image` is the page as the engine saw it (a PIL image); figures are cropped from it at its full
    resolution and written as PNG beside the page's Markdown.
    """
    text = strip_specials(text, specials)
    width, height = page_image.size
    attachments: list[Attachment] = []
    pieces: list[str] = []
    pos = 0
    for region in parse_regions(text):
        pieces.append(text[pos:region.start])
        pos = region.end
        if region.label != FIGURE_LABEL:
            continue
        links = []
        for box in region.boxes:
            px = pixel_box(box, width, height)
            if px is None:
                continue
            rel = figure_path(md_relpath, len(attachments) + 1)
            attachments.append(Attachment(rel, _png(page_image.crop(px))))
            links.append(f"![](images/{rel.name})")  # relative to the page's Markdown
        pieces.append("\n\n".join(links))
    pieces.append(text[pos:])
    body = "".join(pieces)
    body = _UNCLOSED.sub("", body)
    body = _STRAY_PAIR.sub("", body)
    body = _STRAY_TAG.sub("", body)
    return tidy(body), attachments


def page_lines(text: str, size: tuple[int, int], specials: Iterable[str] = ()) -> PageLines:
    """The page's blocks as the model tagged them, for the page JSON: each tagged block's text (its tags and
    markup as in the Markdown) with the union of its boxes in page pixels and its label; figures' boxes apart,
    in the order `to_markdown` crops them. Text before the first tag (or with the free prompt, which tags
    nothing) is one block over the whole page."""
    text = strip_specials(text, specials)
    width, height = size
    regions = parse_regions(text)
    lines: list[PlacedLine] = []
    figures: list[Box] = []
    head = _clean(text[:regions[0].start] if regions else text)
    if head:
        lines.append(PlacedLine(head, (0.0, 0.0, float(width), float(height)), None, 0, "text"))
    for k, region in enumerate(regions):
        boxes = [b for b in (pixel_box(box, width, height) for box in region.boxes) if b is not None]
        if region.label == FIGURE_LABEL:
            figures += [tuple(float(v) for v in b) for b in boxes]  # type: ignore[misc]
            continue
        body = _clean(text[region.end:regions[k + 1].start if k + 1 < len(regions) else len(text)])
        if not body or not boxes:
            continue
        box = (float(min(b[0] for b in boxes)), float(min(b[1] for b in boxes)),
               float(max(b[2] for b in boxes)), float(max(b[3] for b in boxes)))
        lines.append(PlacedLine(body, box, None, len(lines), region.label or "text"))
    return PageLines(width, height, tuple(lines), tuple(figures))


def _clean(text: str) -> str:
    text = _STRAY_TAG.sub("", _STRAY_PAIR.sub("", _UNCLOSED.sub("", text)))
    return tidy(text).strip()


def _png(image: Any) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()
