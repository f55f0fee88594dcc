#!/usr/bin/env python3
"""Make sample_docs/: small documents with the project's own text, drawn with Pillow's built-in font.

    python scripts/make_samples.py sample_docs

An invoice, a two-column article page, a table, a three-page scanned report (PDF) and a slightly
rotated, noisy scan. A4 at 150 dpi, like a typical office scan.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from PIL import Image, ImageDraw, ImageFilter, ImageFont

W, H = 1240, 1754  # A4 at 150 dpi
MARGIN = 110


def font(size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.load_default(size=size)


def wrap(text: str, f: ImageFont.FreeTypeFont, width: int) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        trial = f"{line} {word}".strip()
        if f.getlength(trial) <= width:
            line = trial
        else:
            lines.append(line)
            line = word
    if line:
        lines.append(line)
    return lines


def paragraph(d: ImageDraw.ImageDraw, x: int, y: int, text: str, size: int, width: int) -> int:
    f = font(size)
    for line in wrap(text, f, width):
        d.text((x, y), line, font=f, fill=0)
        y += int(size * 1.45)
    return y + int(size * 0.8)


def page() -> tuple[Image.Image, ImageDraw.ImageDraw]:
    im = Image.new("L", (W, H), 255)
    return im, ImageDraw.Draw(im)


def invoice() -> Image.Image:
    im, d = page()
    d.text((MARGIN, 110), "INVOICE", font=font(64), fill=0)
    y = 220
    for line in ["Northwind Paper Supplies Ltd.", "14 Harbour Road, Leith", "Edinburgh EH6 6LX",
                 "VAT no. GB 123 4567 89"]:
        d.text((MARGIN, y), line, font=font(26), fill=0)
        y += 38
    y = 220
    for line in ["Invoice no. 2026-0417", "Date: 12 March 2026", "Due: 11 April 2026"]:
        d.text((W - MARGIN - 360, y), line, font=font(26), fill=0)
        y += 38
    y = 440
    d.text((MARGIN, y), "Bill to: Ocrbatch Test Office, 3 Quarry Lane, Dundee DD1 4HN", font=font(26), fill=0)
    y = 540
    cols = [MARGIN, MARGIN + 130, W - MARGIN - 380, W - MARGIN - 170]
    heads = ["Qty", "Description", "Unit price", "Amount"]
    rows = [("4", "Recycled copier paper, A4, box", "23.50", "94.00"),
            ("2", "Archive boxes, pack of ten", "18.00", "36.00"),
            ("1", "Document scanner service", "120.00", "120.00"),
            ("6", "Ring binders, blue", "3.25", "19.50")]
    f = font(26)
    for x, h in zip(cols, heads):
        d.text((x, y), h, font=font(27), fill=0)
    d.line((MARGIN, y + 44, W - MARGIN, y + 44), fill=0, width=2)
    y += 64
    for row in rows:
        for x, cell in zip(cols, row):
            d.text((x, y), cell, font=f, fill=0)
        y += 48
    d.line((MARGIN, y, W - MARGIN, y), fill=0, width=2)
    y += 24
    for label, value in [("Subtotal", "269.50"), ("VAT 20%", "53.90"), ("Total due (GBP)", "323.40")]:
        d.text((cols[2], y), label, font=f, fill=0)
        d.text((cols[3], y), value, font=f, fill=0)
        y += 44
    y += 60
    paragraph(d, MARGIN, y, "Please pay by bank transfer within thirty days, quoting the invoice number. "
              "Thank you for your business.", 24, W - 2 * MARGIN)
    return im


ARTICLE = [
    ("Batch conversion without an idle GPU", None),
    (None, "A scanner produces pages far faster than a person can read them, and an office that keeps "
           "its contracts, invoices and forms as images cannot search them. Converting those pages to "
           "Markdown makes them searchable, and keeps the headings, lists and tables that carry meaning."),
    (None, "The difficulty is throughput. A model that reads a page in a fifth of a second is wasted when "
           "it waits for the next page to be decoded. Our pipeline decodes pages on several threads, "
           "groups pages of similar size into batches, and keeps the accelerator busy."),
    ("Dynamic batching", None),
    (None, "A batch closes when it is full or when its oldest page has waited long enough. Pages of the "
           "same shape travel together, so little space is lost to padding. When memory runs short the "
           "batch is split in half and tried again."),
    ("Resuming work", None),
    (None, "Every page is written atomically and recorded in a manifest. A second run skips the pages "
           "that are already done, so a nightly job picks up exactly where the last one stopped, and a "
           "damaged file is reported once without stopping the others."),
]


def two_column() -> Image.Image:
    im, d = page()
    d.text((MARGIN, 110), "Notes on converting scanned documents", font=font(44), fill=0)
    d.text((MARGIN, 175), "The ocrbatch team, spring 2026", font=font(24), fill=0)
    col_w = (W - 2 * MARGIN - 60) // 2
    x, y = MARGIN, 260
    bottom = H - 200
    for heading, text in ARTICLE:
        if heading:
            if y > H // 2:
                x, y = MARGIN + col_w + 60, 260
            y = paragraph(d, x, y + 10, heading, 32, col_w)
            continue
        f = font(24)
        for line in wrap(text, f, col_w):
            if y > bottom:
                x, y = MARGIN + col_w + 60, 260
            d.text((x, y), line, font=f, fill=0)
            y += 35
        y += 22
    d.text((W // 2 - 10, H - 110), "1", font=font(22), fill=0)
    return im


def table() -> Image.Image:
    im, d = page()
    d.text((MARGIN, 110), "Pages converted per night", font=font(40), fill=0)
    paragraph(d, MARGIN, 180, "Figures from the archive project, by department. Each row is one week.",
              24, W - 2 * MARGIN)
    heads = ["Department", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
    rows = [["Accounts", "1,204", "1,310", "998", "1,422", "860"],
            ["Legal", "412", "390", "455", "401", "377"],
            ["Research", "2,950", "3,105", "2,874", "3,200", "2,640"],
            ["Archive", "5,800", "6,020", "5,915", "6,300", "4,980"],
            ["Total", "10,366", "10,825", "10,242", "11,323", "8,857"]]
    xs = [MARGIN, MARGIN + 250, MARGIN + 420, MARGIN + 590, MARGIN + 780, MARGIN + 940]
    y = 300
    d.line((MARGIN, y - 14, W - MARGIN, y - 14), fill=0, width=2)
    for x, h in zip(xs, heads):
        d.text((x, y), h, font=font(26), fill=0)
    y += 50
    d.line((MARGIN, y - 8, W - MARGIN, y - 8), fill=0, width=1)
    for row in rows:
        for x, cell in zip(xs, row):
            d.text((x, y), cell, font=font(26), fill=0)
        y += 50
    d.line((MARGIN, y, W - MARGIN, y), fill=0, width=2)
    return im


REPORT = [
    ("Quarterly report", ["This short report is the multi-page sample. Each page of a PDF becomes its own "
                          "Markdown file, named page-0001.md, page-0002.md and so on, in a folder named "
                          "after the document.",
                          "The first quarter saw the archive grow by forty thousand pages. Most were "
                          "invoices and delivery notes; a few hundred were hand-written forms."]),
    ("Methods", ["Pages were scanned at 150 dots per inch in grey scale. The converter rendered each PDF "
                 "page at the same resolution and read it with the embedded engine.",
                 "Pages that could not be read were listed in the manifest with the reason, and the run "
                 "went on with the others."]),
    ("Next steps", ["Next quarter we will move the nightly job to a machine with a GPU and compare the "
                    "two engines on the same pages.",
                    "Questions about this report go to the archive team."]),
]


def report_pages() -> list[Image.Image]:
    pages = []
    for n, (heading, paras) in enumerate(REPORT, start=1):
        im, d = page()
        y = paragraph(d, MARGIN, 130, heading, 44, W - 2 * MARGIN)
        for text in paras:
            y = paragraph(d, MARGIN, y, text, 26, W - 2 * MARGIN)
        d.text((W // 2 - 40, H - 110), f"Page {n} of {len(REPORT)}", font=font(22), fill=0)
        pages.append(im)
    return pages


def scan_like(im: Image.Image, angle: float, seed: int) -> Image.Image:
    rng = random.Random(seed)
    rotated = im.rotate(angle, resample=Image.BICUBIC, expand=False, fillcolor=255)
    blurred = rotated.filter(ImageFilter.GaussianBlur(0.6))
    noise = Image.effect_noise(blurred.size, 18)
    out = Image.blend(blurred, noise, 0.08)
    # uneven lighting: a little darker towards one corner
    shade = Image.linear_gradient("L").resize(out.size).point(lambda v: 255 - v // 12)
    out = Image.composite(out, shade, Image.new("L", out.size, 200 + rng.randint(0, 20)))
    return out


def letter() -> Image.Image:
    im, d = page()
    y = 130
    for line in ["Archive Team", "3 Quarry Lane", "Dundee DD1 4HN"]:
        d.text((MARGIN, y), line, font=font(26), fill=0)
        y += 38
    y += 60
    d.text((MARGIN, y), "Dear reader,", font=font(26), fill=0)
    y += 70
    for text in ["This letter was printed, signed and scanned a little crooked, as letters often are. "
                 "The converter should still read it line by line and keep its paragraphs.",
                 "Scans like this one come with grey backgrounds, specks of noise and a slight tilt. "
                 "None of that should stop a page from being converted.",
                 "With kind regards,"]:
        y = paragraph(d, MARGIN, y, text, 26, W - 2 * MARGIN)
    d.text((MARGIN, y + 40), "The ocrbatch team", font=font(26), fill=0)
    return im


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    invoice().save(out / "invoice.png", optimize=True)
    two_column().save(out / "article-two-column.png", optimize=True)
    table().save(out / "table.png", optimize=True)
    pages = report_pages()
    pages[0].save(out / "report.pdf", save_all=True, append_images=pages[1:], resolution=150)
    scan_like(letter(), angle=1.2, seed=7).save(out / "letter-scan.jpg", quality=70)
    total = sum(p.stat().st_size for p in out.iterdir())
    print(f"wrote {len(list(out.iterdir()))} files, {total / 1e6:.2f} MB, to {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "sample_docs"))
