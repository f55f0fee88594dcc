#!/usr/bin/env python3
"""Record pages for the layout stress set, drawn by this script (no TeX needed): a statement with a label
column, a monospace record log, a label/value form with empty values, three stat cards, a list beside a
text box, an invoice with line items and totals, and scanned-looking variants of two of them.

    python scripts/stress_records.py            # writes bench/stress/pdfs/NAME.pdf, truth/NAME.txt, cells/NAME.tsv

Each page is a small PDF written here by hand, in PDF's standard fonts (Helvetica, Courier: PDFium draws
them with its built-in faces), so it has a real text layer (`--text-layer` reads it) and renders to an
image for the OCR path like every other stress page. Widths are measured with Liberation Sans, which has
Helvetica's metrics. The truth is written from the same data as the page, in reading order: row by row
where the page is records. Tables also get cell-level truth (`cells/NAME.tsv`: table, row, column, text;
scored by `scripts/stress_cells.py`). The scanned variants are the clean page rendered at 150 dpi, made
grey, turned under a degree, blurred and speckled, JPEG-compressed and set back into a PDF page as an
image (no text layer). All text is made up for this set (CC0).
"""

from __future__ import annotations

import io
import random
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STRESS = ROOT / "bench" / "stress"
DPI = 150
_FONTS = {"H": "Helvetica", "HB": "Helvetica-Bold", "C": "Courier", "CB": "Courier-Bold"}
_TTF = {"H": "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
        "HB": "/usr/share/fonts/truetype/liberation/LiberationSans-Bold.ttf"}


def width(text: str, font: str, size: float) -> float:
    """The advance of `text` in points."""
    if font.startswith("C"):
        return 0.6 * size * len(text)
    from PIL import ImageFont

    return ImageFont.truetype(_TTF[font], 1000).getlength(text) * size / 1000


@dataclass
class Page:
    """One PDF page, drawn from the top left (y down, in points)."""

    w: float
    h: float
    ops: list[str] = field(default_factory=list)

    def text(self, x: float, y: float, s: str, font: str = "H", size: float = 10, align: str = "l") -> float:
        """`s` with its baseline at y, starting at x (align "r": ending at x; "c": centred on x); its end."""
        w = width(s, font, size)
        x = x - w if align == "r" else x - w / 2 if align == "c" else x
        esc = s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        self.ops.append(f"BT /{font} {size} Tf {x:.2f} {self.h - y:.2f} Td ({esc}) Tj ET")
        return x + w

    def rect(self, x: float, y: float, w: float, h: float, grey: float | None = None, line: float = 0.8) -> None:
        if grey is not None:
            self.ops.append(f"{grey} g {x:.2f} {self.h - y - h:.2f} {w:.2f} {h:.2f} re f 0 g")
        else:
            self.ops.append(f"{line} w {x:.2f} {self.h - y - h:.2f} {w:.2f} {h:.2f} re S")

    def rule(self, x0: float, y: float, x1: float, line: float = 0.5) -> None:
        self.ops.append(f"{line} w {x0:.2f} {self.h - y:.2f} m {x1:.2f} {self.h - y:.2f} l S")


def pdf_bytes(page: Page, image: tuple[bytes, int, int] | None = None) -> bytes:
    """A one-page PDF of `page` (its text and drawing), or of a JPEG `image` (bytes, pixels wide, high)
    filling the page, with no text."""
    objs: list[bytes] = []
    fonts = " ".join(f"/{k} {3 + i} 0 R" for i, k in enumerate(_FONTS))
    n_font = len(_FONTS)
    if image is None:
        content = "\n".join(page.ops).encode("latin-1")
        resources = f"<< /Font << {fonts} >> >>"
    else:
        content = f"q {page.w:.2f} 0 0 {page.h:.2f} 0 0 cm /Im0 Do Q".encode()
        resources = f"<< /XObject << /Im0 {4 + n_font} 0 R >> >>"
    objs.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objs.append(f"<< /Type /Pages /Kids [{3 + n_font + (1 if image else 0) + 1} 0 R] /Count 1 >>".encode())
    for name in _FONTS.values():
        objs.append(f"<< /Type /Font /Subtype /Type1 /BaseFont /{name} /Encoding /WinAnsiEncoding >>".encode())
    stream = zlib.compress(content)
    objs.append(b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream")
    if image is not None:
        data, iw, ih = image
        objs.append(f"<< /Type /XObject /Subtype /Image /Width {iw} /Height {ih} /ColorSpace /DeviceGray "
                    f"/BitsPerComponent 8 /Filter /DCTDecode /Length {len(data)} >>\nstream\n".encode()
                    + data + b"\nendstream")
    content_id = 3 + n_font
    objs.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {page.w:.2f} {page.h:.2f}] "
                f"/Resources {resources} /Contents {content_id} 0 R >>".encode())
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


