#!/usr/bin/env python3
"""Writes ocrbatch/engines/charsets/latin.txt: the classes the Latin head keeps (engines/heads.py).

    python scripts/latin_charset.py [--out ocrbatch/engines/charsets/latin.txt]

The kept set is the union of
- every class of either dictionary (tiny's and small's) that is not a letter of a script without case (Unicode
  category Lo or Lm: CJK ideographs, kana, Hangul, ... ) unless its name says Latin, Greek or Cyrillic: so the
  Latin, Greek and Cyrillic letters, digits, punctuation and symbols, the fullwidth forms and the CJK punctuation;
- every class the tiny and the small recognizer (full heads) emit on pages the project draws itself: sample_docs/,
  the layout stress set (bench/stress, rendered at 150 dpi) and the symbol-dense lines drawn below. That keeps the
  look-alikes the models write for Western marks (a CJK 〈 for ⟨, an ideograph for a dash or a box), which
  rapid.clean_texts maps back or drops. Never the dev corpus or any set that is scored.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

OUT = ROOT / "ocrbatch" / "engines" / "charsets" / "latin.txt"
DRAWN = [
    "Symbols: § ¶ † ‡ • · ° ± × ÷ ≤ ≥ ≠ ≈ ∞ √ ∑ ∫ ∂ µ Ω α β γ δ π σ λ θ",
    "Money: $12.50 €9,99 £7 ¥300 ¢ 50% 3‰ #42 & @home ~tilde ^caret |bar| \\back/",
    "Quotes “double” ‘single’ «guillemets» „low“ 'straight' \"plain\" — em – en - hyphen …",
    "Brackets (round) [square] {curly} <angle> ⟨arg⟩ a_b c=d e+f g*h i/j k;l m:n o!p q?r",
    "Accents: àáâãäå çèéêë ìíîï ñòóôõö ùúûü ýÿ ÀÉÎÕÜ Çß æœ ÆŒ øØ łŁ šž čř ğış",
    "Marks: ™ © ® ℃ № ½ ¼ ¾ ² ³ ¹ → ← ↑ ↓ ✓ ✗ ★ ☆ ■ □ ● ○ ◆ ◇ ▲ ▼",
    "Code: if (x != 0) { y[i] = f(a, b); } // 0xFF 1e-3 ~/path/to_file.txt",
    "Greek ΑΒΓΔΕΖΗΘΙΚΛΜΝΞΟΠΡΣΤΥΦΧΨΩ Cyrillic Привет мир ЖЗИЙКЛ",
]


def by_category(chars: list[str]) -> set[str]:
    keep = set()
    for ch in chars:
        if len(ch) != 1:
            continue
        if unicodedata.category(ch) in ("Lo", "Lm") and not unicodedata.name(ch, "").startswith(
                ("LATIN", "GREEK", "CYRILLIC")):
            continue
        keep.add(ch)
    return keep


def drawn_pages():
    from PIL import Image, ImageDraw, ImageFont

    pages = []
    for size in (22, 30):
        im = Image.new("RGB", (1400, 80 + 2 * size * len(DRAWN)), "white")
        d = ImageDraw.Draw(im)
        for k, line in enumerate(DRAWN):
            d.text((40, 40 + 2 * size * k), line, font=ImageFont.load_default(size=size), fill="black")
        pages.append((f"drawn-{size}", im))
    return pages


def emitted(pages) -> set[str]:
    """Every character the tiny and the small recognizer (full heads) emit on `pages`."""
    from ocrbatch.config import EngineOptions
    from ocrbatch.engines import ppocr, rapid, registry

    seen: set[str] = set()
    real = ppocr.Recognizer._decode

    def decode(self, *a, **k):
        reading = real(self, *a, **k)
        seen.update(reading.text)
        return reading

    ppocr.Recognizer._decode = decode
    engine = registry.create("rapidocr", EngineOptions(model_size="auto", reread_below=1.0, script="all"))
    engine.load("cpu")
    try:
        for k, (name, image) in enumerate(pages):
            state = rapid._Page(rapid._bgr(image))
            engine._detect(state)
            for crop in state.crops:  # one line a call: a batch pads every line to the widest
                engine._rec.read([crop])
                engine._reread.read([crop])
            print(f"  {k + 1}/{len(pages)} {name}: {len(seen)} characters so far", file=sys.stderr, flush=True)
    finally:
        engine.close()
        ppocr.Recognizer._decode = real
    seen.discard(" ")
    return seen


def main(argv: list[str] | None = None) -> int:
    import corpus_bench as bench
    from PIL import Image

    from ocrbatch.engines import ppocr

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    models = ppocr.model_dir()
    chars = [c for size in ("tiny", "small")
             for c in (models / ppocr.MODELS[size][2]).read_text(encoding="utf-8").splitlines()]
    keep = by_category(chars)
    pages = []
    for p in sorted((ROOT / "sample_docs").iterdir()):
        if p.suffix == ".pdf":
            import pypdfium2

            doc = pypdfium2.PdfDocument(str(p))
            pages += [(f"{p.name}#{i + 1}", doc[i].render(scale=150 / 72).to_pil().convert("RGB"))
                      for i in range(len(doc))]
        else:
            with Image.open(p) as im:
                pages.append((p.name, im.convert("RGB")))
    pages += bench.stress_pages(Path(tempfile.mkdtemp(prefix="charset-")))
    pages += drawn_pages()
    seen = emitted(pages)
    extra = sorted(seen - keep)
    dictionary = set(chars)
    kept = sorted((keep | seen) & dictionary)
    header = [
        "# The Latin head's classes (engines/heads.py): one character a line; lines of more than one character",
        "# are comments. Written by scripts/latin_charset.py; do not edit by hand, run it again.",
        "# Chosen from the models' own dictionaries and from what they emit on pages the project draws:",
        "# - every class of tiny's or small's dictionary but the letters of scripts without case (Unicode Lo/Lm:",
        "#   CJK ideographs, kana, Hangul...), Latin/Greek/Cyrillic ones kept: letters with case, digits,",
        "#   punctuation, symbols, fullwidth forms, CJK punctuation (〈 〉 （ ） ， ...: rapid.clean_texts maps them);",
        f"# - plus the {len(extra)} other classes the full-head tiny and small models emit on sample_docs/, the layout",
        "#   stress set (bench/stress) and symbol-dense lines the script draws (look-alikes: an ideograph read for",
        "#   a dash, a box or a digit). Never the dev corpus or any set that is scored.",
        f"# {len(kept)} classes (plus CTC's blank and the space, always kept).",
    ]
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text("\n".join(header + kept) + "\n", encoding="utf-8")
    print(f"{a.out}: {len(kept)} classes, {len(extra)} of them emitted look-alikes: {''.join(extra)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
