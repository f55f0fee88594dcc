#!/usr/bin/env python3
"""Measures what `ocrbatch serve` promises under hostile or careless clients, against servers it starts
itself (`python -m ocrbatch serve --port 0 ...`, the fake engines: no model needed). Prints the figures.

    idle    N connections that send part of a request, then nothing, held open; meanwhile /healthz is asked
            again and again, each time on a new connection: its latency (p50, max); then how long until the
            server has cut them all, and what /metrics counted. `--partial headers` (default) sends half a
            header block; `--partial body` whole headers and the first KB of a 1 MB body.
    burst   N simultaneous one-page requests against --max-queue Q (engine fake-timed: 100 ms a batch plus
            10 ms a page): how many were answered 200 and 503, how fast the 503s came, and the most page
            slots held at once (/metrics sampled every 10 ms).
    rss     N concurrent uploads of M MB of junk (raw bodies, then multipart ones): the server's peak resident
            memory (VmHWM), against its peak once started.

    python scripts/serve_probe.py                       # all three with the goals' sizes
    python scripts/serve_probe.py idle --connections 1000 --partial body
    python scripts/serve_probe.py burst --requests 200 --max-queue 8

The servers start with a soft open-file limit of 1,024 (a common default; --nofile), as a user's would.
Extra server options: --server-args "...". Needs httpx.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import shlex
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loadgen import Spawned, png_bytes  # noqa: E402


def _raise_own_nofile() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _metric(text: str, name: str, **labels: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and s.labels == labels:
                return s.value
    return 0.0


def _ms(xs: list[float]) -> dict:
    xs = sorted(xs)
    if not xs:
        return {"n": 0}
    return {"n": len(xs), "p50_ms": round(statistics.median(xs) * 1000, 1),
            "p95_ms": round(xs[int(0.95 * (len(xs) - 1))] * 1000, 1), "max_ms": round(xs[-1] * 1000, 1)}


def spawn(args: str, nofile: int) -> Spawned:
    def lower() -> None:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(nofile, hard), hard))

    return Spawned(args, preexec_fn=lower)


async def healthz(host: str, port: int, timeout_s: float = 10.0) -> bool:
    """GET /healthz on a new connection (raw, so that the figure is the server's, not a client library's)."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = await asyncio.wait_for(reader.read(), timeout_s)
        writer.close()
        return answer.startswith(b"HTTP/1.1 200 ")
    except (OSError, asyncio.TimeoutError):
        return False


async def idle(url: str, connections: int, partial: str, probes: int, token: str | None,
               wait_s: float = 120.0) -> dict:
    host, port = url.removeprefix("http://").split(":")
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    if partial == "headers":
        data = f"POST /v1/convert HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/pdf\r\nContent-Le".encode()
    else:
        data = (f"POST /v1/convert HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/pdf\r\n"
                f"Content-Length: 1048576\r\n\r\n%PDF-1.4\n").encode() + b"\0" * 1024
    writers = []
    t0 = time.monotonic()
    for _ in range(connections):
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(data)
        await writer.drain()
        writers.append((reader, writer))
    opened_s = time.monotonic() - t0
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        deadline = time.monotonic() + 30  # (a server without the gauge: go on after it)
        held, last = -1.0, -2.0
        while time.monotonic() < deadline and held < connections and held != last:  # all in, or no more
            await asyncio.sleep(0.2)
            last = held
            try:
                held = _metric((await http.get("/metrics")).text, "ocrbatch_http_connections")
            except httpx.HTTPError:
                held = -1  # the server does not answer /metrics now
    latencies, failures = [], 0
    for _ in range(probes):  # each on a new connection, as a load balancer's health check does
        t = time.perf_counter()
        ok = await healthz(host, int(port))
        latencies.append(time.perf_counter() - t)
        failures += not ok
        await asyncio.sleep(0.05)
    cut_started = time.monotonic()

    async def closed(reader) -> str:
        try:
            got = await asyncio.wait_for(reader.read(), wait_s)
        except (asyncio.TimeoutError, ConnectionError):
            return "still open"
        return got.split(b" ", 2)[1].decode() if got.startswith(b"HTTP/") else "closed"

    endings = await asyncio.gather(*(closed(r) for r, _ in writers))
    all_cut_s = time.monotonic() - cut_started
    for _, w in writers:
        w.close()
    text = ""
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        with contextlib.suppress(httpx.HTTPError):
            text = (await http.get("/metrics")).text
    after = await healthz(host, int(port))
    counts: dict[str, int] = {}
    for e in endings:
        counts[e] = counts.get(e, 0) + 1
    return {"connections": connections, "partial": partial, "opened_s": round(opened_s, 2),
            "held_by_server": int(held), "healthz": {**_ms(latencies), "failed": failures},
            "ended_by_server_after_s": round(all_cut_s, 1), "endings": counts,
            "cut_counted": {r: int(_metric(text, "ocrbatch_http_cut_total", reason=r))
                            for r in ("header_timeout", "body_timeout", "connection_limit")},
            "healthz_after": "200" if after else "no answer"}