# -- words to make text from --------------------------------------------------------------------------
_WORDS = ("the of and to in for on with at by from as each every new all our its this that their "
          "office team report budget service year quarter month plan work staff member city council "
          "program project review record account payment order notice office centre board public "
          "water road school park library transport health housing energy grant fund cost share").split()


def prose(rng: random.Random, n: int) -> str:
    words = [rng.choice(_WORDS) for _ in range(n)]
    return " ".join(words).capitalize() + "."


def money(v: float) -> str:
    return f"{v:,.2f}"


# -- the pages ------------------------------------------------------------------------------------------
Cells = list[tuple[int, int, int, str]]  # (table, row, column, text)


def statement(rng: random.Random) -> tuple[Page, list[str], Cells]:
    """Landscape statement: a wide first column of department names, eight columns of figures."""
    pg = Page(842, 595)
    out: list[str] = []
    title = "Statement of Appropriations by Department, Fiscal Year 2025"
    pg.text(421, 50, title, "HB", 14, "c")
    pg.text(421, 68, "(in thousands of dollars)", "H", 9, "c")
    out += [title, "(in thousands of dollars)"]
    heads = ["Salaries", "Operations", "Grants", "Capital", "Transfers", "Debt", "Other", "Total"]
    depts = ["Department of Roads and Transport", "Ministry of Health Services", "Office of the Auditor",
             "Department of Education", "Ministry of Housing and Planning", "Department of Water Supply",
             "Office of Public Libraries", "Ministry of Energy", "Department of Parks and Recreation",
             "Office of the City Council", "Department of Fire and Rescue", "Ministry of Labour",
             "Department of Public Works", "Office of Tourism"]
    x0, xs = 40, [330 + 62 * k for k in range(8)]  # right edges of the figure columns
    y = 100
    pg.text(x0, y, "Department", "HB", 9)
    for x, hd in zip(xs, heads):
        pg.text(x, y, hd, "HB", 9, "r")
    pg.rule(x0, y + 5, xs[-1])
    cells: Cells = [(0, 0, 0, "Department")] + [(0, 0, k + 1, hd) for k, hd in enumerate(heads)]
    out.append(" ".join(["Department"] + heads))
    totals = [0] * 8
    for r, name in enumerate(depts, 1):
        y += 16.5
        vals = [rng.randint(120, 9900) for _ in range(7)]
        vals.append(sum(vals))
        totals = [a + b for a, b in zip(totals, vals)]
        texts = [f"{v:,}" for v in vals]
        pg.text(x0, y, name, "H", 9)
        for x, t in zip(xs, texts):
            pg.text(x, y, t, "H", 9, "r")
        out.append(" ".join([name] + texts))
        cells += [(0, r, 0, name)] + [(0, r, k + 1, t) for k, t in enumerate(texts)]
    y += 6
    pg.rule(x0, y, xs[-1])
    y += 12
    texts = [f"{v:,}" for v in totals]
    pg.text(x0, y, "Total", "HB", 9)
    for x, t in zip(xs, texts):
        pg.text(x, y, t, "HB", 9, "r")
    out.append(" ".join(["Total"] + texts))
    cells += [(0, len(depts) + 1, 0, "Total")] + [(0, len(depts) + 1, k + 1, t) for k, t in enumerate(texts)]
    note = "Figures are rounded to the nearest thousand; transfers between departments are shown once."
    pg.text(x0, y + 40, note, "H", 8)
    out.append(note)
    return pg, out, cells


