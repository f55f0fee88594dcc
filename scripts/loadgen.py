#!/usr/bin/env python3
"""Load generator for `ocrbatch serve` (async httpx): N clients send one-page images back to back for T
seconds; optionally one more client streams a long PDF in the bulk lane at the same time. Prints requests/s,
p50/p95/p99 latency, the mean engine batch size (from /metrics) and the errors.

    python scripts/loadgen.py --url http://127.0.0.1:8000 --clients 16 --duration 20
    python scripts/loadgen.py --spawn "--engine fake-timed --max-batch 8" --clients 16 --duration 20
    python scripts/loadgen.py --spawn "--engine fake-timed" --clients 4 --bulk-pages 200 --duration 20

--spawn starts `python -m ocrbatch serve --port 0 ARGS` itself (on 127.0.0.1), waits until it is ready, and
stops it with SIGTERM at the end. Needs httpx and Pillow.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import random
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)  # seconds, interactive requests answered 200
    errors: Counter = field(default_factory=Counter)
    batch_s: list[float] = field(default_factory=list)  # engine time of the batches pages ran in
    bulk_pages: int = 0
    bulk_docs: int = 0


def page_image(text: str, size=(400, 300)) -> "object":
    from PIL import Image, ImageDraw, ImageFont

    im = Image.new("RGB", size, "white")
    d = ImageDraw.Draw(im)
    font = ImageFont.load_default(size=18)
    for i, line in enumerate(text.splitlines()):
        d.text((20, 20 + 28 * i), line, font=font, fill="black")
    return im


def png_bytes(text: str) -> bytes:
    buf = io.BytesIO()
    page_image(text).save(buf, "PNG")
    return buf.getvalue()


def pdf_bytes(pages: int) -> bytes:
    ims = [page_image(f"Bulk document\npage {i} of {pages}\nThe quick brown fox.", size=(300, 420))
           for i in range(1, pages + 1)]
    buf = io.BytesIO()
    ims[0].save(buf, "PDF", save_all=True, append_images=ims[1:], resolution=100)
    return buf.getvalue()


def batch_time(page: dict) -> float:
    """Engine time of the batch the page ran in (its timings give its share and the batch's size)."""
    t = page["timings"]
    return t.get("infer_s", 0.0) * t.get("batch_size", 1.0)


async def interactive(http: httpx.AsyncClient, body: bytes, stop: float, tally: Tally,
                      think_s: float, rng: random.Random) -> None:
    while time.monotonic() < stop:
        if think_s:
            await asyncio.sleep(rng.uniform(0, think_s))
        t0 = time.perf_counter()
        try:
            r = await http.post("/v1/convert", content=body, params={"priority": "interactive"})
        except httpx.HTTPError as exc:
            tally.errors[type(exc).__name__] += 1
            continue
        if r.status_code != 200:
            tally.errors[str(r.status_code)] += 1
            continue
        tally.latencies.append(time.perf_counter() - t0)
        for page in r.json()["pages"]:
            if page["status"] != "ok":
                tally.errors["page " + page["status"]] += 1
            tally.batch_s.append(batch_time(page))


async def bulk(http: httpx.AsyncClient, body: bytes, stop: float, tally: Tally) -> None:
    """Streams the PDF (NDJSON) again and again; leaving at the stop time cancels the rest of it."""
    while time.monotonic() < stop:
        try:
            async with http.stream("POST", "/v1/convert", content=body, params={"priority": "bulk"},
                                   headers={"Accept": "application/x-ndjson"}) as r:
                if r.status_code != 200:
                    tally.errors["bulk " + str(r.status_code)] += 1
                    await asyncio.sleep(0.5)
                    continue
                async for line in r.aiter_lines():
                    if not line:
                        continue
                    item = json.loads(line)
                    if "page" in item:
                        tally.bulk_pages += 1
                        tally.batch_s.append(batch_time(item))
                    elif item.get("done"):
                        tally.bulk_docs += 1
                    if time.monotonic() >= stop:
                        return
        except httpx.HTTPError as exc:
            tally.errors["bulk " + type(exc).__name__] += 1


async def engine_counts(http: httpx.AsyncClient) -> tuple[float, float]:
    text = (await http.get("/metrics")).text
    get = lambda name: float(re.search(rf"^{name} (\S+)$", text, re.M).group(1))  # noqa: E731
    return get("ocrbatch_engine_batches_total"), get("ocrbatch_engine_pages_total")


async def run(url: str, clients: int, duration: float, bulk_pages: int, token: str | None,
              think_s: float = 0.0) -> dict:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    limits = httpx.Limits(max_connections=clients + 2, max_keepalive_connections=clients + 2)
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=300, limits=limits) as http:
        about = (await http.get("/readyz")).json()
        bodies = [png_bytes(f"Client {k}\nAn invoice, total 42.00\nThank you.") for k in range(clients)]
        pdf = pdf_bytes(bulk_pages) if bulk_pages else b""
        await http.post("/v1/convert", content=bodies[0])  # warm
        b0, p0 = await engine_counts(http)
        tally = Tally()
        start = time.monotonic()
        stop = start + duration
        tasks = [interactive(http, bodies[k], stop, tally, think_s, random.Random(k)) for k in range(clients)]
        if bulk_pages:
            tasks.append(bulk(http, pdf, stop, tally))
        await asyncio.gather(*tasks)
        wall = time.monotonic() - start
        b1, p1 = await engine_counts(http)
    lat = sorted(tally.latencies)
    q = statistics.quantiles(lat, n=100, method="inclusive") if len(lat) >= 2 else [lat[0] if lat else 0.0] * 99
    longest = max(tally.batch_s, default=0.0)
    mean_batch_s = statistics.fmean(tally.batch_s) if tally.batch_s else 0.0
    return {"url": url, "engine": about.get("engine"), "clients": clients, "duration_s": round(wall, 2),
            "bulk_pages_per_doc": bulk_pages, "think_ms": round(think_s * 1000), "requests": len(lat), "requests_per_s": round(len(lat) / wall, 2),
            "p50_ms": round(q[49] * 1000, 1), "p95_ms": round(q[94] * 1000, 1), "p99_ms": round(q[98] * 1000, 1),
            "mean_batch": round((p1 - p0) / (b1 - b0), 2) if b1 > b0 else 0.0,
            "batch_ms_mean": round(mean_batch_s * 1000, 1), "batch_ms_longest": round(longest * 1000, 1),
            "p95_in_batches": [round(q[94] / mean_batch_s, 2), round(q[94] / longest, 2)] if longest else None,
            "bulk_pages": tally.bulk_pages, "bulk_pages_per_s": round(tally.bulk_pages / wall, 2),
            "errors": dict(tally.errors), "load_average": [round(x, 2) for x in os.getloadavg()]}


