#!/usr/bin/env python3
"""`make soak`: kill `ocrbatch convert` with kill -9 at random moments, rerun it, and check each rerun ends
exactly like a clean run.

A corpus is made in a temporary folder (image-only PDFs, single images, a multi-frame TIFF). A clean run
gives the reference output. Then, `--kills` times: a run into a fresh folder is killed (SIGKILL) at a random
moment of its expected wall time, and rerun to the end. Each rerun must exit 0 with the same Markdown files
and contents as the clean run, a manifest of whole JSON lines with one done record per page (0 lost pages),
and no temporary or half-written file left (0 partial files). Prints one line per kill and the tally;
exits 1 if any check failed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def make_corpus(where: Path, pdfs: int, pdf_pages: int, images: int) -> int:
    """The corpus; returns its page count."""
    from PIL import Image, ImageDraw

    def page(text: str, size=(620, 800)) -> Image.Image:
        im = Image.new("RGB", size, "white")
        d = ImageDraw.Draw(im)
        for k, y in enumerate(range(40, size[1] - 40, 36)):
            d.text((40, y), f"{text} line {k} the quick brown fox", fill="black")
        return im

    (where / "scans").mkdir(parents=True)
    (where / "photos" / "deep").mkdir(parents=True)
    for i in range(pdfs):
        pages = [page(f"doc {i} page {p}") for p in range(pdf_pages)]
        pages[0].save(where / "scans" / f"doc-{i}.pdf", save_all=True, append_images=pages[1:], resolution=100)
    for i in range(images):
        folder = where / "photos" / ("deep" if i % 2 else "")
        page(f"photo {i}", size=(500 + 10 * i, 400)).save(folder / f"img-{i}.{'png' if i % 3 else 'jpg'}")
    frames = [page(f"frame {f}", size=(400, 300)) for f in range(3)]
    frames[0].save(where / "photos" / "stack.tif", save_all=True, append_images=frames[1:])
    return pdfs * pdf_pages + images + 3


def convert(corpus: Path, out: Path, extra: list[str]) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "ocrbatch", "convert", str(corpus), "-o", str(out), "--engine", "fake",
           "--text-layer", "off", "-q", *extra]
    return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def outputs(out: Path) -> dict[str, str]:
    return {p.relative_to(out).as_posix(): p.read_text() for p in out.rglob("*.md")}


def leftovers(out: Path) -> list[str]:
    """Temporary files, the lock of a run that did not end, or anything else hidden."""
    return sorted(p.relative_to(out).as_posix() for p in out.rglob(".*"))


def whole_lines(path: Path) -> tuple[list[dict], int]:
    """The manifest's records and how many lines are not whole JSON."""
    if not path.exists():
        return [], 0
    recs, bad = [], 0
    data = path.read_bytes()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    elif lines:
        bad += 1  # no newline at the end: the last line was cut
        lines.pop()
    for line in lines:
        try:
            recs.append(json.loads(line))
        except ValueError:
            bad += 1
    return recs, bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--seed", type=int, default=10)
    ap.add_argument("--pdfs", type=int, default=3)
    ap.add_argument("--pdf-pages", type=int, default=40)
    ap.add_argument("--images", type=int, default=20)
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    a, extra = ap.parse_known_args(argv)
    rng = random.Random(a.seed)
    work = Path(tempfile.mkdtemp(prefix="ocrbatch-soak-"))
    try:
        corpus = work / "corpus"
        pages = make_corpus(corpus, a.pdfs, a.pdf_pages, a.images)
        t0 = time.perf_counter()
        clean = convert(corpus, work / "clean", extra)
        _, err = clean.communicate()
        wall = time.perf_counter() - t0
        if clean.returncode != 0:
            print(f"soak: the clean run failed (exit {clean.returncode}): {err}", file=sys.stderr)
            return 1
        reference = outputs(work / "clean")
        assert len(reference) == pages, (len(reference), pages)
        print(f"ocrbatch soak: {pages} pages, clean run {wall:.1f} s; {a.kills} kill -9 at random moments, "
              f"seed {a.seed}")
        tally = {"identical": 0, "lost_pages": 0, "partial_files": 0, "cut_lines_after": 0, "bad_exit": 0,
                 "cut_lines_at_kill": 0, "temporaries_at_kill": 0}
        for k in range(1, a.kills + 1):
            out = work / f"run-{k}"
            at = rng.uniform(0.05, wall)
            proc = convert(corpus, out, extra)
            time.sleep(at)
            killed = proc.poll() is None
            if killed:
                os.kill(proc.pid, signal.SIGKILL)
            proc.communicate()
            recs_at_kill, cut_at_kill = whole_lines(out / "manifest.jsonl")
            temps_at_kill = [p for p in leftovers(out) if p.endswith(".tmp")]
            rerun = convert(corpus, out, extra)
            _, err = rerun.communicate()
            recs, cut = whole_lines(out / "manifest.jsonl")
            done = {(r["source"], r["page"]) for r in recs if r["status"] in ("ok", "skipped")
                    and (out / r["output"]).is_file()}
            lost = pages - len(done)
            left = leftovers(out)
            same = outputs(out) == reference
            tally["identical"] += same
            tally["lost_pages"] += lost
            tally["partial_files"] += len(left)
            tally["cut_lines_after"] += cut
            tally["bad_exit"] += rerun.returncode != 0
            tally["cut_lines_at_kill"] += cut_at_kill
            tally["temporaries_at_kill"] += len(temps_at_kill)
            verdict = "ok" if same and not lost and not left and not cut and rerun.returncode == 0 else "FAIL"
            print(f"kill {k:2d} at {at:5.2f} s{'' if killed else ' (run had ended)'}: {len(recs_at_kill):3d} "
                  f"records, {cut_at_kill} cut line, {len(temps_at_kill)} temporary file(s) at the kill; rerun "
                  f"exit {rerun.returncode}, {lost} lost, {len(left)} partial, {cut} cut line(s): {verdict}"
                  + (f"\n  {err.strip()}" if rerun.returncode else "") + (f"\n  left: {left}" if left else ""))
            if not a.keep:
                shutil.rmtree(out, ignore_errors=True)
        ok = tally["identical"] == a.kills and not (tally["lost_pages"] or tally["partial_files"]
                                                    or tally["cut_lines_after"] or tally["bad_exit"])
        print(f"tally: {a.kills} kills, {tally['identical']}/{a.kills} reruns identical to the clean run, "
              f"{tally['lost_pages']} lost pages, {tally['partial_files']} partial files, "
              f"{tally['cut_lines_after']} cut manifest lines after the reruns, {tally['bad_exit']} reruns "
              f"not exiting 0 (at the kills: {tally['cut_lines_at_kill']} cut manifest lines, "
              f"{tally['temporaries_at_kill']} temporary files, all cleaned by the reruns)")
        return 0 if ok else 1
    finally:
        if a.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
