#!/usr/bin/env python3
"""How the embedded engine's page confidence tracks its character error rate: a table of confidence bands
against CER on the development corpus (../shared/bench/dev), for docs/benchmarks.md.

    python scripts/confidence_table.py                    # the dev corpus as it is (30 pages, ~1-2 min)
    python scripts/confidence_table.py --degrade 2        # and two degraded copies of every page

Each page is read by the engine alone (as `make bench` does), scored against its truth with
../shared/bench/score.py's own `score_pair`, and put in a band by `info.confidence.score`. A band's CER is
micro-averaged (its pages' edits over their truth characters), as score.py's overall figure is; the
bag-of-words F1 (order-free) is beside it, since CER also counts reading-order differences, which
the recognizer's scores cannot see. Then the rank correlation (Spearman) with each page's CER of the
score and of other ways of summing up the line scores, as a check of the choice made in confidence.py.

`--degrade N` adds N copies of each page made scan-like at rising strength (downscaled, blurred, noisy,
JPEG-compressed), so that the table covers worse pages than the corpus holds; their truth is the page's.
The engine's results are kept in `--cache` (JSON) so that the table can be printed again without OCR.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEV = ROOT.parent / "shared" / "bench" / "dev"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

BANDS = (0.96, 0.92, 0.0)  # lower edges, best band first: the dev corpus has one page under 0.80
WIDE_BANDS = (0.96, 0.92, 0.80, 0.0)  # with degraded copies


def degrade(image: Any, level: int, seed: int) -> Any:
    """A scan-like copy of `image`: shrunk and enlarged again, blurred, with noise, saved as a JPEG."""
    import numpy as np
    from PIL import Image, ImageFilter

    w, h = image.size
    scale = max(0.35, 0.8 - 0.2 * level)
    im = image.convert("L").resize((int(w * scale), int(h * scale)), Image.BILINEAR).resize((w, h), Image.BILINEAR)
    im = im.filter(ImageFilter.GaussianBlur(0.6 * level))
    rng = np.random.default_rng(seed)
    arr = np.asarray(im, np.float32) + rng.normal(0, 10 * level, (h, w))
    im = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
    buf = io.BytesIO()
    im.save(buf, format="JPEG", quality=max(20, 60 - 15 * level))
    buf.seek(0)
    return Image.open(buf).convert("RGB")


def read_pages(dev: Path, levels: int, size: str) -> list[dict]:
    """Every dev page (and its degraded copies) through the engine: name, level, Markdown, confidence and the
    kept lines' scores and lengths."""
    import corpus_bench as bench  # scripts/corpus_bench.py (make bench): the dev pages as images
    from ocrbatch.config import EngineOptions
    from ocrbatch.engines import registry
    from ocrbatch.records import PageImage

    pages = bench.named_pages(dev, 150)
    engine = registry.create("rapidocr", EngineOptions(model_size=size))
    engine.load("cpu")
    rows = []
    t0 = time.perf_counter()
    try:
        for level in range(levels + 1):
            for n, (name, image) in enumerate(pages):
                im = image if level == 0 else degrade(image, level, seed=1000 * level + n)
                out = engine.infer([PageImage(ref=None, image=im)])[0]  # type: ignore[arg-type]
                if isinstance(out, Exception):
                    print(f"{name} level {level}: {out}", file=sys.stderr)
                    continue
                lines = [l for l in out.lines.lines] if out.lines else []
                rows.append({"name": name, "level": level, "markdown": out.markdown,
                             "confidence": out.info.get("confidence"),
                             "scores": [l.score for l in lines], "chars": [len(l.text) for l in lines]})
                print(f"  {len(rows)} pages read ({time.perf_counter() - t0:.0f} s)", end="\r", file=sys.stderr)
    finally:
        engine.close()
    print(file=sys.stderr)
    return rows


def score_rows(rows: list[dict], dev: Path) -> None:
    """Each row's CER, edits, truth characters and BoW-F1 from score.py's `score_pair`."""
    spec = importlib.util.spec_from_file_location("score", dev.parent / "score.py")
    score = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(score)  # type: ignore[union-attr]
    manifest = score._load_manifest(dev / "MANIFEST.tsv")
    for r in rows:
        truth = (dev / "truth" / f"{r['name']}.txt").read_text(encoding="utf-8")
        doc = r["name"].split("/")[0]
        s = score.score_pair(truth, r["markdown"], dehyphen=True, ignore_case=manifest.get(doc, ("", False))[1])
        r.update(cer=s["cer"], edits=s["char_edits"], truth_chars=s["truth_chars"], bow_f1=s["bow_f1"],
                 kind=manifest.get(doc, ("", False))[0])


