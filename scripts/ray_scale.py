"""Scale figures for `--ray` with the fake-timed engine (a GPU-like cost per batch, no model): pages/s of a local
run and of a run on a private Ray cluster with 1 and 2 actors, and the driver's CPU time per page (this
process: discovery, dispatch, writes, the manifest; the actors' work is in their own processes).

    python scripts/ray_scale.py [PAGES] [ROUNDS]      default 480 pages, 2 rounds in ABBA order

Each actor is one simulated device (OCRBATCH_FAKE_BATCH_MS per batch + OCRBATCH_FAKE_PAGE_MS per page), so 2
actors should near double the local run's pages/s until the driver or the machine's CPUs run out. The wall time
of a Ray run includes starting its actors (a second or two here).
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
from pathlib import Path

BATCH_MS, PAGE_MS, MAX_BATCH = 100, 10, 8


def main() -> int:
    pages = int(sys.argv[1]) if len(sys.argv) > 1 else 480
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    os.environ.update(OCRBATCH_FAKE_BATCH_MS=str(BATCH_MS), OCRBATCH_FAKE_PAGE_MS=str(PAGE_MS))
    import ray
    from PIL import Image, ImageDraw

    from ocrbatch.config import RunConfig
    from ocrbatch.pipeline.run import run

    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    tmp = Path(tempfile.mkdtemp(prefix="ray-scale-"))
    src = tmp / "in"
    src.mkdir()
    for i in range(pages):
        im = Image.new("RGB", (400, 300), "white")
        ImageDraw.Draw(im).text((20, 20), f"page {i}", fill="black")
        im.save(src / f"p{i:04d}.png")
    setups = {"local": {}, "ray 1 actor": {"ray": "auto", "ray_workers": 1},
              "ray 2 actors": {"ray": "auto", "ray_workers": 2}}
    order = list(setups) + list(reversed(setups))
    figures: dict[str, list[tuple[float, float]]] = {k: [] for k in setups}
    n = 0
    for _ in range(rounds // 2 or 1):
        for name in order:
            n += 1
            cpu0, t0 = time.process_time(), time.perf_counter()
            summary = run(RunConfig.build((str(src),), tmp / f"out{n}", engine="fake-timed", max_batch=MAX_BATCH,
                                          **setups[name]))
            wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            assert summary.counts["ok"] == pages, summary.counts
            figures[name].append((pages / wall, cpu / pages * 1000))
    print(f"{pages} pages, fake-timed {BATCH_MS} ms/batch + {PAGE_MS} ms/page, --max-batch {MAX_BATCH}, "
          f"{os.cpu_count()} CPUs; runs in order {' / '.join(order)}")
    print(f"{'setup':14} {'pages/s':>8} {'driver CPU ms/page':>19}  (each run)")
    for name, runs in figures.items():
        rate = sum(r for r, _ in runs) / len(runs)
        cpu = sum(c for _, c in runs) / len(runs)
        each = ", ".join(f"{r:.1f}/{c:.2f}" for r, c in runs)
        print(f"{name:14} {rate:8.1f} {cpu:19.2f}  ({each})")
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
