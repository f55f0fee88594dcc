"""Whole pages drawn here, with each line's text and box: the raw material of the recognizer's training data.

A page is columns of blocks (headings, paragraphs justified or ragged, lists, tables of figures, label and value
records, code), or a receipt: a narrow strip of upper-case records. Type is 7 to 14 pt (headings larger) at
150 or 200 dpi, in the fonts found on the machine (Debian's font packages: Latin Modern, TeX Gyre, URW base 35,
Liberation, DejaVu, Linux Libertine, EB Garamond, ...), regular, bold, italic and small capitals where a family
has them. Then the scan defects: grey or tinted paper, bleed-through, blur, noise, speckle, JPEG, a low
resolution, and a skew under a degree.

Each drawn unit (a line of a paragraph, a table cell, a record) keeps its text and its ink box in page pixels,
turned with the page, so that crops.py can match the detector's boxes to them.
"""

from __future__ import annotations

import io
import math
import random
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from .text import Corpus, record_line

FONT_ROOTS = ("/usr/share/fonts", "/usr/share/texmf/fonts/opentype/public")
_SKIP = ("math", "dingbat", "d050000l", "z003", "symbol", "initials", "keyboard", "fontawesome", "emoji", "display",
         "caps", "dunhill", "quotation", "lmmonolt", "lmmonoproplt", "unslanted", "noto")
PT_MIN, PT_MAX = 7.0, 14.0  # body type sizes drawn (points)
SKEW_MAX = 1.0  # degrees
GUTTER = (0.12, 0.4)  # inches between columns (journals set 0.15-0.25)
DPIS = (150, 150, 150, 200)
# Share of pages that are till receipts. A receipt holds a third of a page's lines, so at 0.3 about one line in
# eight comes from one; receipts and invoices are much of what users scan.
RECEIPTS = 0.3
LETTER_SPACED = 0.3  # of receipts: printed letter-spaced, each character followed by TRACKING of a space
TRACKING = (0.15, 0.6)
DOT_MATRIX = 0.25  # of receipts: printed by a dot-matrix head


@dataclass(frozen=True)
class Font:
    path: str
    mono: bool
    chars: frozenset

    def covers(self, text: str) -> bool:
        return all(ch in self.chars or ch == " " for ch in text)


BUILTIN = Font("", False, frozenset(chr(c) for c in range(32, 127)))  # Pillow's own font: ASCII


@lru_cache(maxsize=2)
def fonts(system: bool = True) -> tuple[Font, ...]:
    """The text fonts on this machine (no symbol, math or display faces), with the characters each covers;
    Pillow's built-in font where there are none, or when `system` is false (the tests)."""
    found: list[Font] = []
    for root in FONT_ROOTS if system else ():
        from fontTools.ttLib import TTFont

        for p in sorted(Path(root).rglob("*")):
            if p.suffix.lower() not in (".ttf", ".otf") or any(s in p.name.lower() for s in _SKIP):
                continue
            try:
                cmap = TTFont(str(p), lazy=True, fontNumber=0).getBestCmap() or {}
            except Exception:  # noqa: BLE001 - an unreadable font is skipped
                continue
            chars = frozenset(chr(c) for c in cmap)
            if not all(ch in chars for ch in "AZaz09.,"):
                continue
            name = p.name.lower()
            mono = any(s in name for s in ("mono", "courier", "inconsolata", "cour"))
            found.append(Font(str(p), mono, chars))
    return tuple(found) or (BUILTIN,)


@lru_cache(maxsize=512)
def _face(path: str, px: int) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(path, px) if path else ImageFont.load_default(px)


@dataclass
class Unit:
    """One drawn piece of text that the detector may box on its own: its text and ink box (x0, y0, x1, y1)."""

    text: str
    box: tuple[float, float, float, float]


@dataclass
class Page:
    image: Image.Image  # RGB
    units: list[Unit] = field(default_factory=list)
    dpi: int = 150


def _clean(text: str, font: Font) -> str:
    text = unicodedata.normalize("NFC", text)
    return "".join(ch for ch in text if font.covers(ch) and unicodedata.category(ch)[0] != "C")


