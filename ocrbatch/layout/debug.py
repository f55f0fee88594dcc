"""What `--debug-layout DIR` writes: a picture of each page with its layout drawn on it.

Each block gets its box, its place in the reading order and its kind (text, figure, furniture), and a
line saying which stage set it apart; the column separators are drawn as red strips with the tab stop
that made each one, and each region's box in grey. `describe` gives the same as text, with a line per
region saying whether it was read as flow (columns) or records (row by row), and why.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from .page import PageLayout

_COLOURS = {"text": (0, 90, 220), "figure": (0, 150, 60), "furniture": (150, 150, 150), "table": (200, 120, 0)}


def write_debug(folder: str | Path, ref: Any, page: PageLayout, image: Any | None) -> Path | None:
    """FOLDER/NAME.png (the picture) and FOLDER/NAME.txt (`describe`) for one page: NAME is the file's
    name and the page number (scan.pdf-page-0002), shortened with a hash as page names are when it would be
    over the file system's limit; `image` the page (an RGB array or PIL image) or None. A picture that cannot
    be written is a warning, never a change to the page's result (None)."""
    from PIL import Image

    from ..errors import UsageError
    from ..safefiles import check_file

    name = debug_name(ref)
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for suffix in (".txt", ".png"):  # a FIFO or a device there is neither written nor replaced
            check_file(folder / f"{name}{suffix}", "--debug-layout file")
        (folder / f"{name}.txt").write_text(describe(page) + "\n", encoding="utf-8")
        if image is not None and not hasattr(image, "convert"):
            image = Image.fromarray(image)
        return draw_layout(page, image, folder / f"{name}.png")
    except (OSError, UsageError) as exc:
        logging.getLogger("ocrbatch").warning("--debug-layout: cannot write %s: %s", folder / f"{name}.png",
                                              getattr(exc, "strerror", None) or exc)
        return None


def debug_name(ref: Any) -> str:
    """NAME of a page's pictures: its file's name and the page number (scan.pdf-page-0002), shortened with a
    hash when NAME.png would be over the file system's limit."""
    from ..records import fit_name

    source = getattr(getattr(ref, "source", None), "path", None)
    label = f"{Path(source).name}-page-{ref.page:04d}" if source is not None else getattr(ref, "label", None)
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", str(label or "page")).strip("-") or "page"
    return fit_name(name, len(".png"))


def describe(page: PageLayout) -> str:
    """The page's separators and blocks in reading order, one line each."""
    out = [f"page {page.width}x{page.height}, body line height {page.h:.1f}"]
    out += page.verdicts
    for s in page.separators:
        out.append(f"separator x {s.x0:.0f}-{s.x1:.0f} y {s.y0:.0f}-{s.y1:.0f}: {s.why}")
    for n, block in enumerate(page.blocks, 1):
        x0, y0, x1, y1 = block.box
        first = block.rows[0].text[:50]
        out.append(f"{n:3d} {block.kind:9s} ({x0:.0f},{y0:.0f})-({x1:.0f},{y1:.0f}) {len(block.rows)} rows "
                   f"[{block.why}] {first}")
    return "\n".join(out)


def draw_layout(page: PageLayout, image: Any | None, path: Path) -> Path:
    """Write `path` (PNG): `image` (the page, or white when there is none) with the layout drawn on it."""
    from PIL import Image, ImageDraw, ImageFont

    base = (image.convert("RGB") if image is not None else Image.new("RGB", (page.width, page.height), "white"))
    canvas = Image.blend(base, Image.new("RGB", base.size, "white"), 0.45)
    draw = ImageDraw.Draw(canvas, "RGBA")
    size = max(10, int(page.h * 0.6))
    font = ImageFont.load_default(size=size)
    for box in page.regions:
        draw.rectangle(box, outline=(120, 120, 120), width=1)
    for s in page.separators:
        draw.rectangle((min(s.x0, s.x1) - 1, s.y0, max(s.x0, s.x1) + 1, s.y1), fill=(230, 0, 0, 70),
                       outline=(230, 0, 0))
        draw.text((s.x1 + 2, s.y0), s.why, fill=(200, 0, 0), font=font)
    for n, block in enumerate(page.blocks, 1):
        colour = _COLOURS.get(block.kind, (0, 0, 0))
        draw.rectangle(block.box, outline=colour, width=2)
        label = f"{n} {block.kind}"
        x0, y0 = block.box[0], block.box[1]
        tw = draw.textlength(label, font=font)
        draw.rectangle((x0, y0 - size - 2, x0 + tw + 4, y0), fill=colour + (200,))
        draw.text((x0 + 2, y0 - size - 1), label, fill="white", font=font)
        draw.text((x0 + tw + 8, y0 - size - 1), block.why, fill=colour, font=font)
    path.parent.mkdir(parents=True, exist_ok=True)
    canvas.save(path)
    return path
