#!/usr/bin/env python3
"""A held-out set of pages drawn by the training recipe's generator, to measure a change on pages nobody has seen.

    python scripts/drawn_set.py draw OUT [--pages 40] [--receipts 30]     OUT/png/*.png, OUT/truth/*.txt
    ocrbatch convert OUT/png -o PRED
    python scripts/drawn_set.py score OUT PRED                             bag-of-words F1, pages and receipts

`--pages` pages of the generator's own mix (columns, tables, code, records; three in ten a till receipt), then
`--receipts` till receipts only (ocrbatch/training/draw.py), each with the seed "heldout/K", which no training
run draws (they seed with integers). A page's truth is the text of its drawn units, one a line, in drawing order,
not reading order: so only the order-free bag-of-words F1 (bench/score.py's, after its normalisation) is
scored, which sees words split or run together, and misread ones. Needs the fonts and texts of the training
recipe (`make train-deps`; without them, Pillow's own font and Python's docstrings).
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def draw_set(out: Path, pages: int, receipts: int) -> None:
    from ocrbatch.training import draw
    from ocrbatch.training.text import Corpus

    (out / "png").mkdir(parents=True, exist_ok=True)
    (out / "truth").mkdir(exist_ok=True)
    share = draw.RECEIPTS
    try:
        for k in range(pages + receipts):
            rng = random.Random(f"heldout/{k}")
            draw.RECEIPTS = share if k < pages else 1.0
            page = draw.draw_page(rng, Corpus.found(rng))
            name = f"{'page' if k < pages else 'receipt'}-{k:03d}"
            page.image.save(out / "png" / f"{name}.png")
            (out / "truth" / f"{name}.txt").write_text("\n".join(u.text for u in page.units) + "\n", encoding="utf-8")
    finally:
        draw.RECEIPTS = share


def score(out: Path, pred: Path) -> dict[str, float]:
    from score import _bow_f1, normalize

    groups: dict[str, list[float]] = {}
    for truth in sorted((out / "truth").glob("*.txt")):
        md = pred / f"{truth.stem}.md"
        words = normalize(md.read_text(encoding="utf-8")).split() if md.exists() else []
        groups.setdefault(truth.stem.split("-")[0], []).append(
            _bow_f1(normalize(truth.read_text(encoding="utf-8")).split(), words))
    return {g: sum(v) / len(v) for g, v in groups.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("draw")
    d.add_argument("out", type=Path)
    d.add_argument("--pages", type=int, default=40)
    d.add_argument("--receipts", type=int, default=30)
    s = sub.add_parser("score")
    s.add_argument("out", type=Path)
    s.add_argument("pred", type=Path)
    args = ap.parse_args()
    if args.cmd == "draw":
        draw_set(args.out, args.pages, args.receipts)
    else:
        for group, f1 in score(args.out, args.pred).items():
            print(f"{group:10s} BoW-F1 {f1:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
