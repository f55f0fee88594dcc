#!/usr/bin/env python3
"""Priority lanes on a timed fake engine: what an interactive page waits for while a bulk job runs.

One Converter, an engine that takes a fixed time per batch plus a time per page (like a GPU model), a bulk
job of --bulk pages submitted at once (priority "bulk"), and --interactive pages submitted one at a time,
at random gaps spread over the bulk job, from another thread. Prints:

- interactive latency (submit → result) p50 / p95 / max, in seconds and in batch times (one full batch);
- bulk throughput (bulk pages/s, until the last bulk page) alone and with the interactive pages mixed
  in, and the drop; and the same with the interactive pages sent as bulk (first come, first served);
- how often the engine was loaded (once, across every run on the Converter).

    PYTHONPATH=. python scripts/priority_bench.py [--bulk 500] [--interactive 50] [--batch-ms 80] [--page-ms 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ocrbatch import Converter  # noqa: E402
from ocrbatch.engines import registry  # noqa: E402
from ocrbatch.engines.base import Engine  # noqa: E402
from ocrbatch.records import PageOutput  # noqa: E402


class TimedEngine(Engine):
    name = "timed-fake"
    batch_s = 0.08
    page_s = 0.005
    loads = 0

    def load(self, device: str) -> None:
        type(self).loads += 1

    def infer(self, pages):
        time.sleep(self.batch_s + self.page_s * len(pages))
        return [PageOutput(markdown=p.ref.label) for p in pages]


def page_image(i: int):
    from PIL import Image

    return Image.new("RGB", (64, 90), (i % 256, 255, 255))


def scenario(conv: Converter, bulk: int, interactive: int, lane: str | None, max_batch: int) -> dict:
    """The bulk job, and (unless `lane` is None) `interactive` pages in `lane` spread over it."""
    images = [page_image(i) for i in range(bulk)]
    expected_s = bulk / max_batch * (TimedEngine.batch_s + TimedEngine.page_s * max_batch)
    latencies: list[float] = []
    t0 = time.perf_counter()
    futures = [conv.submit(im, priority="bulk", name=f"bulk-{i}") for i, im in enumerate(images)]

    def client() -> None:  # submits at random gaps (seeded; phases against the batches spread evenly)
        gap = expected_s * 0.8 / interactive
        rng = random.Random(12)
        for i in range(interactive):
            time.sleep(gap * rng.uniform(0.5, 1.5))
            sent = time.perf_counter()
            done = conv.submit(page_image(i), priority=lane, name=f"user-{i}")
            done.add_done_callback(lambda f, sent=sent: latencies.append(time.perf_counter() - sent))
            pending.append(done)

    pending: list = []
    thread = threading.Thread(target=client) if lane is not None else None
    if thread is not None:
        thread.start()
    for f in futures:
        f.result()
    bulk_s = time.perf_counter() - t0
    if thread is not None:
        thread.join()
        for f in pending:
            f.result()
    return {"bulk_pages_per_s": bulk / bulk_s, "latencies": latencies}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bulk", type=int, default=500)
    ap.add_argument("--interactive", type=int, default=50)
    ap.add_argument("--batch-ms", type=float, default=80.0, help="fixed cost of a batch")
    ap.add_argument("--page-ms", type=float, default=5.0, help="cost of each page in a batch")
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--max-wait-ms", type=int, default=200)
    args = ap.parse_args()
    TimedEngine.batch_s, TimedEngine.page_s = args.batch_ms / 1000, args.page_ms / 1000
    registry.register(TimedEngine.name, TimedEngine)
    batch_time = TimedEngine.batch_s + TimedEngine.page_s * args.max_batch
    print(f"timed fake engine: {args.batch_ms:.0f} ms per batch + {args.page_ms:.0f} ms per page; "
          f"max batch {args.max_batch} (a full batch, one 'batch time': {batch_time * 1000:.0f} ms), "
          f"max wait {args.max_wait_ms} ms; {args.bulk} bulk pages, {args.interactive} interactive submits "
          f"spread over the job")
    with Converter(engine=TimedEngine.name, devices="cpu", max_batch=args.max_batch,
                   max_wait_ms=args.max_wait_ms) as conv:
        alone = scenario(conv, args.bulk, args.interactive, None, args.max_batch)
        mixed = scenario(conv, args.bulk, args.interactive, "interactive", args.max_batch)
        fifo = scenario(conv, args.bulk, args.interactive, "bulk", args.max_batch)
        stats = conv.stats()
    for label, result in (("interactive", mixed), ("as bulk (FIFO)", fifo)):
        lat = result["latencies"]
        p50, p95, worst = statistics.median(lat), pct(lat, 0.95), max(lat)
        print(f"{label:>15} latency: p50 {p50:.3f} s ({p50 / batch_time:.2f} batches), "
              f"p95 {p95:.3f} s ({p95 / batch_time:.2f} batches), "
              f"max {worst:.3f} s ({worst / batch_time:.2f} batches)")
    for label, result in (("bulk alone", alone), ("bulk + interactive", mixed), ("bulk + FIFO", fifo)):
        drop = 100 * (1 - result["bulk_pages_per_s"] / alone["bulk_pages_per_s"])
        print(f"{label:>19}: {result['bulk_pages_per_s']:.1f} bulk pages/s (drop {drop:+.1f}%)")
    print(f"engine loads: {TimedEngine.loads} for 3 jobs; {stats['batches']} batches, "
          f"{stats['pages']} pages, mean batch {stats['mean_batch']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
