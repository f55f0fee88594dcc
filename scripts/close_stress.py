"""The Converter's close under fire (issue 27): THREADS threads submit PDFs given as bytes, PIL images and paths
while the main thread calls close() or close(wait=False) at a random moment. After close returns every future
ever returned must be resolved, and the process must exit cleanly (no PDF document left to the interpreter's
exit: pdfium would crash it).

    python scripts/close_stress.py                      200 rounds, 10 to a process (a few minutes on 2 cores)
    python scripts/close_stress.py --rounds 4 --per-process 2 --json

Prints rounds, futures, unresolved (goal 0), unclear errors (a refusal that is not ConverterClosedError, or a
failed page naming the converter's temporary file; goal 0) and crashes (a process that did not exit 0; goal 0).
Exit 1 when a goal is missed. Each process's rounds are seeded from --seed, so a failure can be replayed.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
THREADS = 8
MAX_BEFORE_CLOSE_S = 0.4  # the longest the submitters run before close() is called
JOIN_S = 30.0  # a submitter still running this long after close returned is a hang (counted unresolved)


def _inputs(folder: Path) -> tuple[bytes, Path, object]:
    from PIL import Image, ImageDraw

    pages = []
    for i in range(3):
        im = Image.new("RGB", (200, 260), "white")
        ImageDraw.Draw(im).text((20, 20), f"page {i + 1}", fill="black")
        pages.append(im)
    buf = io.BytesIO()
    pages[0].save(buf, "PDF", save_all=True, append_images=pages[1:], resolution=72)
    png = folder / "page.png"
    pages[0].save(png)
    return buf.getvalue(), png, pages[1]


def one_round(rng: random.Random, pdf: bytes, png: Path, image: object) -> dict[str, int]:
    from ocrbatch import Converter
    from ocrbatch.errors import ConverterClosedError

    conv = Converter(engine="fake", max_batch=4, max_wait_ms=2, workers=2)
    futures: list = []
    lock = threading.Lock()
    stop = threading.Event()
    refused = [0]

    def submitter(seed: int) -> None:
        r = random.Random(seed)
        while not stop.is_set():
            kind = r.choice(("pdf", "image", "path"))
            try:
                got = conv.submit(pdf if kind == "pdf" else image if kind == "image" else png)
            except ConverterClosedError:
                refused[0] += 1
                return  # closed: every later submit is refused the same way
            with lock:
                futures.extend(got if isinstance(got, list) else [got])

    threads = [threading.Thread(target=submitter, args=(rng.random(),), daemon=True) for _ in range(THREADS)]
    for t in threads:
        t.start()
    time.sleep(rng.uniform(0, MAX_BEFORE_CLOSE_S))
    wait = rng.random() < 0.5
    conv.close(wait=wait)
    with lock:
        at_close = list(futures)
    unresolved = sum(not f.done() for f in at_close)
    stop.set()
    for t in threads:
        t.join(JOIN_S)
    hung = sum(t.is_alive() for t in threads)
    with lock:
        everything = list(futures)
    unresolved += sum(not f.done() for f in everything[len(at_close):])  # returned after close: at once
    unclear = closed = ok = failed = 0
    for f in everything:
        if not f.done():
            continue
        exc = f.exception()
        if exc is None:
            result = f.result()
            ok += result.ok
            failed += not result.ok
            if "ocrbatch-api-" in (result.message or ""):
                unclear += 1
                sys.stderr.write(f"unclear: {result.message}\n")
        elif isinstance(exc, ConverterClosedError):
            closed += 1
        else:
            unclear += 1
            if unclear <= 3:
                sys.stderr.write(f"unclear: {type(exc).__name__}: {exc}\n")
    return {"rounds": 1, "waited": int(wait), "futures": len(everything), "unresolved": unresolved + hung,
            "ok": ok, "failed": failed, "closed_error": closed, "refused_at_submit": refused[0],
            "unclear": unclear}


def child(rounds: int, seed: int) -> None:
    rng = random.Random(seed)
    total: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        pdf, png, image = _inputs(Path(tmp))
        for _ in range(rounds):
            for k, v in one_round(rng, pdf, png, image).items():
                total[k] = total.get(k, 0) + v
    print(json.dumps(total), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--per-process", type=int, default=10)
    ap.add_argument("--seed", type=int, default=27)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--child", nargs=2, type=int, metavar=("ROUNDS", "SEED"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return 0
    total: dict[str, int] = {"rounds": 0, "futures": 0, "unresolved": 0, "unclear": 0, "crashes": 0}
    left, n, started = args.rounds, 0, time.monotonic()
    while left > 0:
        rounds = min(args.per_process, left)
        p = subprocess.run([sys.executable, __file__, "--child", str(rounds), str(args.seed + n)],
                           capture_output=True, text=True, cwd=ROOT, timeout=600)
        n += 1
        left -= rounds
        crashed = p.returncode != 0 or "still open" in p.stderr or "Fatal Python error" in p.stderr
        total["crashes"] += crashed
        if "unclear:" in p.stderr:
            sys.stderr.write("".join(line + "\n" for line in p.stderr.splitlines() if line.startswith("unclear:")))
        if crashed:
            sys.stderr.write(f"process {n} (seed {args.seed + n - 1}): exit {p.returncode}\n{p.stderr[-2000:]}\n")
        lines = [line for line in p.stdout.splitlines() if line.startswith("{")]
        if lines:
            for k, v in json.loads(lines[-1]).items():
                total[k] = total.get(k, 0) + v
    total["seconds"] = round(time.monotonic() - started, 1)
    if args.json:
        print(json.dumps(total))
    else:
        print("  ".join(f"{k} {v}" for k, v in total.items()))
    return 1 if total["unresolved"] or total["unclear"] or total["crashes"] else 0


if __name__ == "__main__":
    sys.exit(main())