class _Painter:
    def __init__(self, rng: random.Random, img: Image.Image, dpi: int) -> None:
        self.rng, self.img, self.dpi = rng, img, dpi
        self.draw = ImageDraw.Draw(img)
        self.units: list[Unit] = []
        self.ink = (0, 0, 0)

    def px(self, pt: float) -> int:
        return max(6, int(round(pt * self.dpi / 72)))

    def text(self, x: float, y: float, s: str, face: ImageFont.FreeTypeFont, record: bool = True) -> float:
        """Draw `s` with its top-left at (x, y); record its ink box; return its advance."""
        if not s.strip():
            return 0.0
        self.draw.text((x, y), s, font=face, fill=self.ink)
        box = face.getbbox(s)
        if record and box[2] > box[0]:
            self.units.append(Unit(" ".join(s.split()), (x + box[0], y + box[1], x + box[2], y + box[3])))
        return face.getlength(s)

    def spaced(self, x: float, y: float, s: str, face, extra: float) -> float:
        """Draw `s` letter-spaced, `extra` pixels after each character (till receipts print so: a letter's gap
        is then a fraction of a space, a word's a whole one more); one unit from its first ink to its last."""
        if not s.strip():
            return 0.0
        cx = x
        x0 = y0 = math.inf
        x1 = y1 = -math.inf
        for ch in s:
            if ch != " ":
                self.draw.text((cx, y), ch, font=face, fill=self.ink)
                b = face.getbbox(ch)
                if b[2] > b[0]:
                    x0, y0, x1, y1 = min(x0, cx + b[0]), min(y0, y + b[1]), max(x1, cx + b[2]), max(y1, y + b[3])
            cx += face.getlength(ch) + extra
        if x1 > x0:
            self.units.append(Unit(" ".join(s.split()), (x0, y0, x1, y1)))
        return cx - x

    def justified(self, x: float, y: float, words: list[str], width: float, face) -> None:
        """A line whose words are spread to `width`; one unit from its first ink to its last."""
        if len(words) < 2:
            self.text(x, y, " ".join(words), face)
            return
        lengths = [face.getlength(w) for w in words]
        gap = (width - sum(lengths)) / (len(words) - 1)
        if gap > 4 * face.getlength(" "):
            self.text(x, y, " ".join(words), face)
            return
        cx = x
        x0 = y0 = math.inf
        x1 = y1 = -math.inf
        for w, n in zip(words, lengths):
            self.draw.text((cx, y), w, font=face, fill=self.ink)
            b = face.getbbox(w)
            x0, y0, x1, y1 = min(x0, cx + b[0]), min(y0, y + b[1]), max(x1, cx + b[2]), max(y1, y + b[3])
            cx += n + gap
        self.units.append(Unit(" ".join(words), (x0, y0, x1, y1)))


def wrap(words: list[str], face, width: float) -> list[list[str]]:
    lines: list[list[str]] = []
    cur: list[str] = []
    for w in words:
        if cur and face.getlength(" ".join(cur + [w])) > width:
            lines.append(cur)
            cur = []
        cur.append(w)
    if cur:
        lines.append(cur)
    return lines


SYSTEM = True  # draw with the machine's fonts (train.py sets it from TrainConfig.sources)


def _pick_font(rng: random.Random, mono: bool | None = None) -> Font:
    found = fonts(SYSTEM)
    pool = [f for f in found if mono is None or f.mono == mono] or list(found)
    return rng.choice(pool)


