#!/usr/bin/env python3
"""`make bench`: speed and accuracy of `ocrbatch convert` on the development corpus and the stress set.

Prints, for ../shared/bench/dev (its pages/ and pdfs/ folders):
- pages/s of `ocrbatch convert` run as a subprocess into a fresh output folder, and its peak RSS;
- tesseract 5 on the same pages in the same sitting (`tesseract PAGE -`, 2 parallel jobs, PDF pages
  rasterized at 150 dpi beforehand) and the speed ratio ocrbatch ÷ tesseract, with tesseract's CER;
  then `convert --model-size tiny` timed the same way, with its own ratio;
- the same engine called in a tight loop on pages decoded beforehand, and the overhead ratio
  (convert wall time ÷ loop time: what the pipeline, process start and model load cost on top);
- score.py's CER, WER and bag-of-words F1, overall and per kind of page (from dev/MANIFEST.tsv);
- for each model size (`--sizes`), the engine alone on the dev corpus and on the layout stress set
  (bench/stress, rendered at 150 dpi): pages/s, CER and BoW-F1; the stress set per kind for the
  default size, and any stress page that came out with a pipe table its MANIFEST does not expect
  (prose written as a table).
- peak RSS converting a 100-page and a 2,000-page image-only PDF with `--engine fake --text-layer off`
  (memory must not grow with the page count: the 2,000-page figure should stay within 1.2x the 100-page one).

Timings on a shared machine are noisy: `--repeat N` runs each timing N times and keeps the best.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DEV = ROOT.parent / "shared" / "bench" / "dev"
STRESS = ROOT / "bench" / "stress"
# --model-size values measured; "tiny-rec" (small detector, tiny recognizer) exists for this table only
SIZES = ("tiny", "tiny-rec", "small")
DEFAULT_SIZE = "small"  # EngineOptions.model_size: what `convert` (and the tesseract ratio) runs
CONVERT_SIZES = ("small", "tiny")  # what `convert --model-size` accepts (ocrbatch.config.MODEL_SIZES)


def convert(dev: Path, out: Path, engine: str, extra: list[str]) -> tuple[float, int, int]:
    """Run `ocrbatch convert`; (wall seconds, exit code, peak RSS in bytes)."""
    if out.exists():
        shutil.rmtree(out)
    cmd = [sys.executable, "-m", "ocrbatch", "convert", str(dev / "pages"), str(dev / "pdfs"),
           "-o", str(out), "--engine", engine, "-q", *extra]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, proc.returncode, usage.ru_maxrss * 1024  # Linux reports KiB


def decoded_pages(dev: Path, dpi: int) -> list:
    """Every dev page as an RGB image, decoded before any timing starts."""
    return [im for _, im in named_pages(dev, dpi)]


def named_pages(dev: Path, dpi: int) -> list[tuple[str, Any]]:
    """(truth name without .txt, RGB image) of every page in dev's pages/ and pdfs/ folders."""
    import pypdfium2
    from PIL import Image

    out = []
    for p in sorted((dev / "pages").iterdir()):
        with Image.open(p) as im:
            out.append((p.stem, im.convert("RGB")))
    for p in sorted((dev / "pdfs").iterdir()):
        doc = pypdfium2.PdfDocument(str(p))
        try:
            for i in range(len(doc)):
                page = doc[i]
                out.append((f"{p.stem}/page-{i + 1:04d}", page.render(scale=dpi / 72).to_pil().convert("RGB")))
                page.close()
        finally:
            doc.close()
    return out


def tesseract(pages: list[tuple[str, Any]], work: Path, jobs: int = 2) -> tuple[float, Path] | None:
    """Seconds for `tesseract PAGE -` over the pages (PNG files written beforehand), `jobs` at once;
    its text goes to work/out/NAME.md for scoring. None when tesseract is not installed."""
    from concurrent.futures import ThreadPoolExecutor

    exe = shutil.which("tesseract")
    if exe is None:
        return None
    files = []
    for name, im in pages:
        path = work / "png" / f"{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        im.save(path)
        files.append((name, path))
    out = work / "out"
    # one thread per job, as tesseract advises for parallel runs: its OpenMP threads on top of two jobs
    # only oversubscribe the CPUs and make it slower
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}

    def one(item: tuple[str, Path]) -> None:
        name, path = item
        text = subprocess.run([exe, str(path), "-"], capture_output=True, text=True, env=env).stdout
        dest = out / f"{name}.md"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text, encoding="utf-8")

    t0 = time.perf_counter()
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(one, files))
    return time.perf_counter() - t0, out