def statement_wrapped(rng: random.Random) -> tuple[Page, list[str], Cells]:
    """Landscape statement, harder: a narrower label column whose long names wrap under themselves (the
    figures on the name's first line), headings over two lines, group rows with no figures, subtotals."""
    pg = Page(842, 595)
    out: list[str] = []
    title = "Consolidated Expenditure by Ministry, 2024-25"
    pg.text(40, 48, title, "HB", 13)
    out.append(title)
    heads = [("Staff", "costs"), ("Goods and", "services"), ("Grants", ""), ("Capital", "works"),
             ("Debt", "service"), ("Transfers", ""), ("Reserve", "funds"), ("Total", "")]
    xs = [300 + 66 * k for k in range(8)]
    y = 84
    pg.text(40, y + 11, "Ministry", "HB", 9)
    for x, (a, b) in zip(xs, heads):
        pg.text(x, y, a, "HB", 9, "r")
        if b:
            pg.text(x, y + 11, b, "HB", 9, "r")
    pg.rule(40, y + 16, xs[-1])
    head_cells = ["Ministry"] + [f"{a} {b}".strip() for a, b in heads]
    out.append(" ".join(head_cells))
    cells: Cells = [(0, 0, k, c) for k, c in enumerate(head_cells)]
    groups = [("GENERAL GOVERNMENT", ["Ministry of Finance and Economic Planning", "Office of the Prime Minister",
                                      "Ministry of Foreign Affairs and International Cooperation"]),
              ("SOCIAL SERVICES", ["Ministry of Health", "Ministry of Education, Science and Technology",
                                   "Ministry of Gender, Children and Social Welfare", "Ministry of Youth"]),
              ("ECONOMIC SERVICES", ["Ministry of Agriculture, Irrigation and Water Development",
                                     "Ministry of Trade", "Ministry of Transport and Public Works"])]
    r = 0
    y += 18
    for group, names in groups:
        y += 15
        r += 1
        pg.text(40, y, group, "HB", 9)
        out.append(group)
        cells.append((0, r, 0, group))
        sub = [0] * 8
        for name in names:
            y += 14
            r += 1
            vals = [rng.randint(40, 9900) for _ in range(7)]
            vals.append(sum(vals))
            sub = [a + b for a, b in zip(sub, vals)]
            texts = [f"{v:,}" for v in vals]
            words, lines_, cur = name.split(), [], ""
            for w in words:  # wrap the name at 170 points
                if cur and width(cur + " " + w, "H", 9) > 170:
                    lines_.append(cur)
                    cur = w
                else:
                    cur = f"{cur} {w}".strip()
            lines_.append(cur)
            for k, part in enumerate(lines_):
                pg.text(40 + (0 if k == 0 else 8), y + 11 * k, part, "H", 9)
            for x, t in zip(xs, texts):
                pg.text(x, y, t, "H", 9, "r")
            y += 11 * (len(lines_) - 1)
            out.append(" ".join([name] + texts))
            cells += [(0, r, 0, name)] + [(0, r, k + 1, t) for k, t in enumerate(texts)]
        y += 14
        r += 1
        label = f"Total {group.lower()}"
        pg.text(48, y, label, "HB", 9)
        texts = [f"{v:,}" for v in sub]
        for x, t in zip(xs, texts):
            pg.text(x, y, t, "HB", 9, "r")
        out.append(" ".join([label] + texts))
        cells += [(0, r, 0, label)] + [(0, r, k + 1, t) for k, t in enumerate(texts)]
    note = "Source: budget office ledgers; figures in thousands, rounded, so totals may differ slightly."
    pg.text(40, y + 36, note, "H", 8)
    out.append(note)
    return pg, out, cells


