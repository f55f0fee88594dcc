#!/usr/bin/env python3
"""Cell-level scores of the stress pages' tables, through the OCR path and the text-layer path.

    python scripts/stress_cells.py OCR_DIR     # OCR_DIR/NAME.md: what the OCR path wrote (layout_replay's out/stress)

For each page with cell truth (`bench/stress/cells/NAME.tsv`: table, row, column, text; written by
`scripts/stress_records.py`), the pipe tables of the Markdown are read back into cells (row and column
counted from 0 in each table) and matched with the truth: a cell counts when its row, column and text
(normalised as score.py does) agree. Printed: recall and precision over cells, and how many truth rows
came out whole (every cell of the row right), for the OCR Markdown and for the page's own text layer
(`textlayer.page_markdown`, the `--text-layer` path) side by side.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
STRESS = ROOT / "bench" / "stress"
SCORE = ROOT.parent / "shared" / "bench"


def _norm(text: str) -> str:
    sys.path.insert(0, str(SCORE))
    from score import normalize  # (../shared/bench/score.py)

    return normalize(text)


def table_cells(md: str) -> set[tuple[int, int, str]]:
    """(row, column, text) of every cell of the Markdown's pipe tables, rows counted in each table
    (the rule under a table's first row is no row)."""
    out: set[tuple[int, int, str]] = set()
    row = -1
    for line in md.splitlines() + [""]:
        s = line.strip()
        if not (s.startswith("|") and s.endswith("|")):
            row = -1
            continue
        if set(s) <= set("|-: "):
            continue  # (the rule under the first row)
        cells = [c.strip().replace("\\|", "|") for c in s[1:-1].split(" | ")]
        row += 1
        out |= {(row, k, _norm(c)) for k, c in enumerate(cells) if c}
    return out


def truth_cells(name: str) -> set[tuple[int, int, str]]:
    rows = (STRESS / "cells" / f"{name}.tsv").read_text(encoding="utf-8").splitlines()[1:]
    return {(int(r), int(c), _norm(t)) for _, r, c, t in (row.split("\t", 3) for row in rows)}


def score(truth: set, got: set) -> tuple[float, float, float]:
    """(recall, precision, share of truth rows whole)."""
    hit = truth & got
    rows = {r for r, _, _ in truth}
    whole = sum(1 for r in rows if {c for c in truth if c[0] == r} <= got)
    return len(hit) / max(1, len(truth)), len(hit) / max(1, len(got)), whole / max(1, len(rows))


def text_layer_markdown(pdf: Path) -> str | None:
    from ocrbatch import textlayer
    from ocrbatch.pdfium import PdfHandle

    handle = PdfHandle(pdf)
    try:
        page = textlayer.page_markdown(handle.text_chars(0), 150)
    finally:
        handle.close()
    return page.markdown if page is not None else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ocr", type=Path, help="folder of the OCR path's NAME.md (layout_replay's OUT/stress)")
    a = ap.parse_args()
    print(f"{'page':20s} {'OCR recall':>10s} {'precision':>9s} {'rows':>5s} | {'text layer':>10s} {'precision':>9s} {'rows':>5s}")
    for tsv in sorted((STRESS / "cells").glob("*.tsv")):
        name = tsv.stem
        truth = truth_cells(name)
        md = a.ocr / f"{name}.md"
        ocr = score(truth, table_cells(md.read_text(encoding="utf-8"))) if md.exists() else None
        layer = text_layer_markdown(STRESS / "pdfs" / f"{name}.pdf")
        tl = score(truth, table_cells(layer)) if layer is not None else None

        def fmt(s: tuple | None) -> str:
            return f"{s[0]:10.3f} {s[1]:9.3f} {s[2]:5.2f}" if s else f"{'-':>10s} {'-':>9s} {'-':>5s}"

        print(f"{name:20s} {fmt(ocr)} | {fmt(tl)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
