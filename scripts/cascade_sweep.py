#!/usr/bin/env python3
"""The cascade's accuracy and re-read share for a few `--reread-below` thresholds (and any other flags), on the dev
corpus and the layout stress set: what `make bench` reports for one profile, without the timing.

    python scripts/cascade_sweep.py [--below 0.987,0.95,0.9] [--flags "--runtime onnxruntime"]
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))


def main(argv: list[str] | None = None) -> int:
    import corpus_bench as bench

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--below", default="0.987,0.95,0.9")
    ap.add_argument("--flags", default="")
    ap.add_argument("--dev", type=Path, default=bench.DEFAULT_DEV)
    a = ap.parse_args(argv)
    flags = shlex.split(a.flags)
    print("| --reread-below | dev CER | dev BoW-F1 | stress CER | lines re-read |\n|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        bench.stress_pages(work)
        for below in a.below.split(","):
            extra = [*flags, "--reread-below", below]
            dev_out, stress_out = work / f"dev-{below}", work / f"stress-{below}"
            bench.convert(a.dev, dev_out, "rapidocr", extra)
            bench.convert(a.dev, stress_out, "rapidocr", extra, inputs=[work / "stress-png"])
            dev, _ = bench.score(a.dev, dev_out)
            stress, _ = bench.score(a.dev, stress_out, bench.STRESS / "truth")
            again = [sum(x) for x in zip(bench.reread_share(dev_out), bench.reread_share(stress_out))]
            print(f"| {below} | {dev['overall']['cer']:.4f} | {dev['overall']['mean_bow_f1']:.3f} | "
                  f"{stress['overall']['cer']:.4f} | {again[0] / max(1, again[1]):.0%} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