def record_log(rng: random.Random) -> tuple[Page, list[str], Cells]:
    """A typewriter-style property log in Courier: one record a row, fields at fixed places."""
    pg = Page(612, 792)
    out = []
    for y, s in ((60, "MILLBROOK POLICE DEPARTMENT"), (74, "RECOVERED PROPERTY LOG - MARCH 1988")):
        pg.text(306, y, s, "CB", 10, "c")
        out.append(s)
    cols = [("DATE", 0), ("TYPE", 9), ("SERIAL NO", 19), ("MAKE", 31), ("MODEL", 41), ("LOCATION", 51)]
    x0, cw, size = 40, 6.0, 10  # Courier 10: 6 pt a character
    y = 110
    pg.text(x0, y, "".join(name.ljust((cols[i + 1][1] if i + 1 < len(cols) else 60) - at)
                           for i, (name, at) in enumerate(cols)).rstrip(), "C", size)
    out.append(" ".join(c[0] for c in cols))
    cells: Cells = [(0, 0, k, c[0]) for k, c in enumerate(cols)]
    types = ["BICYCLE", "RADIO", "TV", "CAMERA", "WATCH", "TOOLBOX", "STEREO", "TYPEWRTR"]
    makes = [("SCHWINN", "TRAVELER"), ("SONY", "TR-1000"), ("ZENITH", "SYSTEM3"), ("CANON", "AE-1"),
             ("TIMEX", "IRONMAN"), ("CRAFTSMN", "9-6500"), ("PIONEER", "SX-780"), ("SMITH C", "CORONA3")]
    streets = ["412 ELM ST", "18 MILL RD", "PARK LOT B", "77 OAK AVE", "RIVER PATH", "5 MAIN ST", "BUS DEPOT"]
    row = 0
    for day in range(1, 27):
        if rng.random() < 0.15:
            continue
        row += 1
        y += 14
        t = rng.randrange(len(types))
        fields = [f"03/{day:02d}/88", types[t], f"{rng.choice('ABKMZ')}{rng.randint(1000000, 9999999)}",
                  makes[t][0], makes[t][1], rng.choice(streets)]
        line = "".join(f.ljust((cols[i + 1][1] if i + 1 < len(cols) else 60) - cols[i][1])
                       for i, f in enumerate(fields)).rstrip()
        pg.text(x0, y, line, "C", size)
        out.append(" ".join(fields))
        cells += [(0, row, k, f) for k, f in enumerate(fields)]
    y += 34
    for s in ("ALL ITEMS HELD AT PROPERTY ROOM 2 UNTIL CLAIMED OR 90 DAYS.", "CHECKED BY: SGT. R. HOLLOWAY"):
        pg.text(x0, y, s, "C", size)
        out.append(s)
        y += 14
    return pg, out, cells


def form(rng: random.Random) -> tuple[Page, list[str], Cells]:
    """A label/value form: labels in capitals at the left, values at one tab stop, some values empty, one
    wrapped under itself, two pairs on a row further down, then a free-text box."""
    pg = Page(612, 792)
    out = []
    pg.text(306, 60, "CONSUMER PRODUCT INCIDENT REPORT", "HB", 13, "c")
    pg.text(306, 76, "Form CP-17 (rev. 4/90)", "H", 8, "c")
    out += ["CONSUMER PRODUCT INCIDENT REPORT", "Form CP-17 (rev. 4/90)"]
    rows = [("SOURCE OF INFORMATION:", ["Telephone complaint from consumer"]),
            ("MANUFACTURER:", ["Hartwell Appliance Company"]),
            ("BRAND NAME:", ["KitchenPro"]),
            ("MODEL NUMBER:", []),
            ("PRODUCT TYPE:", ["Electric kettle, 1.7 litre"]),
            ("RETAILER:", []),
            ("RETAILER ADDRESS:", ["1200 Industrial Parkway, Suite 400", "Springfield, OH 45501"]),
            ("DATE OF PURCHASE:", ["June 1990"]),
            ("SERIAL NUMBER:", []),
            ("INJURY REPORTED:", ["Minor burn to the right hand"]),
            ("MEDICAL TREATMENT:", []),
            ("PRODUCT AVAILABLE:", ["Yes, held by the consumer"])]
    x0, xv, y = 50, 200, 110
    for label, value in rows:
        pg.text(x0, y, label, "HB", 9)
        for k, v in enumerate(value):
            pg.text(xv, y + 13 * k, v, "H", 10)
        out.append(" ".join([label] + value))
        y += 13 * max(1, len(value)) + 10
    y += 8
    for (l1, v1), (l2, v2) in ((("DATE RECEIVED:", "04/12/1991"), ("CASE NO.:", "91-0417")),
                               (("RECEIVED BY:", "M. Ortega"), ("REFERRED TO:", ""))):
        pg.text(x0, y, l1, "HB", 9)
        pg.text(xv, y, v1, "H", 10)
        pg.text(330, y, l2, "HB", 9)
        if v2:
            pg.text(420, y, v2, "H", 10)
        out.append(" ".join(s for s in (l1, v1, l2, v2) if s))
        y += 23
    y += 10
    pg.text(x0, y, "DESCRIPTION OF INCIDENT:", "HB", 9)
    out.append("DESCRIPTION OF INCIDENT:")
    text = ("The consumer reports that the kettle kept heating after the water had boiled and the lid opened "
            "by itself. Steam escaped from the side of the lid and the handle became too hot to hold. The "
            "consumer had used the kettle daily for about six months without trouble before this happened.")
    pg.rect(x0 - 4, y + 6, 520, 70)
    words, line, yy = text.split(), "", y + 22
    para = []
    for w in words:
        if width(line + " " + w, "H", 10) > 500 and line:
            pg.text(x0 + 4, yy, line, "H", 10)
            para.append(line)
            line, yy = w, yy + 13
        else:
            line = f"{line} {w}".strip()
    pg.text(x0 + 4, yy, line, "H", 10)
    para.append(line)
    out.append(" ".join(para))
    return pg, out, []


