#!/usr/bin/env python3
"""`make bench`: the embedded engine's speed/accuracy frontier, beside tesseract, in one sitting.

Runs from a clone on what the repository holds: the layout stress set (bench/stress, 42 pages with their truth,
rendered at 150 dpi) and sample_docs/ (7 pages, timed only: they have no truth), scored by bench/score.py; and
adds the development corpus (30 real pages) when ../shared/bench/dev is beside the checkout, timing on it then.
For each profile (a set of `convert` flags: `auto`, the default cascade; `tiny`; tiny alone; `small`; the
same on onnxruntime rather than OpenVINO; int8 copies) it prints one row:

    profile   pages/s   × tesseract   dev CER   dev BoW-F1   stress CER   lines re-read   peak RSS

- pages/s: `ocrbatch convert` run as a subprocess into a fresh output folder on the timed pages (the dev
  corpus; without it the stress set and sample_docs) (process
  start and model load included), timed in ABBA order with tesseract 5 (`tesseract PAGE -`, 2 jobs, PDF
  pages rasterized at 150 dpi beforehand): tesseract, every profile, every profile again in reverse order,
  tesseract. Each ratio is (tesseract's mean time) / (the profile's mean time), so a machine shared with
  other work moves both alike. Timings are noisy on a shared machine; accuracy figures are deterministic.
- dev CER / BoW-F1 (with the dev corpus) and stress CER: bench/score.py on the profile's Markdown.
- lines re-read: the share of the page lines the cascade's second recognizer read again (from the
  manifest's info.confidence.reread), on dev and stress together.
- peak RSS: the largest of the profile's convert runs (Linux ru_maxrss).

Then, for the default profile: score.py's figures per kind of page on dev and on the stress set, stress pages
with a pipe table their MANIFEST does not expect, and the peak RSS converting a 100-page and a 2,000-page
image-only PDF with `--engine fake` (memory must not grow with the page count). `--quick` (about 5 minutes on 2
cores): the default and the fastest profile only, one pass each (A-B-A), no page-count RSS. `--layout` adds the
layout stages' share of the engine's CPU time.
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
SAMPLES = ROOT / "sample_docs"
SCORER = ROOT / "bench" / "score.py"  # a copy of ../shared/bench/score.py, so that a clone scores alone
# The frontier's profiles: (label, `convert` flags). The first is the default; --quick runs the first QUICK.
PROFILES = (
    ("auto (default)", []),
    ("tiny alone", ["--model-size", "tiny", "--reread-below", "0"]),
    # the same with the wheel's tiny recognizer reading first instead of the document recognizer (models/rec_doc)
    ("auto --script all", ["--script", "all"]),
    ("tiny", ["--model-size", "tiny"]),
    ("small", ["--model-size", "small"]),
    # the same on onnxruntime, the runtime where OpenVINO is not installed (engines/runtimes.py)
    ("auto onnxruntime", ["--runtime", "onnxruntime"]),
    ("tiny alone onnxruntime", ["--model-size", "tiny", "--reread-below", "0", "--runtime", "onnxruntime"]),
    ("auto onnxruntime --script all", ["--runtime", "onnxruntime", "--script", "all"]),
    ("tiny alone onnxruntime --script all", ["--model-size", "tiny", "--reread-below", "0", "--runtime", "onnxruntime",
                                             "--script", "all"]),
    ("small onnxruntime", ["--model-size", "small", "--runtime", "onnxruntime"]),
    ("auto int8", ["--int8"]),
    ("small int8", ["--model-size", "small", "--int8"]),
)
QUICK = 2
DEFAULT_SIZE = "auto"  # EngineOptions.model_size (--layout reads with it)


def convert(dev: Path, out: Path, engine: str, extra: list[str],
            inputs: list[Path] | None = None) -> tuple[float, int, int]:
    """Run `ocrbatch convert` on dev's pages/ and pdfs/ (or `inputs`); (wall seconds, exit code, peak RSS in
    bytes)."""
    if out.exists():
        shutil.rmtree(out)
    cmd = [sys.executable, "-m", "ocrbatch", "convert", *map(str, inputs or [dev / "pages", dev / "pdfs"]),
           "-o", str(out), "--engine", engine, "-q", *extra]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})  # this tree, not an install
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, proc.returncode, usage.ru_maxrss * 1024  # Linux reports KiB


def decoded_pages(dev: Path, dpi: int) -> list:
    """Every dev page as an RGB image, decoded before any timing starts."""
    return [im for _, im in named_pages(dev, dpi)]


def named_pages(dev: Path, dpi: int) -> list[tuple[str, Any]]:
    """(truth name without .txt, RGB image) of every page in dev's pages/ and pdfs/ folders."""
    return folder_pages(sorted((dev / "pages").iterdir()) + sorted((dev / "pdfs").iterdir()), dpi)


