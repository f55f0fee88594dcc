#!/usr/bin/env python3
"""The fine-tune's curve: dev CER of a recognizer as the fastest profile's only reader, for each snapshot.

    python scripts/rec_curve.py SNAPSHOT_DIR [--dict DICT] [--height 32]      (make train-rec writes snapshots)

Each snapshot (rec-NNNNNNN.onnx: the model after N training lines) reads every line the tiny detector finds on
the dev corpus (../shared/bench/dev, 30 pages at 150 dpi), with no re-read, on onnxruntime; the shipped tiny
recognizer at 48 rows is the first row. Prints lines trained, dev CER, BoW-F1, and the recognizer's CPU seconds
against tiny's (process time of its calls, same pages, same sitting). Scores only: nothing here trains on dev.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))


class Timed:
    """A recognizer whose calls' process time is summed (the engine's threads are one at a time here)."""

    def __init__(self, rec, height: int | None) -> None:
        self.rec, self.height, self.spent = rec, height, 0.0
        self.model = rec.model

    def _fit(self, crops):
        import cv2

        if self.height is None or not crops or crops[0].shape[0] == self.height:
            return crops
        return [cv2.resize(c, (max(1, round(c.shape[1] * STRETCH * self.height / c.shape[0])), self.height),
                           interpolation=cv2.INTER_AREA) for c in crops]

    def read(self, crops):
        from ocrbatch.engines import ppocr

        ppocr.REC_HEIGHT = self.height or 48  # recognizer_input's rows (a free parameter once the engine has one)
        t0 = time.thread_time()
        out = self.rec.read(self._fit(crops))
        self.spent += time.thread_time() - t0
        return out

    def __call__(self, crops):
        return [(r.text, r.score) for r in self.read(crops)]


STRETCH = 1.0  # crops widened by this (more frames per character)
DETECTOR = "tiny"  # the fastest profile's detector (--detector small: the default profile's)


def run(pages, rec_path: Path | None, dict_path: Path | None, height: int | None, out: Path) -> float:
    from ocrbatch import atomic
    from ocrbatch.config import EngineOptions
    from ocrbatch.engines import ppocr, registry, runtimes
    from ocrbatch.records import PageImage

    # --script all: the wheel's tiny recognizer at 48 rows reads first (the baseline), and crops are cut at 48
    engine = registry.create("rapidocr", EngineOptions(model_size=DETECTOR, reread_below=0.0, threads=1,
                                                       runtime="onnxruntime", script="all"))
    engine.load("cpu")
    if rec_path is not None:
        engine._rec = ppocr.Recognizer(runtimes.OnnxRuntimeModel(rec_path), dict_path, height or ppocr.REC_HEIGHT,
                                       rec_path.stem)
    timed = engine._rec = Timed(engine._rec, height)
    try:
        for i in range(0, len(pages), 8):
            chunk = pages[i:i + 8]
            outs = engine.infer([PageImage(ref=None, image=im) for _, im in chunk])  # type: ignore[arg-type]
            for (name, _), o in zip(chunk, outs):
                if not isinstance(o, Exception):
                    dest = out / f"{name}.md"
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    atomic.atomic_write(dest, o.markdown.encode())
    finally:
        engine.close()
    return timed.spent


def main(argv: list[str] | None = None) -> int:
    import corpus_bench as bench

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("snapshots", type=Path)
    ap.add_argument("--dict", type=Path, default=None, help="the snapshots' dictionary (default: SNAPSHOTS/../dict.txt)")
    ap.add_argument("--height", type=int, default=32)
    ap.add_argument("--every", type=int, default=1, help="score every Nth snapshot")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--keep", type=Path, default=None, help="keep each model's Markdown under this folder")
    ap.add_argument("--detector", choices=("tiny", "small"), default="tiny")
    ap.add_argument("--stretch", type=float, default=1.0)
    args = ap.parse_args(argv)
    global DETECTOR, STRETCH
    DETECTOR, STRETCH = args.detector, args.stretch
    dict_path = args.dict or args.snapshots.parent / "dict.txt"
    pages = bench.named_pages(bench.DEFAULT_DEV, 150)
    rows = []
    snaps = sorted(args.snapshots.glob("rec-*.onnx"))
    snaps = snaps[::args.every] + ([snaps[-1]] if snaps and (len(snaps) - 1) % args.every else [])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = str(args.keep) if args.keep else tmp
        base_out = Path(tmp) / "tiny48"
        base_cpu = run(pages, None, None, None, base_out)
        figures, _ = bench.score(bench.DEFAULT_DEV, base_out)
        rows.append({"model": "tiny (shipped, 48 rows)", "lines": 0, "cer": figures["overall"]["cer"],
                     "f1": figures["overall"]["mean_bow_f1"], "cpu": base_cpu})
        for snap in snaps:
            out = Path(tmp) / snap.stem
            spent = run(pages, snap, dict_path, args.height, out)
            figures, _ = bench.score(bench.DEFAULT_DEV, out)
            rows.append({"model": snap.name, "lines": int(snap.stem.split("-")[1]), "cer": figures["overall"]["cer"],
                         "f1": figures["overall"]["mean_bow_f1"], "cpu": spent})
            print(f"{snap.name}: CER {rows[-1]['cer']:.4f}", file=sys.stderr, flush=True)
    print(f"| recognizer | lines trained | dev CER | dev BoW-F1 | recognizer CPU ÷ tiny's |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['lines']} | {r['cer']:.4f} | {r['f1']:.3f} | {r['cpu'] / base_cpu:.2f} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
