#!/usr/bin/env python3
"""The layout stress set: real documentation pages that push reading order, tables and detection scale.

`bench/stress/` keeps what the bench needs and nothing large: one single-page PDF per item (cut from a
freely licensed Debian `-doc` package), its truth (`truth/NAME.txt`, from the text layer in column
order, checked by eye) and `MANIFEST.tsv` (kind, source, licence). The bench renders the PDFs at
150 dpi into PNGs, so the engine reads images, never the text layer.

    python scripts/stress_set.py build     # re-cut the PDFs and truth from the Debian packages
    python scripts/stress_set.py typeset   # only the pages typeset from bench/stress/src
    python scripts/stress_set.py render DIR  # render bench/stress/pdfs/*.pdf to DIR/NAME.png at 150 dpi
    python scripts/stress_set.py records   # the record pages drawn by scripts/stress_records.py (no TeX)

`build` downloads the packages with `apt-get download` and unpacks them under a cache folder (about
1.2 GB); it keeps existing truth files (checked by eye: bench/stress/FIXES.md) unless given --truth.
Items whose package is `tex` are pages typeset for this set from `bench/stress/src/NAME.tex` (the kinds
no Debian document had to hand: sidebars, charts beside tables, numbered transcripts, flowcharts, forms,
slides); `build` runs pdflatex on them (Debian's texlive-latex-extra and texlive-pictures).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STRESS = ROOT / "bench" / "stress"
DOC = "usr/share/doc/texlive-doc/latex"
DPI = 150

# name, kind, Debian package, file under DOC, pages (1-based; several = laid out 2x2 on one big sheet), licence, note
ITEMS = [
    ("papertex-p2", "three-column-prose", "texlive-latex-extra-doc", "papertex/example/example.pdf", [2],
     "LPPL-1.3 (papertex)", "newspaper class: three columns of running prose, headings across two columns"),
    ("papertex-p3", "three-column-prose", "texlive-latex-extra-doc", "papertex/example/example.pdf", [3],
     "LPPL-1.3 (papertex)", "three columns with a boxed banner across them"),
    ("papertex-p5", "three-column-prose", "texlive-latex-extra-doc", "papertex/example/example.pdf", [5],
     "LPPL-1.3 (papertex)", "short news in three columns, a boxed column"),
    ("flowfram-news-p1", "three-column-prose", "texlive-latex-extra-doc", "flowfram/samples/sample-news.pdf", [1],
     "LPPL-1.3 (flowfram)", "newsletter: title, columns of different widths, picture"),
    ("cheatsheet-p1", "reference-card", "texlive-latex-extra-doc", "cheatsheet/cheatsheet.pdf", [1],
     "LPPL-1.3c (cheatsheet)", "landscape reference card: columns of command/description pairs under headings"),
    ("cheatsheet-p2", "reference-card", "texlive-latex-extra-doc", "cheatsheet/cheatsheet.pdf", [2],
     "LPPL-1.3c (cheatsheet)", "landscape reference card, second page"),
    ("wikicheat-p1", "reference-card", "texlive-latex-extra-doc", "nicetext/wikicheat.pdf", [1],
     "LPPL-1.3 (nicetext)", "cheat sheet: boxed three-column tables of wiki markup, result and LaTeX code; HAS-TABLE"),
    ("asmeconf-p2", "two-column-figure", "texlive-publishers-doc", "asmeconf/asmeconf-template.pdf", [2],
     "MIT (asmeconf)", "two-column paper: a figure with caption, two tables inside the columns; HAS-TABLE"),
    ("asmejour-p3", "two-column-figure", "texlive-publishers-doc", "asmejour/asmejour-template.pdf", [3],
     "MIT (asmejour)", "two-column journal page: plot inside a column, equations"),
    ("sigplan-p4", "two-column-figure", "texlive-publishers-doc", "acmart/samples/sample-sigplan.pdf", [4],
     "LPPL-1.3c (acmart)", "two-column paper: a table at the top, photo with caption inside a column, equations; HAS-TABLE"),
    ("sigplan-p3", "table-beside-prose", "texlive-publishers-doc", "acmart/samples/sample-sigplan.pdf", [3],
     "LPPL-1.3c (acmart)", "two-column paper: a table in one column beside prose, equations; HAS-TABLE"),
    ("sigplan-p1", "title-over-columns", "texlive-publishers-doc", "acmart/samples/sample-sigplan.pdf", [1],
     "LPPL-1.3c (acmart)", "one-column title block, authors in a 3x2 grid of name/affiliation/email blocks (no table: the truth reads author by author), teaser figure, then two columns"),
    ("ieeetran-p1", "title-over-columns", "texlive-latex-extra-doc",
     "authorarchive/examples/brucker-authorarchive-2016-IEEEtran.pdf", [1],
     "LPPL-1.3c (authorarchive)", "IEEEtran paper: title over two columns, bold abstract, a stamp across the top"),
    ("mcrule-p5", "two-column-prose", "texlive-latex-extra-doc", "multicolrule/mcrule-examples.pdf", [5],
     "LPPL-1.3c (multicolrule)", "two columns of prose with rules between them and headings"),
    # typeset for issue 20 (bench/stress/src, CC0: written for this set; prose made from word lists)
    ("sidebar-report", "sidebar-beside-columns", "tex", "sidebar-report.tex", [1], "CC0 (ocrbatch)",
     "report page: a navigation strip in small type and a large title panel left of two text columns"),
    ("sidebar-bulletin", "sidebar-beside-columns", "tex", "sidebar-bulletin.tex", [1], "CC0 (ocrbatch)",
     "club bulletin: its officers' list in small type down the left, two columns of news beside it"),
    ("refcard-a", "reference-card", "tex", "refcard-a.tex", [1], "CC0 (ocrbatch)",
     "landscape reference card in three columns of term/description pairs under headings, clean gutters"),
    ("refcard-b", "reference-card", "tex", "refcard-b.tex", [1], "CC0 (ocrbatch)",
     "landscape reference card in three columns, other sections"),
    ("chart-table-a", "chart-beside-table", "tex", "chart-table-a.tex", [1], "CC0 (ocrbatch)",
     "a line chart (axis numbers, legend) beside a table of figures, prose above and below; HAS-TABLE"),
    ("chart-table-b", "chart-beside-table", "tex", "chart-table-b.tex", [1], "CC0 (ocrbatch)",
     "a line chart beside a table, other figures; HAS-TABLE"),
    ("transcript-a", "numbered-transcript", "tex", "transcript-a.tex", [1], "CC0 (ocrbatch)",
     "hearing transcript, every line numbered in the left margin (lineno)"),
    ("transcript-b", "numbered-transcript", "tex", "transcript-b.tex", [1], "CC0 (ocrbatch)",
     "hearing transcript, numbered lines, other speakers"),
    ("flowchart-a", "flowchart", "tex", "flowchart-a.tex", [1], "CC0 (ocrbatch)",
     "a flowchart of boxes and a decision, a note beside it, prose above and below"),
    ("flowchart-b", "flowchart", "tex", "flowchart-b.tex", [1], "CC0 (ocrbatch)", "a second flowchart"),
    ("paper-a", "two-column-prose", "tex", "paper-a.tex", [1], "CC0 (ocrbatch)",
     "two-column paper: title, authors and abstract across, numbered sections in two columns"),
    ("paper-b", "two-column-prose", "tex", "paper-b.tex", [1], "CC0 (ocrbatch)", "two-column paper, another"),
    ("form-a", "form", "tex", "form-a.tex", [1], "CC0 (ocrbatch)",
     "membership form: labels with blank rules to fill, a declaration, signature and date"),
    ("newsletter-a", "three-column-prose", "tex", "newsletter-a.tex", [1], "CC0 (ocrbatch)",
     "newsletter: masthead over three columns of short stories under headings"),
    ("slides-a-p1", "slides", "tex", "slides-a.tex", [1], "CC0 (ocrbatch)", "slide: a title and a bulleted list"),
    ("slides-a-p2", "slides", "tex", "slides-a.tex", [2], "CC0 (ocrbatch)", "slide: a title and a bulleted list"),
    ("papertex-sheet", "large-small-type", "texlive-latex-extra-doc", "papertex/example/example.pdf", [1, 2, 3, 4],
     "LPPL-1.3 (papertex)", "four A4 newspaper pages set 2x2 on one A2 sheet (2481x3508 px at 150 dpi): many small-type columns"),
]


def build(cache: Path) -> None:
    import pypdfium2 as pdfium

    packages = sorted({it[2] for it in ITEMS} - {"tex"})
    debs = cache / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    for pkg in packages:
        if not list(debs.glob(f"{pkg}_*.deb")):
            subprocess.run(["apt-get", "download", pkg], cwd=debs, check=True)
    versions = {}
    for deb in debs.glob("*.deb"):
        pkg, version = deb.name.split("_")[:2]
        versions[pkg] = version
        if not (cache / "root" / ".done-" / pkg).exists():
            subprocess.run(["dpkg", "-x", str(deb), str(cache / "root")], check=True)
    (STRESS / "pdfs").mkdir(parents=True, exist_ok=True)
    (STRESS / "truth").mkdir(parents=True, exist_ok=True)
    rows = ["item\tkind\tsource\tlicense\tnotes"]
    versions["tex"] = "bench/stress/src"
    for name, kind, pkg, rel, pages, licence, note in ITEMS:
        src = pdfium.PdfDocument(str(_typeset(cache, rel) if pkg == "tex" else cache / "root" / DOC / rel))
        out = pdfium.PdfDocument.new()
        if len(pages) == 1:
            out.import_pages(src, [pages[0] - 1])
        else:
            _two_by_two(src, out, [p - 1 for p in pages])
        out.save(str(STRESS / "pdfs" / f"{name}.pdf"))
        truth = "\n".join(_text(src[p - 1]) for p in pages)
        if not (STRESS / "truth" / f"{name}.txt").exists() or "--truth" in sys.argv:
            (STRESS / "truth" / f"{name}.txt").write_text(truth + "\n", encoding="utf-8")
        where = ",".join(str(p) for p in pages)
        origin = f"typeset:bench/stress/src/{rel}#p{where}" if pkg == "tex" else \
            f"debian:{pkg}={versions[pkg]}:/{DOC}/{rel}#p{where}"
        rows.append(f"pages/{name}.png\t{kind}\t{origin}\t{licence}\t"
                    f"{note}; rendered {DPI} dpi PNG at bench time; truth = PDF text layer (pdfium), column order")
    (STRESS / "MANIFEST.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    sys.path.insert(0, str(ROOT / "scripts"))
    import stress_records  # (the drawn record pages: their rows go back into the MANIFEST)

    stress_records.main()


def build_typeset(cache: Path, truth: bool) -> None:
    """Only the typeset items (no Debian package needed): their PDFs, truth and MANIFEST rows."""
    import pypdfium2 as pdfium

    rows = (STRESS / "MANIFEST.tsv").read_text(encoding="utf-8").splitlines()
    for name, kind, pkg, rel, pages, licence, note in (it for it in ITEMS if it[2] == "tex"):
        src = pdfium.PdfDocument(str(_typeset(cache, rel)))
        out = pdfium.PdfDocument.new()
        out.import_pages(src, [pages[0] - 1])
        out.save(str(STRESS / "pdfs" / f"{name}.pdf"))
        if truth or not (STRESS / "truth" / f"{name}.txt").exists():
            (STRESS / "truth" / f"{name}.txt").write_text(_text(src[pages[0] - 1]) + "\n", encoding="utf-8")
        row = (f"pages/{name}.png\t{kind}\ttypeset:bench/stress/src/{rel}#p{pages[0]}\t{licence}\t{note}; "
               f"rendered {DPI} dpi PNG at bench time; truth = PDF text layer (pdfium), reading order checked by eye")
        rows = [r for r in rows if not r.startswith(f"pages/{name}.png\t")] + [row]
    (STRESS / "MANIFEST.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")


def _typeset(cache: Path, rel: str) -> Path:
    """The PDF of bench/stress/src/`rel`, typeset with pdflatex into the cache folder."""
    out = cache / "tex"
    out.mkdir(parents=True, exist_ok=True)
    pdf = out / Path(rel).with_suffix(".pdf").name
    if not pdf.exists():
        subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", str(STRESS / "src" / rel)],
                       cwd=out, check=True, capture_output=True)
    return pdf


def _two_by_two(src, out, indices: list[int]) -> None:
    import pypdfium2 as pdfium
    import pypdfium2.raw as raw

    w, h = src[indices[0]].get_size()
    sheet = out.new_page(2 * w, 2 * h)
    for k, i in enumerate(indices):
        xobj = src.page_as_xobject(i, out)
        obj = xobj.as_pageobject()
        obj.transform(pdfium.PdfMatrix().translate((k % 2) * w, (1 - k // 2) * h))
        sheet.insert_obj(obj)
    sheet.gen_content()
    del raw


def _text(page) -> str:
    text = page.get_textpage().get_text_range().replace("\ufffe", "-\n")  # PDFium's line-end hyphen
    lines = [l.rstrip() for l in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    return "\n".join(l for l in lines if l.strip())


def render(dest: Path, dpi: int = DPI) -> list[Path]:
    """Render every stress PDF to DEST/NAME.png (RGB) at `dpi`; the paths written."""
    import pypdfium2 as pdfium

    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for pdf in sorted((STRESS / "pdfs").glob("*.pdf")):
        doc = pdfium.PdfDocument(str(pdf))
        try:
            image = doc[0].render(scale=dpi / 72).to_pil().convert("RGB")
        finally:
            doc.close()
        path = dest / f"{pdf.stem}.png"
        image.save(path)
        out.append(path)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="cut the PDFs and truth from the Debian packages")
    b.add_argument("--cache", type=Path, default=Path("/tmp/ocrbatch-stress-cache"))
    b.add_argument("--truth", action="store_true", help="rewrite the truth files from the text layer")
    t = sub.add_parser("typeset", help="typeset only the pages of bench/stress/src (no Debian packages)")
    t.add_argument("--cache", type=Path, default=Path("/tmp/ocrbatch-stress-cache"))
    t.add_argument("--truth", action="store_true", help="rewrite their truth files from the text layer")
    r = sub.add_parser("render", help="render the stress PDFs to PNG")
    r.add_argument("dest", type=Path)
    sub.add_parser("records", help="draw the record pages (statements, a log, forms, cards, an invoice) and their truth")
    a = ap.parse_args(argv)
    if a.cmd == "records":
        sys.path.insert(0, str(ROOT / "scripts"))
        import stress_records

        return stress_records.main()
    if a.cmd == "build":
        build(a.cache)
    elif a.cmd == "typeset":
        build_typeset(a.cache, a.truth)
    else:
        for p in render(a.dest):
            print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