def stress_pages(work: Path) -> list[tuple[str, Any]]:
    """The stress set's pages, rendered at 150 dpi (bench/stress: see scripts/stress_set.py)."""
    from PIL import Image

    sys.path.insert(0, str(ROOT / "scripts"))
    import stress_set

    out = []
    for path in stress_set.render(work / "stress-png"):
        with Image.open(path) as im:
            out.append((path.stem, im.convert("RGB")))
    return out


LAYOUT_CPU: dict[str, list[float]] = {}  # size/set → [layout CPU-s, engine CPU-s, pages] (read_all)


def read_all(pages: list[tuple[str, Any]], size: str, out: Path, batch: int, label: str = "") -> float:
    """Seconds for the embedded engine with `size` models to read `pages` (model load excluded);
    the Markdown goes to out/NAME.md. The CPU time of the layout stages (ocrbatch/layout, timed on the
    thread that runs them) and of the whole engine go to LAYOUT_CPU[label]."""
    sys.path.insert(0, str(ROOT))
    from ocrbatch.config import EngineOptions
    from ocrbatch.engines import rapid, registry
    from ocrbatch.records import PageImage

    spent = LAYOUT_CPU.setdefault(label or size, [0.0, 0.0, 0])
    original = rapid.layout_page

    def timed(*args, **kwargs):
        t0 = time.thread_time()
        try:
            return original(*args, **kwargs)
        finally:
            spent[0] += time.thread_time() - t0

    engine = registry.create("rapidocr", EngineOptions(model_size=size))
    engine.load("cpu")
    rapid.layout_page = timed
    try:
        elapsed = 0.0
        for i in range(0, len(pages), batch):
            chunk = pages[i:i + batch]
            t0, c0 = time.perf_counter(), time.process_time()
            results = engine.infer([PageImage(ref=None, image=im) for _, im in chunk])  # type: ignore[arg-type]
            elapsed += time.perf_counter() - t0
            spent[1] += time.process_time() - c0
            spent[2] += len(chunk)
            for (name, _), res in zip(chunk, results):
                dest = out / f"{name}.md"
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_text("" if isinstance(res, Exception) else res.markdown, encoding="utf-8")
        return elapsed
    finally:
        rapid.layout_page = original
        engine.close()


def typeset_pages() -> set[str]:
    """The stress pages typeset for issue 20 (MANIFEST source `typeset:`); the others came before."""
    rows = (STRESS / "MANIFEST.tsv").read_text(encoding="utf-8").splitlines()[1:]
    return {Path(r.split("\t")[0]).stem for r in rows if r.split("\t")[2].startswith("typeset:")}


def print_old_new(st: dict) -> None:
    """The stress set's CER per kind for its older pages and its newer (typeset) ones, and the pages
    above 0.15."""
    new = typeset_pages()
    by: dict[tuple[str, bool], list[dict]] = {}
    for r in st.get("pages", []):
        by.setdefault((r["kind"], Path(r["page"]).stem in new), []).append(r)

    def cer(rs: list[dict]) -> str:
        chars = sum(r["truth_chars"] for r in rs)
        return f"{sum(r['char_edits'] for r in rs) / chars:.4f} ({len(rs)})" if chars else "-"

    print(f"{'kind':30s} {'old pages CER':>15s} {'new pages CER':>15s}")
    for kind in sorted({k for k, _ in by}):
        print(f"{kind:30s} {cer(by.get((kind, False), [])):>15s} {cer(by.get((kind, True), [])):>15s}")
    old = [r for (k, n), rs in by.items() if not n for r in rs]
    fresh = [r for (k, n), rs in by.items() if n for r in rs]
    print(f"{'all':30s} {cer(old):>15s} {cer(fresh):>15s}")
    worst = sorted((r for rs in by.values() for r in rs if r["cer"] > 0.15), key=lambda r: -r["cer"])
    print("pages above CER 0.15: " + (", ".join(f"{Path(r['page']).stem} {r['cer']:.3f}" for r in worst) or "none"))