def typed_form(rng: random.Random) -> tuple[Page, list[str], Cells]:
    """A printed form filled in on a typewriter: labels in capitals, the typed values (Courier) a little
    above their labels' baselines, as a form fed into the machine by hand comes out; some left empty."""
    pg = Page(612, 792)
    out = ["PRODUCT SAFETY COMPLAINT", "Office use only - type or print clearly"]
    pg.text(306, 62, out[0], "HB", 14, "c")
    pg.text(306, 78, out[1], "H", 8, "c")
    rows = [("SOURCE OF INFORMATION:", "CONSUMER LETTER"), ("MANUFACTURER:", "ALDEN TOY CORP."),
            ("BRAND NAME:", "SKY RIDER"), ("MODEL:", ""), ("DESCRIPTION OF PRODUCT:", "CHILD'S SCOOTER, RED"),
            ("WHERE PURCHASED:", "MAIN ST. HARDWARE"), ("DATE OF PURCHASE:", ""), ("PRICE PAID:", "$24.95"),
            ("NATURE OF HAZARD:", "HANDLEBAR COMES LOOSE"), ("INJURIES:", ""), ("ACTION REQUESTED:", "REFUND")]
    y = 118
    for label, value in rows:
        pg.text(50, y, label, "HB", 9)
        pg.rule(210, y + 2, 560, 0.3)
        if value:
            pg.text(220, y - 5, value, "C", 10)
        out.append(f"{label} {value}".strip())
        y += 30
    return pg, out, []


def cards(rng: random.Random) -> tuple[Page, list[str], Cells]:
    """Three stat cards side by side on a slide: a big number, its unit, two lines of caption each."""
    pg = Page(720, 405)
    out = ["The Quarter in Numbers"]
    pg.text(50, 60, "The Quarter in Numbers", "HB", 22)
    data = [("4,812", "visitors", ["up 12 percent on the", "same quarter last year"]),
            ("37", "new members", ["most of them joined", "after the open day"]),
            ("96%", "satisfied", ["of those who answered", "the spring survey"])]
    for k, (num, unit, cap) in enumerate(data):
        x = 50 + 215 * k
        pg.rect(x, 100, 190, 170, grey=0.93)
        pg.text(x + 95, 160, num, "HB", 34, "c")
        pg.text(x + 95, 188, unit, "H", 14, "c")
        pg.text(x + 95, 222, cap[0], "H", 11, "c")
        pg.text(x + 95, 238, cap[1], "H", 11, "c")
        out += [num, unit, " ".join(cap)]
    pg.text(50, 320, "Figures from the front desk and the members' register, January to March.", "H", 10)
    out.append("Figures from the front desk and the members' register, January to March.")
    return pg, out, []


def list_box(rng: random.Random) -> tuple[Page, list[str], Cells]:
    """A slide: a title, a bulleted list of short items on the left, a framed text box to its right."""
    pg = Page(720, 405)
    out = ["Planning the Move"]
    pg.text(50, 60, "Planning the Move", "HB", 24)
    items = ["Budget", "Timeline", "Staffing", "Risks", "Review"]
    for k, it in enumerate(items):
        y = 120 + 36 * k
        pg.text(60, y, "\x95", "H", 16)
        pg.text(80, y, it, "H", 16)
        out.append(f"- {it}")
    box = ["The new office opens in", "spring and every team", "moves within two weeks", "of the opening."]
    pg.rect(330, 150, 300, 110)
    for k, s in enumerate(box):
        pg.text(350, 180 + 20 * k, s, "H", 14)
    out.append(" ".join(box))
    return pg, out, []