def band_table(rows: list[dict], bands: tuple[float, ...]) -> list[str]:
    out = ["| confidence | pages | CER | median page CER | BoW-F1 | low lines per page |",
           "|---|---|---|---|---|---|"]
    for i, edge in enumerate(bands):
        rs = [r for r in rows if next(n for n, e in enumerate(bands) if r["confidence"]["score"] >= e) == i]
        label = f"≥ {edge:.2f}" if i == 0 else (f"< {bands[i - 1]:.2f}" if edge == 0 else
                                                 f"{edge:.2f}–{bands[i - 1]:.2f}")
        if not rs:
            out.append(f"| {label} | 0 | | | | |")
            continue
        cer = sum(r["edits"] for r in rs) / max(1, sum(r["truth_chars"] for r in rs))
        med = sorted(r["cer"] for r in rs)[len(rs) // 2]
        f1 = sum(r["bow_f1"] for r in rs) / len(rs)
        low = sum(r["confidence"]["low_lines"] for r in rs) / len(rs)
        out.append(f"| {label} | {len(rs)} | {cer:.3f} | {med:.3f} | {f1:.3f} | {low:.1f} |")
    return out


def spearman(xs: list[float], ys: list[float]) -> float:
    def ranks(v: list[float]) -> list[float]:
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2
            i = j + 1
        return r

    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sx = math.sqrt(sum((a - mx) ** 2 for a in rx))
    sy = math.sqrt(sum((b - my) ** 2 for b in ry))
    return cov / (sx * sy) if sx and sy else 0.0


def candidates(r: dict) -> dict[str, float]:
    """Ways of summing up a page's line scores, the one confidence.py uses first."""
    from ocrbatch.confidence import recognizer_score

    s, c = r["scores"], [max(1, n) for n in r["chars"]]
    if not s:
        return dict.fromkeys(("score", "mean", "char-weighted mean", "min", "10th percentile"), 0.0)
    srt = sorted(s)
    return {"score": recognizer_score(s, c), "mean": sum(s) / len(s),
            "char-weighted mean": sum(a * b for a, b in zip(s, c)) / sum(c), "min": srt[0],
            "10th percentile": srt[int(0.1 * (len(srt) - 1))]}


def thirds(rows: list[dict]) -> str:
    """The CER of the pages in each third by confidence, lowest first."""
    order = sorted(rows, key=lambda r: r["confidence"]["score"])
    parts = [order[i * len(order) // 3:(i + 1) * len(order) // 3] for i in range(3)]
    return " · ".join(f"{name} {sum(r['edits'] for r in p) / max(1, sum(r['truth_chars'] for r in p)):.3f}"
                      for name, p in zip(("lowest third", "middle", "highest"), parts))


def report(rows: list[dict], title: str, bands: tuple[float, ...]) -> None:
    cer = sum(r["edits"] for r in rows) / max(1, sum(r["truth_chars"] for r in rows))
    print(f"\n{title}: {len(rows)} pages, CER {cer:.3f}\n")
    print("\n".join(band_table(rows, bands)))
    print(f"\nCER by thirds of the pages: {thirds(rows)}")
    print("\nSpearman rank correlation with the page's CER (negative: a higher confidence, a lower CER):")
    cands = [candidates(r) for r in rows]
    for name in cands[0]:
        rho = spearman([c[name] for c in cands], [r["cer"] for r in rows])
        print(f"  {name:<20} {rho:+.3f}")
    worst = sorted(rows, key=lambda r: r["confidence"]["score"])[:5]
    print("\nlowest confidence:", ", ".join(f"{r['name']}@{r['level']} {r['confidence']['score']:.3f} "
                                           f"(CER {r['cer']:.3f})" for r in worst))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dev", type=Path, default=DEV)
    ap.add_argument("--degrade", type=int, default=0, metavar="N", help="degraded copies of each page (0-3)")
    ap.add_argument("--model-size", default="small")
    ap.add_argument("--cache", type=Path, default=None, help="keep the engine's results here (JSON); reused when "
                                                              "it holds the same pages")
    a = ap.parse_args(argv)
    rows = None
    if a.cache is not None and a.cache.is_file():
        cached = json.loads(a.cache.read_text())
        if cached.get("degrade") == a.degrade and cached.get("model_size") == a.model_size:
            rows = cached["rows"]
    if rows is None:
        rows = read_pages(a.dev, a.degrade, a.model_size)
        if a.cache is not None:
            a.cache.write_text(json.dumps({"degrade": a.degrade, "model_size": a.model_size, "rows": rows}))
    score_rows(rows, a.dev)
    report([r for r in rows if r["level"] == 0], f"dev corpus, --model-size {a.model_size}", BANDS)
    if a.degrade:
        report(rows, f"dev corpus and {a.degrade} degraded copies of each page", WIDE_BANDS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
