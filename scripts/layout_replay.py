#!/usr/bin/env python3
"""Work on the layout code without waiting for OCR: dump the recognised lines once, replay layout over them.

    python scripts/layout_replay.py dump CACHE.pkl [--size small] [--set dev|stress|both] [--only NAME ...]
    python scripts/layout_replay.py replay CACHE.pkl OUT_DIR [--only NAME ...]

`dump` runs the embedded engine over the dev corpus (../shared/bench/dev) and/or the layout stress set
(bench/stress, rendered at 150 dpi) and pickles, per page, the lines handed to the layout step (text, box,
score) and the page size. `replay` runs `lines_to_markdown` over the cache (seconds for every page),
writes OUT_DIR/{dev,stress}/NAME.md and prints score.py's figures for each set, per kind for the stress
set, and the stress pages with a pipe table their MANIFEST does not expect.
"""

from __future__ import annotations

import argparse
import pickle
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import corpus_bench as bench  # noqa: E402  (scripts/corpus_bench.py: page lists, scorer paths)


def dump(cache: Path, size: str, which: str, only: list[str] | None = None) -> None:
    import tempfile

    from ocrbatch.config import EngineOptions
    from ocrbatch.engines import rapid, registry
    from ocrbatch.records import PageImage

    sets = {}
    with tempfile.TemporaryDirectory() as tmp:
        if which in ("dev", "both"):
            sets["dev"] = bench.named_pages(bench.DEFAULT_DEV, 150)
        if which in ("stress", "both"):
            sets["stress"] = bench.stress_pages(Path(tmp))
        if only:  # (only these pages: the others keep what the cache has)
            sets = {k: [(n, im) for n, im in v if n in only] for k, v in sets.items()}
        engine = registry.create("rapidocr", EngineOptions(model_size=size))
        engine.load("cpu")
        seen: list = []
        original = rapid.layout_page

        def record(lines, width, height, keep_furniture=False):
            seen.append(([(l.text, l.box, l.score) for l in lines], width, height))
            return original(lines, width, height, keep_furniture=keep_furniture)

        rapid.layout_page = record
        out: dict = {}
        try:
            for name, pages in sets.items():
                out[name] = {}
                for page_name, im in pages:
                    seen.clear()
                    engine.infer([PageImage(ref=None, image=im)])  # type: ignore[arg-type]
                    if seen:
                        out[name][page_name] = seen[0]
                    print(f"{name}/{page_name}: {len(seen[0][0]) if seen else 0} lines", file=sys.stderr)
        finally:
            rapid.layout_page = original
            engine.close()
    old = pickle.loads(cache.read_bytes()) if cache.exists() else {}
    for name, pages in out.items():  # page by page: a dump of some pages keeps the rest
        old.setdefault(name, {}).update(pages)
    cache.write_bytes(pickle.dumps(old))


def replay(cache: Path, out: Path, only: list[str]) -> None:
    from ocrbatch.layout import lines_to_markdown
    from ocrbatch.records import TextLine

    import time

    data = pickle.loads(cache.read_bytes())
    truths = {"dev": bench.DEFAULT_DEV / "truth", "stress": bench.STRESS / "truth"}
    for name, pages in data.items():
        dest = out / name
        spent = 0.0
        for page_name, (lines, w, h) in pages.items():
            if only and page_name not in only:
                continue
            t0 = time.process_time()
            md = lines_to_markdown([TextLine(t, tuple(b), s) for t, b, s in lines], w, h)
            spent += time.process_time() - t0
            path = dest / f"{page_name}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(md, encoding="utf-8")
        print(f"== {name}: layout {spent:.2f} CPU-s for {len(pages)} pages ({1000 * spent / max(1, len(pages)):.0f} ms a page)")
        if only:
            continue
        manifest = (bench.DEFAULT_DEV if name == "dev" else bench.STRESS) / "MANIFEST.tsv"
        res = subprocess.run([sys.executable, str(bench.DEFAULT_DEV.parent / "score.py"), str(truths[name]),
                              str(dest), "--manifest", str(manifest)], capture_output=True, text=True)
        print(f"== {name}")
        print(res.stdout[-3000:] if name == "stress" else "\n".join(
            l for l in res.stdout.splitlines() if "overall" in l.lower() or l.startswith(("kind", "CER", "  "))))
        if name == "stress":
            unexpected, missing = bench.prose_tables(dest)
            print(f"pipe tables on prose pages: {unexpected or 'none'}; HAS-TABLE pages without one: "
                  f"{missing or 'none'}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("cache", type=Path)
    d.add_argument("--size", default="small")
    d.add_argument("--set", default="both", choices=["dev", "stress", "both"])
    d.add_argument("--only", nargs="*", default=[], help="only these pages (their names without suffix)")
    r = sub.add_parser("replay")
    r.add_argument("cache", type=Path)
    r.add_argument("out", type=Path)
    r.add_argument("--only", nargs="*", default=[])
    a = ap.parse_args()
    if a.cmd == "dump":
        dump(a.cache, a.size, a.set, a.only)
    else:
        replay(a.cache, a.out, a.only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
