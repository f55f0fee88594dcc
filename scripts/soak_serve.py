#!/usr/bin/env python3
"""`make soak-serve`: a server that runs for months, in ten minutes (issue 27). It starts `ocrbatch serve` on
127.0.0.1 (the fake engine, small limits) and runs randomized loopback clients against it for DURATION:

    normal       a one-page image, answered whole (JSON, or Markdown)
    streaming    a PDF of several pages as NDJSON, read to its last line
    disconnect   a PDF, the client leaving at a random moment: mid-headers, mid-body, waiting in the queue, or
                 mid-stream (after a line)
    trickle      a body sent a byte at a time, slower than the server's minimum rate (cut: 408)
    oversized    a body over --max-upload-mb, declared or not (413)
    malformed    a broken request line, a multipart without its file, an unknown ?format=, an Accept nothing
                 satisfies, a file that is not a document (400/406/422)
    crowd        more idle connections than --max-connections, then /healthz (must answer) and a conversion
                 (503), all closed again
    health       GET /healthz, /readyz, /metrics

and, besides those, one client that streams a 1,000-page request over and over (`long`: a 1,000-frame TIFF as
NDJSON in the bulk lane; every other one leaves after a random number of lines), timing its first line and its
longest silence (issue 39: page 1, then nothing until the last page was submitted).

At the end, once every client has ended, it checks the invariant: /metrics shows ocrbatch_queue_used 0,
ocrbatch_pages_in_flight 0, ocrbatch_queue_waiting 0 and no request in progress; and the server's resident
memory and open file descriptors are flat: end against a start taken after WARMUP_S, and by thirds of the
soak (sampled every SAMPLE_S; the last third's median RSS at most RSS_THIRDS_MB over the first's). It prints
the requests by kind (and the answers' status codes), the invariant, RSS and descriptors at start and end and
by thirds; exit 1 if any check fails.

    python scripts/soak_serve.py                    ten minutes (DURATION_S)
    python scripts/soak_serve.py --duration-s 60    a shorter one
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import random
import re
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

DURATION_S = 600.0  # `make soak-serve`: ten minutes
WARMUP_S = 20.0  # the start figures (RSS, descriptors) are taken after this, once caches and pools are made
CLIENTS = 10  # concurrent client loops
MAX_CONNECTIONS = 24
# --max-queue: the long request's window (twice --max-batch: 8 pages) and 8 for the other clients
SERVER_ARGS = ("--engine fake --max-batch 4 --max-wait-ms 20 --max-queue 16 --max-upload-mb 1 "
               f"--max-connections {MAX_CONNECTIONS} --header-timeout-s 2 --body-timeout-s 2 --drain-s 5")
IO_TIMEOUT_S = 60.0  # any one client's read; past it the client gives up (counted as "stuck")
END_WAIT_S = 60.0  # after the clients end, how long the server may take to wind every request down
RSS_SLACK = 1.25  # end RSS at most this times the start's, plus RSS_SLACK_MB
RSS_SLACK_MB = 24
FD_SLACK = 8  # end descriptors at most this many over the start's
KINDS = ("normal", "streaming", "disconnect", "trickle", "oversized", "malformed", "crowd", "health")
WEIGHTS = (24, 14, 22, 4, 8, 12, 2, 14)
LONG_PAGES = 1000  # the long client's request: a TIFF of this many frames, streamed
SAMPLE_S = 1.0  # the server's RSS and descriptors are sampled this often, for the figures by thirds
RSS_THIRDS_MB = 32  # the last third's median RSS at most this over the first third's (issue 39: 191 -> 243 MB)


def _proc_figures(pid: int) -> tuple[int, int]:
    """(resident bytes, open descriptors) of the process."""
    rss = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) * 1024
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def _pdf(pages: int) -> bytes:
    from PIL import Image, ImageDraw

    ims = []
    for i in range(pages):
        im = Image.new("RGB", (240, 320), "white")
        ImageDraw.Draw(im).text((20, 20), f"soak page {i + 1}", fill="black")
        ims.append(im)
    buf = io.BytesIO()
    ims[0].save(buf, "PDF", save_all=True, append_images=ims[1:], resolution=72)
    return buf.getvalue()


def _tiff(frames: int) -> bytes:
    """A multi-frame TIFF of small numbered frames (deflated: ~120 bytes a frame)."""
    from PIL import Image, ImageDraw

    ims = []
    for i in range(frames):
        im = Image.new("L", (160, 60), 255)
        ImageDraw.Draw(im).text((10, 20), f"frame {i + 1}", fill=0)
        ims.append(im)
    buf = io.BytesIO()
    ims[0].save(buf, "TIFF", compression="tiff_adobe_deflate", save_all=True, append_images=ims[1:])
    return buf.getvalue()


def _png() -> bytes:
    from PIL import Image, ImageDraw

    im = Image.new("RGB", (240, 160), "white")
    ImageDraw.Draw(im).text((20, 20), "soak image", fill="black")
    buf = io.BytesIO()
    im.save(buf, "PNG")
    return buf.getvalue()


class Soak:
    def __init__(self, host: str, port: int, rng: random.Random) -> None:
        self.host, self.port, self.rng = host, port, rng
        self.kinds: Counter = Counter()
        self.statuses: Counter = Counter()
        self.pdf, self.png = _pdf(4), _png()
        self.tiff = _tiff(LONG_PAGES)
        self.long_first: list[float] = []  # seconds to a long request's first page line
        self.long_silence = 0.0  # the longest wait between two reads of a long stream

    async def _open(self):
        return await asyncio.open_connection(self.host, self.port)

    def _head(self, length: int | None, accept: str = "application/json", path: str = "/v1/convert",
              ctype: str = "application/octet-stream") -> bytes:
        size = f"Content-Length: {length}\r\n" if length is not None else "Transfer-Encoding: chunked\r\n"
        return (f"POST {path} HTTP/1.1\r\nHost: soak\r\nAccept: {accept}\r\nContent-Type: {ctype}\r\n{size}"
                "Connection: close\r\n\r\n").encode()

    async def _answer(self, reader) -> str:
        """The whole answer (the server closes: Connection: close); its status code, or 'cut'."""
        data = await asyncio.wait_for(reader.read(), IO_TIMEOUT_S)
        m = re.match(rb"HTTP/1\.1 (\d{3})", data)
        return m.group(1).decode() if m else "cut"

    async def _exchange(self, data: bytes, kind: str) -> None:
        reader, writer = await self._open()
        try:
            writer.write(data)
            await writer.drain()
            self.statuses[f"{kind} {await self._answer(reader)}"] += 1
        finally:
            writer.close()

    async def normal(self) -> None:
        accept = self.rng.choice(("application/json", "text/markdown", "*/*"))
        await self._exchange(self._head(len(self.png), accept) + self.png, "normal")

    async def streaming(self) -> None:
        await self._exchange(self._head(len(self.pdf), "application/x-ndjson") + self.pdf, "streaming")

    async def disconnect(self) -> None:
        body = self.pdf
        head = self._head(len(body), self.rng.choice(("application/json", "application/x-ndjson")))
        moment = self.rng.choice(("headers", "body", "queue", "stream"))
        reader, writer = await self._open()
        try:
            if moment == "headers":
                writer.write(head[:self.rng.randrange(1, len(head))])
            elif moment == "body":
                writer.write(head + body[:self.rng.randrange(0, len(body))])
            else:
                writer.write(head + body)
            await writer.drain()
            if moment == "stream":
                await asyncio.wait_for(reader.read(self.rng.randrange(1, 400)), IO_TIMEOUT_S)
            else:
                await asyncio.sleep(self.rng.uniform(0, 0.3))
            self.statuses[f"disconnect at {moment}"] += 1
        except (asyncio.TimeoutError, OSError):
            self.statuses[f"disconnect at {moment} (cut first)"] += 1
        finally:
            writer.transport.abort()  # gone, as a killed client is

    async def trickle(self) -> None:
        body = self.pdf
        reader, writer = await self._open()
        try:
            writer.write(self._head(len(body)))
            for i in range(len(body)):
                if reader.at_eof() or writer.is_closing():
                    break
                writer.write(body[i:i + 1])
                await writer.drain()
                await asyncio.sleep(0.5)
                if i > 200:  # the server should have cut it long before: give up and say so
                    break
            self.statuses[f"trickle {await self._answer(reader)}"] += 1
        except OSError:  # the server answered and closed while a byte was on its way: read what it said
            try:
                self.statuses[f"trickle {await self._answer(reader)}"] += 1
            except OSError:
                self.statuses["trickle cut"] += 1
        finally:
            writer.close()

    async def oversized(self) -> None:
        big = 1024 * 1024 + 1
        if self.rng.random() < 0.5:
            await self._exchange(self._head(big) + b"\0" * 1000, "oversized declared")
            return
        reader, writer = await self._open()  # chunked: only the bytes read tell
        try:
            writer.write(self._head(None))
            sent = 0
            while sent < big + 65536 and not writer.is_closing():
                chunk = b"\0" * 65536
                writer.write(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
                await writer.drain()
                sent += len(chunk)
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            self.statuses[f"oversized chunked {await self._answer(reader)}"] += 1
        except OSError:
            self.statuses["oversized chunked cut"] += 1
        finally:
            writer.close()

    async def malformed(self) -> None:
        case = self.rng.choice(("garbage", "multipart", "format", "accept", "not a document"))
        if case == "garbage":
            data = b"\x16\x03\x01 not http at all\r\n\r\n"
        elif case == "multipart":
            body = b"--b\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nx\r\n--b--\r\n"
            data = self._head(len(body), ctype="multipart/form-data; boundary=b") + body
        elif case == "format":
            data = self._head(len(self.png), path="/v1/convert?format=xml") + self.png
        elif case == "accept":
            data = self._head(len(self.png), accept="text/markdown;q=0") + self.png
        else:
            data = self._head(5000) + os.urandom(5000)
        try:
            await self._exchange(data, f"malformed {case}")
        except OSError:
            self.statuses[f"malformed {case} cut"] += 1

    async def crowd(self) -> None:
        idle = []
        try:
            for _ in range(MAX_CONNECTIONS + 4):
                idle.append(await self._open())
            r, w = await self._open()
            w.write(b"GET /healthz HTTP/1.1\r\nHost: soak\r\nConnection: close\r\n\r\n")
            await w.drain()
            self.statuses[f"crowd healthz {await self._answer(r)}"] += 1
            w.close()
            await self._exchange(self._head(len(self.png)) + self.png, "crowd convert")
        except OSError:
            self.statuses["crowd cut"] += 1
        finally:
            for _, w in idle:
                w.transport.abort()

    async def health(self) -> None:
        path = self.rng.choice(("/healthz", "/readyz", "/metrics"))
        reader, writer = await self._open()
        try:
            writer.write(f"GET {path} HTTP/1.1\r\nHost: soak\r\nConnection: close\r\n\r\n".encode())
            await writer.drain()
            self.statuses[f"health {await self._answer(reader)}"] += 1
        finally:
            writer.close()

    async def long(self, until: float) -> None:
        """The 1,000-page request, streamed; every other one leaves after a random number of page lines, and one
        still running when the soak's time is up leaves then."""
        leave = self.rng.randrange(1, LONG_PAGES) if self.kinds["long"] % 2 == 0 else None
        path = "/v1/convert?priority=bulk"
        reader, writer = await self._open()
        try:
            writer.write(self._head(len(self.tiff), "application/x-ndjson", path=path) + self.tiff)
            await writer.drain()
            started = last = time.monotonic()
            data, pages, tail = b"", 0, b""
            while True:
                chunk = await asyncio.wait_for(reader.read(65536), IO_TIMEOUT_S)
                now = time.monotonic()
                self.long_silence = max(self.long_silence, now - last)
                last = now
                if not chunk:
                    break
                if not data:
                    data = chunk[:20]  # the status line
                seen = (tail + chunk).count(b'{"page": ')
                if seen and not pages:
                    self.long_first.append(now - started)
                pages += seen
                tail = chunk[-8:]  # a token cut by the read (never a whole one: it is 9 bytes)
                if leave is not None and pages >= leave:
                    self.statuses["long left mid-stream"] += 1
                    return
                if now > until:
                    self.statuses["long left at the soak's end"] += 1
                    return
            m = re.match(rb"HTTP/1\.1 (\d{3})", data)
            code = m.group(1).decode() if m else "cut"
            whole = "whole" if pages == LONG_PAGES else f"{pages} pages"
            self.statuses[f"long {code} {whole}" if code == "200" else f"long {code}"] += 1
        finally:
            writer.transport.abort()

    async def long_client(self, until: float) -> None:
        while time.monotonic() < until:
            self.kinds["long"] += 1
            try:
                await self.long(until)
            except asyncio.TimeoutError:
                self.statuses["long stuck"] += 1
            except OSError as exc:
                self.statuses[f"long {type(exc).__name__}"] += 1
            if self.statuses["long 503"]:
                await asyncio.sleep(0.2)  # the slots were taken: try again shortly

    async def client(self, until: float) -> None:
        while time.monotonic() < until:
            kind = self.rng.choices(KINDS, WEIGHTS)[0]
            self.kinds[kind] += 1
            try:
                await getattr(self, kind)()
            except asyncio.TimeoutError:
                self.statuses[f"{kind} stuck"] += 1
            except OSError as exc:
                self.statuses[f"{kind} {type(exc).__name__}"] += 1