async def burst(url: str, requests: int, token: str | None) -> dict:
    """Every connection is open before the burst, and every request is written in one go (raw sockets: an
    HTTP client's own overhead would spread the burst out on a small machine)."""
    host, port = url.removeprefix("http://").split(":")
    body = png_bytes("Burst\nOne page each.")
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    request = (f"POST /v1/convert HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: image/png\r\n"
               f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body
    peak = {"used": 0.0, "in_progress": 0.0, "waiting": 0.0}
    stop = asyncio.Event()

    async def sample(http: httpx.AsyncClient) -> None:
        while not stop.is_set():
            text = (await http.get("/metrics")).text
            peak["used"] = max(peak["used"], _metric(text, "ocrbatch_queue_used"))
            peak["in_progress"] = max(peak["in_progress"], _metric(text, "ocrbatch_http_requests_in_progress"))
            peak["waiting"] = max(peak["waiting"], _metric(text, "ocrbatch_queue_waiting"))
            await asyncio.sleep(0.01)

    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        capacity = _metric((await http.get("/metrics")).text, "ocrbatch_queue_capacity")
        conns = [await asyncio.open_connection(host, int(port)) for _ in range(requests)]
        sampler = asyncio.ensure_future(sample(http))
        await asyncio.sleep(0.2)
        t0 = time.perf_counter()
        for _, writer in conns:
            writer.write(request)
        sent_s = time.perf_counter() - t0

        async def answer(reader) -> tuple[str, float]:
            line = await reader.readline()
            took = time.perf_counter() - t0
            await reader.read()
            return (line.split(b" ")[1].decode() if line.startswith(b"HTTP/") else "closed"), took

        results = await asyncio.gather(*(answer(r) for r, _ in conns))
        wall = time.perf_counter() - t0
        stop.set()
        await sampler
        for _, writer in conns:
            writer.close()
    by: dict[str, list[float]] = {}
    for status, s in results:
        by.setdefault(status, []).append(s)
    return {"requests": requests, "max_queue": int(capacity), "all_written_in_ms": round(sent_s * 1000, 1),
            "wall_s": round(wall, 2), "answers": {k: len(v) for k, v in sorted(by.items())},
            "latency_503": _ms(by.get("503", [])), "latency_200": _ms(by.get("200", [])),
            "most_slots_held": int(peak["used"]), "most_requests_in_progress": int(peak["in_progress"]),
            "most_waiting": int(peak["waiting"])}


def vm(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return -1


async def rss(server: Spawned, uploads: int, mb: int, multipart: bool, token: str | None) -> dict:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    junk = os.urandom(1024) * (mb * 1024)
    pid = server.proc.pid
    started = vm(pid, "VmHWM")
    limits = httpx.Limits(max_connections=uploads + 2)
    async with httpx.AsyncClient(base_url=server.url, timeout=600, limits=limits, headers=headers) as http:
        async def one():
            if multipart:
                r = await http.post("/v1/convert", files={"file": ("junk.bin", junk)})
            else:
                r = await http.post("/v1/convert", content=junk)
            return r.status_code

        t0 = time.perf_counter()
        statuses = await asyncio.gather(*(one() for _ in range(uploads)))
        wall = time.perf_counter() - t0
    peak = vm(pid, "VmHWM")
    return {"uploads": uploads, "mb_each": mb, "multipart": multipart, "wall_s": round(wall, 1),
            "answers": {str(s): statuses.count(s) for s in sorted(set(statuses))},
            "peak_rss_mb_started": round(started / 2**20), "peak_rss_mb_after": round(peak / 2**20),
            "peak_rss_growth_mb": round((peak - started) / 2**20)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", nargs="*", help="idle, burst and/or rss (default: all three)")
    ap.add_argument("--connections", type=int, default=1000, help="idle: partial connections held open")
    ap.add_argument("--partial", choices=["headers", "body"], default="headers")
    ap.add_argument("--probes", type=int, default=20, help="idle: /healthz requests while they are held")
    ap.add_argument("--requests", type=int, default=200, help="burst: simultaneous requests")
    ap.add_argument("--max-queue", type=int, default=8, help="burst: the server's --max-queue")
    ap.add_argument("--uploads", type=int, default=30, help="rss: concurrent uploads")
    ap.add_argument("--mb", type=int, default=40, help="rss: size of each upload in MB")
    ap.add_argument("--nofile", type=int, default=1024, help="the servers' soft open-file limit at start")
    ap.add_argument("--server-args", default="", help="more options for every server started")
    ap.add_argument("--token", default=None)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if set(args.what) - {"idle", "burst", "rss"}:
        ap.error(f"choose idle, burst or rss, not {' '.join(args.what)}")
    _raise_own_nofile()
    extra = args.server_args + (f" --token {shlex.quote(args.token)}" if args.token else "")
    out: dict = {"load_average_before": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count()}
    for what in args.what or ["idle", "burst", "rss"]:
        if what == "idle":
            srv = spawn(f"--engine fake --max-queue 1024 {extra}", args.nofile)
            try:
                out["idle"] = asyncio.run(idle(srv.url, args.connections, args.partial, args.probes, args.token))
            finally:
                srv.stop()
        elif what == "burst":
            srv = spawn(f"--engine fake-timed --max-batch 8 --max-queue {args.max_queue} {extra}", args.nofile)
            try:
                out["burst"] = asyncio.run(burst(srv.url, args.requests, args.token))
            finally:
                srv.stop()
        else:
            for multipart in (False, True):
                srv = spawn(f"--engine fake --max-upload-mb {args.mb + 10} --max-queue 256 {extra}", args.nofile)
                try:
                    out.setdefault("rss", []).append(asyncio.run(rss(srv, args.uploads, args.mb, multipart,
                                                                     args.token)))
                finally:
                    srv.stop()
    out["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
