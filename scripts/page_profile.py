#!/usr/bin/env python3
"""Where the embedded engine's time goes, stage by stage, on the dev corpus and the stress set.

    python scripts/page_profile.py [--sizes auto,small] [--sets dev,stress] [--threads 1]

Each stage is timed in CPU seconds of the thread that runs it (time.thread_time), so the figures hold on a
machine shared with other work; the engine runs as `convert` runs it (pages in batches of 8, a pool of
--threads workers). Stages: process start and model load (a fresh interpreter, wall time), PDF rendering
(150 dpi), detection (the detector model; its second, larger pass on pages of small type; the box
post-processing), the orientation classifier, crop warping, the gutter split, recognizer input (scaling and
padding) and the recognizer models, layout (layout_page and page_markdown), and writing each page's Markdown
whole (atomic.atomic_write). Prints CPU ms per page and each stage's share of the total.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

SPENT: dict[str, float] = defaultdict(float)
_ACTIVE = __import__("threading").local()  # the stages running on this thread (nested ones are not counted twice)


@contextmanager
def stage(name: str):
    stack = getattr(_ACTIVE, "stack", None) or []
    _ACTIVE.stack = stack
    t0 = time.thread_time()
    stack.append([name, 0.0])
    try:
        yield
    finally:
        _, inner = stack.pop()
        took = time.thread_time() - t0
        SPENT[name] += took - inner  # own time only: nested stages count for themselves
        if stack:
            stack[-1][1] += took


def wrap(owner, attr: str, name) -> None:
    original = getattr(owner, attr)

    def timed(*args, **kwargs):
        label = name(*args, **kwargs) if callable(name) else name
        with stage(label):
            return original(*args, **kwargs)

    setattr(owner, attr, timed)


def instrument(engine) -> None:
    from ocrbatch import atomic
    from ocrbatch.engines import ppocr, rapid

    wrap(ppocr, "detect", lambda sess, bgr, p, scale=None: "detect: second pass" if scale else "detect: model")
    wrap(ppocr, "_db_boxes", "detect: boxes")
    wrap(ppocr, "crop_line", "crop warping")
    wrap(ppocr, "split_at_gutters", "gutter split")
    wrap(ppocr, "recognizer_input", "recognizer input (scale, pad)")
    if engine._cls is not None:
        wrap(engine._cls, "upside_down", "orientation classifier")
    first, second = engine._rec, engine._reread
    wrap(first, "read", "recognizer: first")  # instance attribute: the engine calls self._rec.read(...)
    if second is not None:
        wrap(second, "read", "recognizer: re-read")
    wrap(rapid, "layout_page", "layout")
    wrap(rapid, "page_markdown", "layout")
    wrap(atomic, "atomic_write", "writing")


def load_time(size: str, runtime: str = "auto") -> float:
    code = ("import time; t0 = time.perf_counter()\n"
            "from ocrbatch.config import EngineOptions\nfrom ocrbatch.engines import registry\n"
            f"e = registry.create('rapidocr', EngineOptions(model_size={size!r}, runtime={runtime!r})); e.load('cpu')\n"
            "print(time.perf_counter() - t0)")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, text=True)
    return time.perf_counter() - t0


def profile(size: str, sets: list[str], threads: int, workdir: Path, runtime: str = "auto",
            dev: Path | None = None) -> tuple[dict[str, float], int, int]:
    import corpus_bench as bench
    from ocrbatch import atomic
    from ocrbatch.config import EngineOptions
    from ocrbatch.engines import registry
    from ocrbatch.records import PageImage

    SPENT.clear()
    SPENT["process start + model load (wall)"] = load_time(size, runtime)
    pages = []
    if "dev" in sets:
        t0 = time.process_time()
        pages += bench.named_pages(dev or bench.DEFAULT_DEV, 150)
        SPENT["page decoding + PDF rendering"] += time.process_time() - t0
    if "stress" in sets:
        pages += bench.stress_pages(workdir)
    engine = registry.create("rapidocr", EngineOptions(model_size=size, threads=threads, runtime=runtime))
    engine.load("cpu")
    instrument(engine)
    lines = reread = 0
    try:
        total = time.process_time()
        for i in range(0, len(pages), 8):
            chunk = pages[i:i + 8]
            outs = engine.infer([PageImage(ref=None, image=im) for _, im in chunk])  # type: ignore[arg-type]
            for (name, _), out in zip(chunk, outs):
                if isinstance(out, Exception):
                    continue
                lines += out.info["lines"]
                reread += out.info["confidence"].get("reread") or 0
                dest = workdir / "out" / size / f"{name}.md"
                dest.parent.mkdir(parents=True, exist_ok=True)
                atomic.atomic_write(dest, out.markdown.encode())
        engine_cpu = time.process_time() - total
    finally:
        engine.close()
    SPENT["other (threads, numpy glue)"] = max(0.0, engine_cpu - sum(
        v for k, v in SPENT.items() if not k.startswith(("process start", "page decoding"))))
    return dict(SPENT), len(pages), reread


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="small,auto")
    ap.add_argument("--sets", default="dev,stress")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runtime", default="auto", help="what runs the recognizers (--runtime): OpenVINO's own threads "
                    "are not timed by stage, so onnxruntime gives the truer split")
    ap.add_argument("--dev", type=Path, help="the dev corpus (default: ../shared/bench/dev)")
    a = ap.parse_args(argv)
    sets = a.sets.split(",")
    with tempfile.TemporaryDirectory(prefix="ocrbatch-profile-") as tmp:
        results = {size: profile(size, sets, a.threads, Path(tmp), a.runtime, a.dev) for size in a.sizes.split(",")}
    names: list[str] = []
    for spent, _, _ in results.values():
        names += [k for k in spent if k not in names]
    print(f"CPU ms per page ({' + '.join(sets)}; share of the engine's CPU time)")
    print(f"{'stage':38s}" + "".join(f"{size:>20s}" for size in results))
    for name in names:
        cells = []
        for spent, n, _ in results.values():
            engine = sum(v for k, v in spent.items() if not k.startswith(("process start", "page decoding")))
            v = spent.get(name, 0.0)
            share = "" if name.startswith(("process start", "page decoding")) else f" ({100 * v / engine:4.1f}%)"
            cells.append(f"{1000 * v / n:10.0f}{share:>10s}" if not name.startswith("process") else f"{v:9.1f} s wall")
        print(f"{name:38s}" + "".join(f"{c:>20s}" for c in cells))
    for size, (spent, n, reread) in results.items():
        engine = sum(v for k, v in spent.items() if not k.startswith(("process start", "page decoding")))
        print(f"{size}: {n} pages, engine {engine:.1f} CPU s ({1000 * engine / n:.0f} ms/page), lines re-read {reread}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