def invoice(rng: random.Random) -> tuple[Page, list[str], Cells]:
    """An invoice: the sender, the invoice's fields, the customer, line items, totals, terms."""
    pg = Page(612, 792)
    out = []
    y = 60
    for s, f, size in (("Brightwater Supplies Ltd", "HB", 14), ("14 Harbour Road", "H", 9),
                       ("Port Ellis, PE3 9QT", "H", 9), ("accounts@brightwater.example", "H", 9)):
        pg.text(50, y, s, f, size)
        out.append(s)
        y += 14 if size < 14 else 18
    pg.text(562, 60, "INVOICE", "HB", 22, "r")
    out.insert(1, "INVOICE")
    y += 16
    for label, value in (("Invoice No.:", "2025-0147"), ("Date:", "12 March 2025"), ("Due date:", "11 April 2025"),
                         ("Order ref.:", "")):
        pg.text(50, y, label, "HB", 9)
        if value:
            pg.text(140, y, value, "H", 9)
        out.append(f"{label} {value}".strip())
        y += 14
    y += 10
    pg.text(50, y, "Bill to:", "HB", 9)
    out.append("Bill to:")
    for s in ("Northfield Community Centre", "2 Chapel Lane", "Northfield, NF1 4AB"):
        y += 13
        pg.text(50, y, s, "H", 9)
        out.append(s)
    y += 34
    heads = [("Description", 50, "l"), ("Qty", 370, "r"), ("Unit price", 460, "r"), ("Amount", 562, "r")]
    for s, x, a in heads:
        pg.text(x, y, s, "HB", 9, a)
    pg.rule(50, y + 5, 562)
    out.append("Description Qty Unit price Amount")
    cells: Cells = [(0, 0, k, s) for k, (s, _, _) in enumerate(heads)]
    items = ["Folding tables, 180 cm", "Stacking chairs, blue", "Projector screen, tripod", "Extension leads, 10 m",
             "Whiteboard markers, box of 12", "Paper cups, pack of 500", "Coat rack on wheels", "Delivery and setup"]
    sub = 0.0
    for r, name in enumerate(items, 1):
        y += 16
        q = rng.randint(1, 24) if r < len(items) else 1
        u = rng.randint(300, 9000) / 100
        a = q * u
        sub += a
        texts = [name, str(q), money(u), money(a)]
        for (s, (_, x, al)) in zip(texts, heads):
            pg.text(x, y, s, "H", 9, al)
        out.append(" ".join(texts))
        cells += [(0, r, k, s) for k, s in enumerate(texts)]
    pg.rule(50, y + 6, 562)
    y += 8
    tax = round(sub * 0.08, 2)
    for k, (label, v, f) in enumerate((("Subtotal", sub, "H"), ("VAT 8%", tax, "H"), ("Total due", sub + tax, "HB"))):
        y += 16
        pg.text(460, y, label, f, 9, "r")
        pg.text(562, y, money(v), f, 9, "r")
        out.append(f"{label} {money(v)}")
        # (the totals sit in the table's last two columns: its foot rows)
        cells += [(0, len(items) + 1 + k, 2, label), (0, len(items) + 1 + k, 3, money(v))]
    y += 40
    terms = "Payment within 30 days by bank transfer. Please quote the invoice number with your payment."
    pg.text(50, y, terms, "H", 9)
    out.append(terms)
    return pg, out, cells


PAGES = [
    ("statement-a", "records-statement", statement,
     "landscape statement: a wide first column of department names, eight columns of figures; HAS-TABLE"),
    ("log-a", "records-log", record_log,
     "typewriter-style property log in a monospace font, one record a row at fixed places; HAS-TABLE"),
    ("form-b", "records-form", form,
     "label/value form: labels in capitals, values at one tab stop, some empty, one wrapped, two pairs a row"),
    ("cards-a", "stat-cards", cards, "slide of three stat cards side by side: big number, unit, two caption lines"),
    ("listbox-a", "list-beside-box", list_box, "slide: a bulleted list of short items, a framed text box to its right"),
    ("invoice-a", "records-invoice", invoice,
     "invoice: sender, invoice fields (one empty), customer, line items table, totals, terms; HAS-TABLE"),
    ("statement-b", "records-statement", statement_wrapped,
     "landscape statement: long ministry names wrapping under themselves, two-line headings, group rows, subtotals; HAS-TABLE"),
    ("form-c", "records-form", typed_form,
     "printed form filled in on a typewriter: values in Courier a little above their labels' rows, some empty"),
]
SCANS = [("statement-a-scan", "statement-a", 0.7, 11), ("form-b-scan", "form-b", -0.5, 12),
         ("form-c-scan", "form-c", 0.4, 13)]