def prose_tables(out: Path) -> tuple[list[str], list[str]]:
    """(stress pages with a pipe table their MANIFEST does not expect, expected ones that have none)."""
    expected = set()
    for line in (STRESS / "MANIFEST.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        item, _kind, _src, _lic, notes = line.split("\t")
        if "HAS-TABLE" in notes:
            expected.add(Path(item).stem)
    unexpected, missing = [], []
    for md in sorted(out.glob("*.md")):
        has = any(l.startswith("|---") or l.startswith("| ---") for l in md.read_text(encoding="utf-8").splitlines())
        if has and md.stem not in expected:
            unexpected.append(md.stem)
        if not has and md.stem in expected:
            missing.append(md.stem)
    return unexpected, missing


def engine_loop(images: list, engine_name: str, batch: int) -> float:
    """Seconds for the engine alone to read `images`, `batch` pages per call (model load excluded)."""
    sys.path.insert(0, str(ROOT))
    from ocrbatch.config import EngineOptions
    from ocrbatch.engines import registry
    from ocrbatch.records import PageImage

    engine = registry.create(engine_name, EngineOptions())
    engine.load("cpu")
    try:
        pages = [PageImage(ref=None, image=im) for im in images]  # type: ignore[arg-type]
        t0 = time.perf_counter()
        for i in range(0, len(pages), batch):
            engine.infer(pages[i:i + batch])
        return time.perf_counter() - t0
    finally:
        engine.close()


def image_only_pdf(path: Path, pages: int) -> Path:
    """A scanned-looking PDF: every page one JPEG image, no text layer, each page different."""
    from PIL import Image, ImageDraw

    def page(n: int):
        im = Image.new("L", (620, 800), 255)
        d = ImageDraw.Draw(im)
        for k, y in enumerate(range(50, 760, 30)):
            d.text((50, y), f"page {n} line {k}: the quick brown fox jumps over the lazy dog", fill=0)
        return im

    first = page(1)
    first.save(path, save_all=True, append_images=(page(n) for n in range(2, pages + 1)), resolution=75)
    return path


def rss_by_page_count(workdir: Path, counts: tuple[int, ...] = (100, 2000)) -> dict[int, tuple[int, float, int]]:
    """Peak RSS (bytes), wall seconds and exit code of converting an image-only PDF of each page count."""
    figures = {}
    for n in counts:
        # Made by another process: a child's peak RSS counts its parent's peak at the time it starts
        # (Linux keeps the larger on exec), so this process must stay small.
        pdf = workdir / f"scan-{n}.pdf"
        subprocess.run([sys.executable, __file__, "--make-pdf", str(pdf), str(n)], check=True)
        cmd = [sys.executable, "-m", "ocrbatch", "convert", str(pdf), "-o", str(workdir / f"rss-{n}"),
               "--engine", "fake", "--text-layer", "off", "-q"]
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
        figures[n] = (usage.ru_maxrss * 1024, time.perf_counter() - t0, os.waitstatus_to_exitcode(status))
        pdf.unlink()
    return figures


def print_rss(workdir: Path) -> None:
    """Printed by a fresh process (`--rss-only`) when this one has grown (see rss_by_page_count)."""
    figures = rss_by_page_count(workdir)
    (small, *_), (large, *_) = figures[100], figures[2000]
    for n, (rss, wall, code) in figures.items():
        print(f"peak RSS     {n:5d}-page image-only PDF, --engine fake --text-layer off: {rss / 2**20:6.0f} MiB"
              f"   ({wall:.0f} s, exit {code})")
    print(f"peak RSS     2000 / 100 pages: {large / small:.2f}x (goal: at most 1.2x)")


def score(dev: Path, out: Path, truth: Path | None = None) -> tuple[dict, str]:
    scorer = dev.parent / "score.py"
    truth = truth or dev / "truth"
    with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
        run = subprocess.run([sys.executable, str(scorer), str(truth), str(out), "--json", tmp.name,
                              "--quiet", "--manifest", str(truth.parent / "MANIFEST.tsv")],
                             capture_output=True, text=True, check=True)
        figures = json.loads(Path(tmp.name).read_text())
    return figures, run.stdout.strip().splitlines()[-1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dev", type=Path, default=DEFAULT_DEV, help="corpus folder (pages/, pdfs/, truth/)")
    ap.add_argument("--engine", default="rapidocr")
    ap.add_argument("--repeat", type=int, default=1, help="time each step N times, keep the best")
    ap.add_argument("--batch", type=int, default=8, help="pages per engine call in the tight loop")
    ap.add_argument("--no-loop", action="store_true", help="skip the tight engine loop (no overhead ratio)")
    ap.add_argument("--keep", type=Path, help="write the Markdown here instead of a temporary folder")
    ap.add_argument("--sizes", default=",".join(SIZES),
                    help=f"model sizes to compare on dev and stress (default {','.join(SIZES)}; empty: none)")
    ap.add_argument("--no-tesseract", action="store_true", help="skip the tesseract comparison")
    ap.add_argument("--rss-only", action="store_true", help="only the peak RSS by page count (no corpus needed)")
    ap.add_argument("--no-rss", action="store_true", help="skip the peak RSS by page count (about 2 minutes)")
    ap.add_argument("--make-pdf", nargs=2, metavar=("PATH", "PAGES"), help=argparse.SUPPRESS)
    a, extra = ap.parse_known_args(argv)
    if a.make_pdf:
        image_only_pdf(Path(a.make_pdf[0]), int(a.make_pdf[1]))
        return 0
    if a.rss_only:
        workdir = Path(tempfile.mkdtemp(prefix="ocrbatch-bench-"))
        try:
            print_rss(workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        return 0
    if not (a.dev / "truth").is_dir():
        print(f"bench: no corpus at {a.dev}", file=sys.stderr)
        return 2

    n_pages = sum(1 for _ in (a.dev / "truth").rglob("*.txt"))
    print(f"ocrbatch bench: {n_pages} pages of {a.dev} (pages/, pdfs/), engine {a.engine}, "
          f"{os.cpu_count()} CPUs, best of {a.repeat}")
    workdir = Path(tempfile.mkdtemp(prefix="ocrbatch-bench-"))
    out = a.keep or workdir / "out"
    try:
        runs = [convert(a.dev, out, a.engine, extra) for _ in range(a.repeat)]
        wall = min(r[0] for r in runs)
        rss = max(r[2] for r in runs)
        print(f"convert      {wall:7.1f} s   {n_pages / wall:5.2f} pages/s   peak RSS {rss / 2**20:.0f} MiB"
              f"   exit {runs[-1][1]}   (default settings: model size {DEFAULT_SIZE})")
        pages = named_pages(a.dev, 150)
        tess_figures = None
        if not a.no_tesseract:
            tess = tesseract(pages, workdir / "tesseract")
            if tess is None:
                print("tesseract    not installed: no speed ratio")
            else:
                t_wall, t_out = tess
                tess_figures, _ = score(a.dev, t_out)
                print(f"tesseract    {t_wall:7.1f} s   {len(pages) / t_wall:5.2f} pages/s   (tesseract PAGE -, 2 jobs, OMP_THREAD_LIMIT=1, "
                      f"CER {tess_figures['overall']['cer']:.4f})")
                print(f"speed ratio  {t_wall / wall:7.2f}x tesseract (ocrbatch convert pages/s / tesseract pages/s)")
                # the other user-facing model sizes, timed the same way in the same sitting
                for size in (s for s in a.sizes.split(",") if s in CONVERT_SIZES and s != DEFAULT_SIZE):
                    s_wall = min(convert(a.dev, workdir / f"convert-{size}", a.engine,
                                         [*extra, "--model-size", size])[0] for _ in range(a.repeat))
                    print(f"convert --model-size {size}: {s_wall:.1f} s   {n_pages / s_wall:5.2f} pages/s   "
                          f"speed ratio {t_wall / s_wall:.2f}x tesseract")
        if not a.no_loop:
            images = [im for _, im in pages]
            loop = min(engine_loop(images, a.engine, a.batch) for _ in range(a.repeat))
            print(f"engine loop  {loop:7.1f} s   {len(images) / loop:5.2f} pages/s   "
                  f"overhead ratio {wall / loop:.2f} (convert wall / engine loop)")
        figures, last = score(a.dev, out)
        sizes = [s for s in a.sizes.split(",") if s] if a.engine == "rapidocr" else []
        size_rows, stress_default = [], None
        if sizes:
            stress = stress_pages(workdir)
            for size in sizes:
                dev_out, st_out = workdir / f"dev-{size}", workdir / f"stress-{size}"
                dev_s = read_all(pages, size, dev_out, a.batch, f"{size} dev")
                st_s = read_all(stress, size, st_out, a.batch, f"{size} stress")
                d, _ = score(a.dev, dev_out)
                st, _ = score(a.dev, st_out, STRESS / "truth")
                size_rows.append((size, len(pages) / dev_s, d["overall"], len(stress) / st_s, st["overall"]))
                if size == DEFAULT_SIZE or stress_default is None:
                    stress_default = (size, st, prose_tables(st_out))
        if not a.no_rss:  # in a fresh process: this one holds decoded pages and an engine by now
            sys.stdout.flush()
            subprocess.run([sys.executable, __file__, "--rss-only"], check=False)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    print(f"\n{'kind':30s} {'pages':>5s} {'CER':>7s} {'WER':>7s} {'BoW-F1':>7s}")
    for kind, v in figures["by_kind"].items():
        print(f"{kind:30s} {v['pages']:5d} {v['cer']:7.4f} {v['wer']:7.4f} {v['mean_bow_f1']:7.4f}")
    o = figures["overall"]
    print(f"{'overall':30s} {o['pages']:5d} {o['cer']:7.4f} {o['wer']:7.4f} {o['mean_bow_f1']:7.4f}")
    print(last)
    if tess_figures is not None:
        t = tess_figures["overall"]
        print(f"{'tesseract, same pages':30s} {t['pages']:5d} {t['cer']:7.4f} {t['wer']:7.4f} {t['mean_bow_f1']:7.4f}")
    if stress_default is not None:
        size, st, (unexpected, missing) = stress_default
        print(f"\nstress set (bench/stress, 150 dpi), model size {size}")
        print(f"{'kind':30s} {'pages':>5s} {'CER':>7s} {'WER':>7s} {'BoW-F1':>7s}")
        for kind, v in st["by_kind"].items():
            print(f"{kind:30s} {v['pages']:5d} {v['cer']:7.4f} {v['wer']:7.4f} {v['mean_bow_f1']:7.4f}")
        o = st["overall"]
        print(f"{'overall':30s} {o['pages']:5d} {o['cer']:7.4f} {o['wer']:7.4f} {o['mean_bow_f1']:7.4f}")
        print_old_new(st)
        print(f"pages with a table they should not have (prose as table): {', '.join(unexpected) or 'none'}; "
              f"real tables not found: {', '.join(missing) or 'none'}")
    if LAYOUT_CPU:
        print(f"\n{'layout (all stages), CPU':26s} {'ms/page':>8s} {'engine ms/page':>15s} {'share':>6s}  (goal: at most 5%)")
        for label, (lay, eng, n) in LAYOUT_CPU.items():
            print(f"{label:26s} {1000 * lay / max(1, n):8.1f} {1000 * eng / max(1, n):15.0f} "
                  f"{100 * lay / max(1e-9, eng):5.1f}%")
    if size_rows:
        print(f"\n{'model size (engine alone)':26s} {'dev p/s':>8s} {'dev CER':>8s} {'dev F1':>7s} "
              f"{'stress p/s':>10s} {'str CER':>8s} {'str F1':>7s}")
        for size, dps, d, sps, st in size_rows:
            label = f"{size} (default)" if size == DEFAULT_SIZE else size
            print(f"{label:26s} {dps:8.2f} {d['cer']:8.4f} {d['mean_bow_f1']:7.4f} {sps:10.2f} {st['cer']:8.4f} "
                  f"{st['mean_bow_f1']:7.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