def draw_page(rng: random.Random, corpus: Corpus) -> Page:
    """A page of columns of blocks, or (RECEIPTS of them) a till receipt, with its scan defects."""
    if rng.random() < RECEIPTS:
        return _defects(rng, _receipt(rng, corpus))
    dpi = rng.choice(DPIS)
    w, h = int(8.27 * dpi), int(rng.uniform(5.0, 11.69) * dpi)  # a part of an A4 page (less to detect)
    paper = tuple(int(v) for v in np.clip(np.array([255, 255, 255]) - rng.choice([0, 0, 0, 8, 20, 40])
                                          * np.array([1, rng.uniform(0.9, 1), rng.uniform(0.75, 1)]), 0, 255))
    img = Image.new("RGB", (w, h), paper)
    p = _Painter(rng, img, dpi)
    margin = rng.uniform(0.5, 1.0) * dpi
    ncols = rng.choices([1, 2, 3], [0.55, 0.35, 0.10])[0]
    gutter = rng.uniform(GUTTER[0], GUTTER[1]) * dpi
    colw = (w - 2 * margin - (ncols - 1) * gutter) / ncols
    body = _pick_font(rng, mono=False)
    pt = rng.uniform(PT_MIN, PT_MAX if ncols == 1 else 11.0)
    for c in range(ncols):
        x = margin + c * (colw + gutter)
        y = margin * rng.uniform(0.6, 1.0)
        while y < h - margin:
            y = _block(p, rng, corpus, x, y, colw, h - margin, body, pt)
    return _defects(rng, Page(img, p.units, dpi))


def _block(p: _Painter, rng: random.Random, corpus: Corpus, x: float, y: float, width: float, bottom: float,
           body: Font, pt: float) -> float:
    """Draw one block at (x, y) in a column `width` wide; return the y after it."""
    kind = rng.choices(["para", "heading", "list", "table", "records", "code"], [0.45, 0.12, 0.1, 0.13, 0.12, 0.08])[0]
    p.ink = rng.choice([(0, 0, 0)] * 6 + [(40, 40, 40), (70, 70, 70), (20, 30, 110), (120, 20, 20)])
    font = body if rng.random() < 0.8 else _pick_font(rng, mono=False)
    size = p.px(pt)
    face = _face(font.path, size)
    lead = size * rng.uniform(1.15, 1.45)
    if kind == "heading":
        hf = _pick_font(rng, mono=False) if rng.random() < 0.5 else font
        hs = p.px(pt * rng.uniform(1.1, 1.8))
        text, hface = _clean(corpus.title(), hf), _face(hf.path, hs)
        while text and hface.getlength(text) > width:
            text = text.rsplit(" ", 1)[0] if " " in text else ""
        if hs * 1.2 + y < bottom and text:
            p.text(x, y, text, hface)
        return y + hs * rng.uniform(1.5, 2.2)
    if kind in ("para", "list"):
        items = [corpus.paragraph()] if kind == "para" else [corpus.paragraph()[:rng.randint(30, 160)]
                                                               for _ in range(rng.randint(2, 5))]
        justify = rng.random() < 0.5
        for item in items:
            bullet = "" if kind == "para" else rng.choice(["•", "–", "-", "*", f"{rng.randint(1, 9)}.", "(a)"])
            indent = face.getlength(bullet + "  ") if bullet else 0
            lines = wrap(_clean(item, font).split(), face, width - indent)
            for n, words in enumerate(lines):
                if y + lead > bottom:
                    return bottom
                if n == 0 and bullet:
                    p.text(x, y, bullet, face)
                last = n == len(lines) - 1
                if justify and not last:
                    p.justified(x + indent, y, words, width - indent, face)
                else:
                    p.text(x + indent, y, " ".join(words), face)
                y += lead
            y += lead * rng.uniform(0.2, 0.8)
        return y + lead * rng.uniform(0.2, 0.8)
    if kind == "code":
        mf = _pick_font(rng, mono=True)
        mface = _face(mf.path, size)
        for _ in range(rng.randint(2, 8)):
            if y + lead > bottom:
                return bottom
            line = _clean(record_line(corpus) if rng.random() < 0.5 else corpus.paragraph()[:60], mf)
            while line and mface.getlength(line) > width:
                line = line[: int(len(line) * 0.8)].rstrip()
            p.text(x + rng.choice([0, 0, 2, 4]) * mface.getlength(" "), y, line, mface)
            y += lead
        return y + lead * 0.6
    if kind == "table":
        cols = rng.randint(2, 5)
        cw = width / cols
        tface = face if rng.random() < 0.7 else _face(_pick_font(rng).path, size)
        for r in range(rng.randint(3, 10)):
            if y + lead > bottom:
                return bottom
            for c in range(cols):
                cell = corpus.title(rng.randint(1, 2)) if c == 0 else rng.choice(
                    [f"{rng.uniform(0, 1000):.{rng.randint(0, 3)}f}", str(rng.randint(0, 99999)), corpus.word()[:10]])
                cell = _clean(cell, font)
                while cell and tface.getlength(cell) > cw * 0.85:
                    cell = cell[:-1]
                cx = x + c * cw + (cw * 0.9 - tface.getlength(cell) if c and rng.random() < 0.6 else 0)
                p.text(cx, y, cell, tface)
            y += lead
        return y + lead
    # records: label and value lines, as forms and invoices have them
    for _ in range(rng.randint(2, 8)):
        if y + lead > bottom:
            return bottom
        line = _clean(record_line(corpus), font)
        while line and face.getlength(line) > width:
            line = line[: int(len(line) * 0.8)].rstrip()
        p.text(x, y, line, face)
        y += lead
    return y + lead * 0.5