def scanned(pdf: bytes, angle: float, seed: int) -> tuple[bytes, int, int]:
    """The page rendered at 150 dpi, made to look scanned: grey, turned by `angle` degrees, blurred,
    speckled and JPEG-compressed."""
    import numpy as np
    import pypdfium2 as pdfium
    from PIL import Image, ImageFilter

    doc = pdfium.PdfDocument(pdf)
    try:
        im = doc[0].render(scale=DPI / 72).to_pil().convert("L")
    finally:
        doc.close()
    im = im.rotate(angle, resample=Image.BICUBIC, fillcolor=255).filter(ImageFilter.GaussianBlur(0.6))
    a = np.asarray(im).astype(np.float32) * 0.88 + 18  # a grey paper, ink not quite black
    rng = np.random.default_rng(seed)
    a += rng.normal(0, 9, a.shape)
    a[rng.random(a.shape) < 0.0015] = 40  # specks
    buf = io.BytesIO()
    Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).save(buf, "JPEG", quality=70)
    return buf.getvalue(), im.width, im.height


def build() -> list[tuple[str, str, str]]:
    """Write every page; (name, kind, note) of each for the MANIFEST."""
    made: dict[str, tuple[Page, bytes]] = {}
    rows = []
    (STRESS / "cells").mkdir(parents=True, exist_ok=True)
    for k, (name, kind, make, note) in enumerate(PAGES):
        page, truth, cells = make(random.Random(28 + k))
        pdf = pdf_bytes(page)
        made[name] = (page, pdf)
        (STRESS / "pdfs" / f"{name}.pdf").write_bytes(pdf)
        (STRESS / "truth" / f"{name}.txt").write_text("\n".join(truth) + "\n", encoding="utf-8")
        if cells:
            (STRESS / "cells" / f"{name}.tsv").write_text(
                "table\trow\tcolumn\ttext\n" + "".join(f"{t}\t{r}\t{c}\t{s}\n" for t, r, c, s in cells),
                encoding="utf-8")
        rows.append((name, kind, note))
    for name, base, angle, seed in SCANS:
        page, pdf = made[base]
        (STRESS / "pdfs" / f"{name}.pdf").write_bytes(pdf_bytes(page, scanned(pdf, angle, seed)))
        (STRESS / "truth" / f"{name}.txt").write_text((STRESS / "truth" / f"{base}.txt").read_text(encoding="utf-8"),
                                                      encoding="utf-8")
        cells = STRESS / "cells" / f"{base}.tsv"
        if cells.exists():
            (STRESS / "cells" / f"{name}.tsv").write_text(cells.read_text(encoding="utf-8"), encoding="utf-8")
        kind = next(k for n, k, _, _ in PAGES if n == base)
        rows.append((name, kind, f"{base} made scan-like: grey, turned {angle} degrees, blur, noise, JPEG q70; "
                     "no text layer" + ("; HAS-TABLE" if "HAS-TABLE" in next(n for b, _, _, n in PAGES if b == base)
                                        else "")))
    return rows


def main() -> int:
    rows = build()
    manifest = STRESS / "MANIFEST.tsv"
    lines = manifest.read_text(encoding="utf-8").splitlines()
    for name, kind, note in rows:
        row = (f"pages/{name}.png\t{kind}\tdrawn:scripts/stress_records.py#{name}\tCC0 (ocrbatch)\t{note}; "
               f"rendered {DPI} dpi PNG at bench time; truth written with the page, in reading order (row by row "
               "where the page is records)")
        lines = [l for l in lines if not l.startswith(f"pages/{name}.png\t")] + [row]
    manifest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for name, _, _ in rows:
        print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