def folder_pages(files: list[Path], dpi: int) -> list[tuple[str, Any]]:
    """(NAME, or NAME/page-000N for a PDF's page N; RGB image) of each image and each PDF page in `files`."""
    import pypdfium2
    from PIL import Image

    out = []
    for p in (p for p in files if p.suffix.lower() != ".pdf"):
        with Image.open(p) as im:
            out.append((p.stem, im.convert("RGB")))
    for p in (p for p in files if p.suffix.lower() == ".pdf"):
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
        proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
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
    truth = truth or dev / "truth"
    with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
        run = subprocess.run([sys.executable, str(SCORER), str(truth), str(out), "--json", tmp.name,
                              "--quiet", "--manifest", str(truth.parent / "MANIFEST.tsv")],
                             capture_output=True, text=True, check=True)
        figures = json.loads(Path(tmp.name).read_text())
    return figures, run.stdout.strip().splitlines()[-1]


def reread_share(out: Path) -> tuple[int, int]:
    """(lines read again, lines) over the pages of a convert's manifest (0, 0 without a cascade)."""
    again = lines = 0
    manifest = out / "manifest.jsonl"
    for line in manifest.read_text(encoding="utf-8").splitlines() if manifest.exists() else []:
        conf = (json.loads(line).get("info") or {}).get("confidence") or {}
        if conf.get("reread") is not None:
            again += conf["reread"]
            lines += max(conf.get("lines") or 0, conf["reread"])
    return again, lines


def warm_int8(profiles: list[tuple[str, list[str]]]) -> None:
    """Build the int8 models before any timing (the first use builds them, once per machine)."""
    if any("--int8" in flags for _, flags in profiles):
        code = ("from ocrbatch.engines import int8, ppocr\n"
                "for size in ('tiny', 'small'):\n"
                "    int8.int8_model(ppocr.model_dir() / ppocr.MODELS[size][1])\n")
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=False, capture_output=True)