def report(r: dict) -> str:
    think = f", pausing 0-{r['think_ms']} ms between requests" if r["think_ms"] else ", back to back"
    lines = [f"{r['clients']} clients x {r['duration_s']} s{think} against {r['url']} (engine {r['engine']})",
             f"requests/s   {r['requests_per_s']}  ({r['requests']} answered 200)",
             f"latency      p50 {r['p50_ms']} ms   p95 {r['p95_ms']} ms   p99 {r['p99_ms']} ms",
             f"mean batch   {r['mean_batch']} pages",
             f"errors       {sum(r['errors'].values())} {r['errors'] or ''}".rstrip()]
    if r["bulk_pages_per_doc"]:
        lines.append(f"bulk         a {r['bulk_pages_per_doc']}-page PDF streamed: {r['bulk_pages']} pages "
                     f"({r['bulk_pages_per_s']}/s)")
    if r["p95_in_batches"]:
        lines.append(f"batch time   mean {r['batch_ms_mean']} ms, longest {r['batch_ms_longest']} ms (engine, per "
                     f"page answered); p95 = {r['p95_in_batches'][0]} x mean, {r['p95_in_batches'][1]} x longest")
    lines.append(f"load average {' '.join(map(str, r['load_average']))} on {os.cpu_count()} CPUs")
    return "\n".join(lines)


class Spawned:
    """`python -m ocrbatch serve --port 0 ARGS` for the length of the run."""

    def __init__(self, args: str, preexec_fn=None) -> None:
        self.log = tempfile.NamedTemporaryFile("w+", prefix="ocrbatch-serve-", suffix=".log", delete=False)
        self.proc = subprocess.Popen([sys.executable, "-m", "ocrbatch", "serve", "--host", "127.0.0.1", "--port",
                                      "0", *shlex.split(args)], stdout=subprocess.DEVNULL, stderr=self.log,
                                     preexec_fn=preexec_fn)
        deadline = time.monotonic() + 300
        while True:
            text = Path(self.log.name).read_text()
            m = re.search(r"serving on (http://\S+)", text)
            if m:
                self.url = m.group(1)
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                sys.exit(f"loadgen: the server did not start:\n{text}")
            time.sleep(0.1)
        while httpx.get(self.url + "/readyz").status_code != 200:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                sys.exit(f"loadgen: the server did not get ready:\n{Path(self.log.name).read_text()}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        os.unlink(self.log.name)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8000", help="a running server")
    ap.add_argument("--spawn", metavar="ARGS", help="start `ocrbatch serve ARGS` for the run instead of --url")
    ap.add_argument("--clients", "-c", type=int, default=16, help="concurrent clients sending one-page images")
    ap.add_argument("--duration", "-t", type=float, default=20.0, help="seconds")
    ap.add_argument("--bulk-pages", type=int, default=0,
                    help="also stream a PDF of this many pages in the bulk lane, again and again")
    ap.add_argument("--think-ms", type=float, default=0.0,
                    help="each client pauses a random 0..N ms before each request, as people do (default 0: back "
                         "to back, the worst case for latency: every request then arrives just as a batch starts)")
    ap.add_argument("--token", default=os.environ.get("OCRBATCH_TOKEN"))
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = ap.parse_args()
    server = Spawned(args.spawn) if args.spawn else None
    try:
        result = asyncio.run(run(server.url if server else args.url, args.clients, args.duration,
                                 args.bulk_pages, args.token, args.think_ms / 1000))
    finally:
        if server:
            server.stop()
    if args.spawn:
        result["server_args"] = args.spawn
    print(json.dumps(result) if args.json else report(result))
    return 0 if not result["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