def _thirds(samples: list[tuple[float, int, int]], elapsed: float) -> list[dict[str, int]]:
    """RSS (median, max) and descriptors (max) in each third of the soak's time."""
    out = []
    for k in range(3):
        part = [(rss, fds) for t, rss, fds in samples if k * elapsed / 3 <= t < (k + 1) * elapsed / 3]
        if part:
            out.append({"rss_median": int(statistics.median(r for r, _ in part)), "rss_max": max(r for r, _ in part),
                        "fds_max": max(f for _, f in part)})
    return out


def _metrics(url: str) -> dict[str, float]:
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(url + "/metrics", timeout=30).text
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples if not s.labels}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration-s", type=float, default=DURATION_S, help=f"how long (default {DURATION_S:g})")
    ap.add_argument("--clients", type=int, default=CLIENTS)
    ap.add_argument("--seed", type=int, default=27)
    ap.add_argument("--server-args", default=SERVER_ARGS, help="`ocrbatch serve` arguments (another engine: "
                    "keep the limits, change --engine)")
    args = ap.parse_args()
    from loadgen import Spawned

    server = Spawned(args.server_args)
    pid = server.proc.pid
    host, port = re.match(r"http://([\d.]+):(\d+)", server.url).groups()
    soak = Soak(host, int(port), random.Random(args.seed))
    failures: list[str] = []
    try:
        started = time.monotonic()
        until = started + args.duration_s
        warmup = min(WARMUP_S, args.duration_s / 4)

        samples: list[tuple[float, int, int]] = []  # (seconds in, RSS, descriptors)

        async def sample() -> None:
            while time.monotonic() < until:
                samples.append((time.monotonic() - started, *_proc_figures(pid)))
                await asyncio.sleep(SAMPLE_S)

        async def run() -> tuple[int, int]:
            clients = [asyncio.ensure_future(soak.client(until)) for _ in range(args.clients)]
            clients.append(asyncio.ensure_future(soak.long_client(until)))
            sampler = asyncio.ensure_future(sample())
            await asyncio.sleep(warmup)
            figures = _proc_figures(pid)
            await asyncio.gather(*clients)
            await sampler
            return figures

        rss0, fds0 = asyncio.run(run())
        elapsed = time.monotonic() - started
        end = time.monotonic() + END_WAIT_S
        m = _metrics(server.url)
        while (m.get("ocrbatch_http_requests_in_progress", 1) or m.get("ocrbatch_queue_used", 1)
               or m.get("ocrbatch_pages_in_flight", 1)) and time.monotonic() < end:
            time.sleep(0.5)
            m = _metrics(server.url)
        rss1, fds1 = _proc_figures(pid)
        alive = server.proc.poll() is None
        print(f"soak-serve: {elapsed:.0f} s, {args.clients} clients, {sum(soak.kinds.values())} requests")
        print("requests by kind: " + ", ".join(f"{k} {soak.kinds[k]}" for k in (*KINDS, "long")))
        if soak.long_first:
            print(f"long streams: first page line after {statistics.median(soak.long_first):.2f} s (median), "
                  f"{max(soak.long_first):.2f} s (max); longest silence in a stream {soak.long_silence:.2f} s")
        print("answers:")
        for key, n in sorted(soak.statuses.items()):
            print(f"  {key}: {n}")
        invariant = {k: m.get(f"ocrbatch_{k}", -1) for k in ("queue_used", "pages_in_flight", "queue_waiting",
                                                                "http_requests_in_progress")}
        print("invariant at the end: " + ", ".join(f"{k} {v:g}" for k, v in invariant.items()))
        print(f"server RSS: start {rss0 / 2**20:.1f} MB, end {rss1 / 2**20:.1f} MB; open descriptors: start {fds0}, "
              f"end {fds1}")
        thirds = _thirds(samples, elapsed)
        print("by thirds of the soak: RSS median/max MB " +
              ", ".join(f"{t['rss_median'] / 2**20:.0f}/{t['rss_max'] / 2**20:.0f}" for t in thirds) +
              "; descriptors max " + ", ".join(str(t["fds_max"]) for t in thirds))
        if len(thirds) == 3 and thirds[2]["rss_median"] > thirds[0]["rss_median"] + RSS_THIRDS_MB * 2**20:
            failures.append(f"resident memory rose by thirds (last third's median over the first's by more than "
                            f"{RSS_THIRDS_MB} MB)")
        if not alive:
            failures.append(f"the server exited ({server.proc.returncode})")
        if any(invariant.values()):
            failures.append("slots, pages or requests still held after every client ended")
        if rss1 > rss0 * RSS_SLACK + RSS_SLACK_MB * 2**20:
            failures.append("resident memory grew")
        if fds1 > fds0 + FD_SLACK:
            failures.append("open descriptors grew")
        stuck = sum(n for k, n in soak.statuses.items() if k.endswith("stuck") or " 500" in k)
        if stuck:
            failures.append(f"{stuck} request(s) stuck or answered 500")
    finally:
        log = Path(server.log.name).read_text() if Path(server.log.name).exists() else ""
        server.stop()
    if "Traceback" in log:
        failures.append("a traceback in the server's log")
    print("soak-serve: " + ("OK" if not failures else "FAILED: " + "; ".join(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