def cpu_model() -> str:
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown CPU"
    name = next((l.split(":", 1)[1].strip() for l in info.splitlines() if l.startswith("model name")), "unknown CPU")
    isa = "AVX-512 VNNI" if "avx512_vnni" in info else "AVX-512" if "avx512f" in info else \
        "AVX2" if "avx2" in info else "no AVX2"
    return f"{name} ({isa})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dev", type=Path, default=DEFAULT_DEV, help="corpus folder (pages/, pdfs/, truth/)")
    ap.add_argument("--engine", default="rapidocr")
    ap.add_argument("--quick", action="store_true",
                    help=f"the first {QUICK} profiles, one pass each (A-B-A), no page-count RSS (about 5 minutes)")
    ap.add_argument("--profiles", help="labels of the profiles to run, comma-separated (default: all; "
                    + "; ".join(f"{label}: {' '.join(flags) or 'no flags'}" for label, flags in PROFILES) + ")")
    ap.add_argument("--keep", type=Path, help="keep the Markdown here instead of a temporary folder")
    ap.add_argument("--layout", action="store_true", help="also the layout stages' share of the engine's CPU time")
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
    have_dev = (a.dev / "truth").is_dir()
    profiles = list(PROFILES[:QUICK] if a.quick else PROFILES)
    if a.profiles:
        wanted = [w.strip() for w in a.profiles.split(",")]
        profiles = [p for p in PROFILES if p[0] in wanted or p[0].split(" (")[0] in wanted]
    if a.engine != "rapidocr":
        profiles = [(a.engine, [])]

    workdir = Path(tempfile.mkdtemp(prefix="ocrbatch-bench-"))
    keep = a.keep or workdir
    rows: dict[str, dict[str, Any]] = {label: {"walls": [], "rss": 0} for label, _ in profiles}
    tess_walls: list[float] = []
    tess_figures: dict | None = None
    try:
        stress = stress_pages(workdir)  # renders bench/stress into workdir/stress-png
        # the timed pages: the dev corpus, or what the clone holds (the stress set and sample_docs)
        timed_inputs = [a.dev / "pages", a.dev / "pdfs"] if have_dev else [workdir / "stress-png", SAMPLES]
        pages = named_pages(a.dev, 150) if have_dev else stress + folder_pages(sorted(SAMPLES.iterdir()), 150)
        n_pages = len(pages)
        timed = f"{a.dev} (pages/, pdfs/)" if have_dev else f"bench/stress and sample_docs (no dev corpus at {a.dev})"
        print(f"make bench: {n_pages} pages of {timed} timed, engine {a.engine}, {os.cpu_count()} CPUs: "
              f"{cpu_model()}", flush=True)
        warm_int8(profiles)
        has_tesseract = shutil.which("tesseract") is not None

        def time_tesseract() -> None:
            nonlocal tess_figures
            if has_tesseract:
                t_wall, t_out = tesseract(pages, workdir / "tesseract")  # type: ignore[misc]
                tess_walls.append(t_wall)
                print(f"  timed: tesseract {t_wall:.1f} s", file=sys.stderr, flush=True)
                if tess_figures is None and have_dev:
                    tess_figures, _ = score(a.dev, t_out)

        time_tesseract()
        for label, flags in profiles + ([] if a.quick else profiles[::-1]):  # A B C ... C B A
            out = keep / "dev" / _slug(label)
            wall, code, rss = convert(a.dev, out, a.engine, [*flags, *extra], inputs=timed_inputs)
            row = rows[label]
            row["walls"].append(wall)
            row["rss"], row["code"], row["dev_out"] = max(row["rss"], rss), code, out
            print(f"  timed: {label} {wall:.1f} s (exit {code})", file=sys.stderr, flush=True)
        time_tesseract()
        for label, flags in profiles:  # accuracy on the stress set (not timed)
            out = keep / "stress" / _slug(label)
            convert(a.dev, out, a.engine, [*flags, *extra], inputs=[workdir / "stress-png"])
            rows[label]["stress_out"] = out
        for label, _ in profiles:
            row = rows[label]
            row["dev"], row["dev_last"] = score(a.dev, row["dev_out"]) if have_dev else (None, "")
            row["stress"], _ = score(a.dev, row["stress_out"], STRESS / "truth")
            d_again, d_lines = reread_share(row["dev_out"]) if have_dev else (0, 0)
            s_again, s_lines = reread_share(row["stress_out"])
            row["reread"] = (d_again + s_again) / (d_lines + s_lines) if d_lines + s_lines else None
        if a.layout and have_dev:
            read_all(pages, DEFAULT_SIZE, workdir / "layout-dev", 8, f"{DEFAULT_SIZE} dev")
        if a.layout:
            read_all(stress, DEFAULT_SIZE, workdir / "layout-stress", 8, f"{DEFAULT_SIZE} stress")
        if not (a.no_rss or a.quick):  # in a fresh process: this one holds decoded pages by now
            sys.stdout.flush()
            subprocess.run([sys.executable, __file__, "--rss-only"], check=False)
        print_frontier(profiles, rows, tess_walls, n_pages, tess_figures)
        default_label = profiles[0][0]
        default = rows[default_label]
        if have_dev:
            print_kinds(f"dev corpus, {default_label}", default["dev"])
            print(default["dev_last"])
        print_kinds(f"stress set (bench/stress, 150 dpi), {default_label}", default["stress"])
        print_old_new(default["stress"])
        unexpected, missing = prose_tables(default["stress_out"])
        print(f"pages with a table they should not have (prose as table): {', '.join(unexpected) or 'none'}; "
              f"real tables not found: {', '.join(missing) or 'none'}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if LAYOUT_CPU:
        print(f"\n{'layout (all stages), CPU':26s} {'ms/page':>8s} {'engine ms/page':>15s} {'share':>6s}  "
              "(goal: at most 5%)")
        for label, (lay, eng, n) in LAYOUT_CPU.items():
            print(f"{label:26s} {1000 * lay / max(1, n):8.1f} {1000 * eng / max(1, n):15.0f} "
                  f"{100 * lay / max(1e-9, eng):5.1f}%")
    return 0


def _slug(label: str) -> str:
    return label.split(" (")[0].replace(" ", "-")


def print_frontier(profiles, rows, tess_walls: list[float], n_pages: int, tess_figures: dict | None) -> None:
    tess = sum(tess_walls) / len(tess_walls) if tess_walls else None
    print(f"\n{'profile':22s} {'pages/s':>8s} {'x tesseract':>12s} {'dev CER':>8s} {'dev F1':>7s} "
          f"{'str CER':>8s} {'re-read':>8s} {'peak RSS':>9s}  flags")
    for label, flags in profiles:
        row = rows[label]
        wall = sum(row["walls"]) / len(row["walls"])
        ratio = f"{tess / wall:12.2f}" if tess else f"{'-':>12s}"
        share = f"{100 * row['reread']:7.1f}%" if row["reread"] is not None else f"{'-':>8s}"
        exit_note = "" if row.get("code") == 0 else f"  (exit {row.get('code')})"
        dev = (f"{row['dev']['overall']['cer']:8.4f} {row['dev']['overall']['mean_bow_f1']:7.4f}" if row["dev"]
               else f"{'-':>8s} {'-':>7s}")
        print(f"{label:22s} {n_pages / wall:8.2f} {ratio} {dev} {row['stress']['overall']['cer']:8.4f} {share} "
              f"{row['rss'] / 2**20:5.0f} MiB  {' '.join(flags) or '(none)'}{exit_note}")
    if tess and tess_figures is not None:
        t = tess_figures["overall"]
        print(f"{'tesseract 5 (2 jobs)':22s} {n_pages / tess:8.2f} {1:12.2f} {t['cer']:8.4f} {t['mean_bow_f1']:7.4f}")
        print(f"(tesseract timed first and last in the sitting: {', '.join(f'{t:.1f} s' for t in tess_walls)}; "
              f"each profile {len(rows[profiles[0][0]]['walls'])}x, "
              f"{'in ABBA order' if len(rows[profiles[0][0]]['walls']) > 1 else 'in one pass'}; ratios from the means)")


def print_kinds(title: str, figures: dict) -> None:
    print(f"\n{title}")
    print(f"{'kind':30s} {'pages':>5s} {'CER':>7s} {'WER':>7s} {'BoW-F1':>7s}")
    for kind, v in figures["by_kind"].items():
        print(f"{kind:30s} {v['pages']:5d} {v['cer']:7.4f} {v['wer']:7.4f} {v['mean_bow_f1']:7.4f}")
    o = figures["overall"]
    print(f"{'overall':30s} {o['pages']:5d} {o['cer']:7.4f} {o['wer']:7.4f} {o['mean_bow_f1']:7.4f}")


if __name__ == "__main__":
    sys.exit(main())