def _receipt(rng: random.Random, corpus: Corpus) -> Page:
    """A till receipt: a narrow strip of records, separator rows and totals, in faint thermal or dot-matrix ink."""
    dpi = rng.choice((100, 150, 150, 200))
    w, h = int(rng.uniform(2.6, 3.4) * dpi), int(rng.uniform(3.5, 7) * dpi)
    img = Image.new("RGB", (w, h), (255, 255, 255))
    p = _Painter(rng, img, dpi)
    grey = rng.choice([0, 0, 40, 70, 100])
    p.ink = (grey, grey, grey)
    font = _pick_font(rng, mono=rng.random() < 0.6)
    size = p.px(rng.uniform(7, 10))
    face = _face(font.path, size)
    lead = size * rng.uniform(1.2, 1.6)
    y, margin = size, 0.12 * dpi
    upper = rng.random() < 0.7
    # letter-spaced print (LETTER_SPACED of receipts): each character followed by this share of a space
    extra = face.getlength(" ") * rng.uniform(*TRACKING) if rng.random() < LETTER_SPACED else 0.0

    def text(x: float, s: str) -> None:
        if extra:
            p.spaced(x, y, s, face, extra)
        else:
            p.text(x, y, s, face)

    def width(s: str) -> float:
        return face.getlength(s) + extra * len(s)

    while y + lead < h - size:
        k = rng.random()
        if k < 0.12:  # a separator row across the strip, or a short one of dashes or stars
            mark = rng.choice("*-=.-*")
            row = mark * max(3, int((w - 2 * margin) / max(1.0, face.getlength(mark))) - 1)
            if rng.random() < 0.3:
                row = row[: rng.randint(3, 12)]
            p.text(margin, y, row, face)
        elif k < 0.5:  # item ... amount, the amount ragged right
            left = _clean(corpus.title(rng.randint(1, 3)), font)
            right = _clean(rng.choice(["", "RM", "$"]) + f"{rng.uniform(0, 300):.2f}", font)
            if upper:
                left = left.upper()
            if rng.random() < 0.2:  # a code or quantity joined by hyphens: "2-PC", "A-12"
                left = f"{left} {rng.choice(['', 'A', 'B', 'NO'])}-{rng.randint(1, 99)}".replace(" -", " ")
            while left and width(left) > (w - 2 * margin) * 0.6:
                left = left[:-1]
            text(margin, left)
            text(w - margin - width(right), right)
        else:
            line = _clean(record_line(corpus), font)
            line = line.upper() if upper else line
            while line and width(line) > w - 2 * margin:
                line = line[: int(len(line) * 0.8)].rstrip()
            cx = (w - width(line)) / 2 if rng.random() < 0.3 else margin
            text(cx, line)
        y += lead
    page = Page(img, p.units, dpi)
    if rng.random() < DOT_MATRIX:  # dot-matrix print: strokes made of round dots on a grid
        page.image = _dots(rng, page.image, max(2.0, size / 9))
    if rng.random() < 0.6:  # thermal print: soft, uneven ink
        arr = np.asarray(page.image.filter(ImageFilter.GaussianBlur(rng.uniform(0.6, 1.3)))).astype(np.float32)
        fade = np.linspace(rng.uniform(0.6, 1.0), rng.uniform(0.6, 1.0), arr.shape[0])[:, None, None]
        page.image = Image.fromarray((255 - (255 - arr) * fade).clip(0, 255).astype(np.uint8))
    return page


