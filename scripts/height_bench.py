#!/usr/bin/env python3
"""The shipped recognizers at other input heights, end to end on the dev corpus (engines/heads.py derives them).

    python scripts/height_bench.py [--sizes tiny,small] [--heights 48,40,32] [--runtime onnxruntime] [--script all]

For each size and height: `ocrbatch convert` of dev's pages/ and pdfs/ with that size's recognizer (`tiny`: the
fastest profile, tiny detector and tiny recognizer, no re-read; `small`: small throughout), its RecSpec's height
set, then ../shared/bench/score.py. Prints wall seconds (process start included; noisy on a shared machine), CER
and BoW-F1. The models are not retrained: this says what a 32-row input costs the shipped weights, and what it
saves.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEV = ROOT.parent / "shared" / "bench" / "dev"

RUN = """
import dataclasses, sys
from ocrbatch.engines import ppocr
height = int(sys.argv[1])
for name, spec in list(ppocr.RECOGNIZERS.items()):
    ppocr.RECOGNIZERS[name] = dataclasses.replace(spec, height=height)
from ocrbatch.__main__ import main
sys.argv = ["ocrbatch", *sys.argv[2:]]
sys.exit(main())
"""


def score(dev: Path, out: Path) -> tuple[float, float]:
    r = subprocess.run([sys.executable, str(dev.parent / "score.py"), str(dev / "truth"), str(out), "--json", "-",
                        "--quiet"],
                       capture_output=True, text=True, check=True)
    doc, _ = json.JSONDecoder().raw_decode(r.stdout[r.stdout.index("{"):])
    total = doc.get("overall", doc)
    return float(total["cer"]), float(total["mean_bow_f1"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="tiny,small")
    ap.add_argument("--heights", default="48,40,32")
    ap.add_argument("--runtime", default="auto")
    ap.add_argument("--script", default="all")
    ap.add_argument("--dev", type=Path, default=DEV, help="the dev corpus (score.py beside it)")
    a = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="height-bench-"))
    print(f"{'size':6s} {'height':>6s} {'wall s':>7s} {'CER':>7s} {'BoW-F1':>7s}")
    for size in a.sizes.split(","):
        flags = ["--model-size", size] + (["--reread-below", "0"] if size == "tiny" else [])
        for height in map(int, a.heights.split(",")):
            out = work / f"{size}-{height}"
            cmd = [sys.executable, "-c", RUN, str(height), "convert", str(a.dev / "pages"), str(a.dev / "pdfs"),
                   "-o", str(out), "-q", "--runtime", a.runtime, "--script", a.script, *flags]
            t0 = time.perf_counter()
            subprocess.run(cmd, cwd=ROOT, check=True)
            wall = time.perf_counter() - t0
            cer, bow = score(a.dev, out)
            print(f"{size:6s} {height:6d} {wall:7.1f} {cer:7.4f} {bow:7.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