def _dots(rng: random.Random, img: Image.Image, pitch: float) -> Image.Image:
    """Ink kept only at round dots `pitch` pixels apart, as a dot-matrix printer's pins leave it."""
    # the strokes thickened first, so that a hairline (a dash) still meets a row of pins
    grey = 255 - np.asarray(img.convert("L").filter(ImageFilter.MinFilter(3))).astype(np.float32)
    yy, xx = np.mgrid[: grey.shape[0], : grey.shape[1]].astype(np.float32)
    ox, oy = rng.uniform(0, pitch), rng.uniform(0, pitch)
    d2 = ((xx + ox) % pitch - pitch / 2) ** 2 + ((yy + oy) % pitch - pitch / 2) ** 2
    mask = d2 <= (pitch * rng.uniform(0.42, 0.55)) ** 2
    dotted = Image.fromarray((255 - grey * mask).clip(0, 255).astype(np.uint8))
    return dotted.filter(ImageFilter.GaussianBlur(pitch * 0.2)).convert("RGB")


def _defects(rng: random.Random, page: Page) -> Page:
    img = page.image
    if rng.random() < 0.15:  # bleed-through: the mirrored ink of the other side, faint
        ghost = img.transpose(Image.Transpose.FLIP_LEFT_RIGHT).convert("L")
        a = rng.uniform(0.05, 0.15)
        img = Image.blend(img, Image.merge("RGB", [ghost] * 3).point(lambda v: 255 - (255 - v) * 0.6), a)
    if rng.random() < 0.4:
        angle = rng.uniform(-SKEW_MAX, SKEW_MAX)
        bg = img.getpixel((0, 0))
        img = img.rotate(angle, resample=Image.Resampling.BICUBIC, fillcolor=bg)
        page.units = [_turn(u, angle, img.size) for u in page.units]
    arr = np.asarray(img).astype(np.float32)
    if rng.random() < 0.4:
        arr = np.asarray(Image.fromarray(arr.clip(0, 255).astype(np.uint8)).filter(
            ImageFilter.GaussianBlur(rng.uniform(0.3, 1.1)))).astype(np.float32)
    if rng.random() < 0.4:
        arr += np.random.default_rng(rng.randrange(1 << 30)).normal(0, rng.uniform(2, 12), arr.shape[:2])[..., None]
    if rng.random() < 0.1:
        speck = np.random.default_rng(rng.randrange(1 << 30)).random(arr.shape[:2]) < rng.uniform(0.0005, 0.003)
        arr[speck] = rng.choice([0.0, 255.0])
    img = Image.fromarray(arr.clip(0, 255).astype(np.uint8))
    if rng.random() < 0.4:
        img = img.convert("L").convert("RGB")
    if rng.random() < 0.15:  # a low resolution scan, brought back to the page's size
        f = rng.uniform(0.6, 0.85)
        small = img.resize((int(img.width * f), int(img.height * f)), Image.Resampling.BILINEAR)
        img = small.resize(img.size, Image.Resampling.BILINEAR)
    if rng.random() < 0.5:
        buf = io.BytesIO()
        img.save(buf, "JPEG", quality=rng.randint(35, 90))
        img = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
    page.image = img
    return page


def _turn(u: Unit, angle: float, size: tuple[int, int]) -> Unit:
    """The unit's box after PIL's rotate by `angle` degrees (anticlockwise) about the page's centre."""
    cx, cy = size[0] / 2, size[1] / 2
    t = math.radians(angle)
    c, s = math.cos(t), math.sin(t)
    x0, y0, x1, y1 = u.box
    pts = [((x - cx) * c + (y - cy) * s + cx, -(x - cx) * s + (y - cy) * c + cy)
           for x, y in ((x0, y0), (x1, y0), (x1, y1), (x0, y1))]
    xs, ys = [q[0] for q in pts], [q[1] for q in pts]
    # the box of a turned line is taller by its width's sin: keep the line's own height about its centre
    mid = (min(ys) + max(ys)) / 2
    half = (y1 - y0) / 2
    return Unit(u.text, (min(xs), mid - half, max(xs), mid + half))
