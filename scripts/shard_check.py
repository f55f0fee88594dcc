"""The --shard check at full size (issue 30's "Show"): 3 parts over one folder of 300 mixed files (PNGs, JPEGs and
PDFs of 1-3 pages, in subfolders), run side by side like a cron fleet into one output folder, one of them killed
with kill -9 midway and rerun. Checks, and prints the figures:

- the union of the parts is one unsharded run, page for page: the same files with the same bytes;
- no page is in two parts' manifests, none is left out;
- the killed part's rerun completes (exit 0), converts none of the pages it had finished before the kill, and
  removes only its own temporary files;
- `ocrbatch merge-manifests` folds the three manifests into one with the unsharded run's pages and outputs.

    python scripts/shard_check.py [--files 300] [--engine fake-timed] [--keep DIR]

The parts run the `fake-timed` engine by default (a fixed sleep per batch, OCRBATCH_FAKE_BATCH_MS, so that the
kill lands mid-run); the unsharded reference runs `fake`, whose Markdown is the same (with `--engine rapidocr`,
the reference runs it too). The part with the most pages is killed once a third of them are recorded. Exit 0
when every check holds.
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
from pathlib import Path, PurePosixPath

from PIL import Image, ImageDraw

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ocrbatch.config import Shard  # noqa: E402
from ocrbatch.pipeline.names import natural_key  # noqa: E402
PARTS = 3
KILL_AT = 1 / 3  # the victim part is killed once this share of its pages is recorded
POLL_S = 0.05
RUN_LIMIT_S = 600  # no run of this check waits longer


def make_files(folder: Path, n: int, seed: int = 30) -> int:
    """`n` files: two in three images (PNG or JPEG), one in three a PDF of 1-3 pages; returns the page count."""
    rng = random.Random(seed)
    pages = 0
    for i in range(n):
        sub = folder / f"box{i % 7}" / ("old" if i % 5 == 0 else "")
        sub.mkdir(parents=True, exist_ok=True)
        count = rng.randint(1, 3) if i % 3 == 0 else 1
        images = []
        for k in range(count):
            im = Image.new("RGB", (160 + rng.randint(0, 80), 120), "white")
            ImageDraw.Draw(im).text((8, 8), f"file {i} page {k + 1}", fill="black")
            images.append(im)
        if i % 3 == 0:
            images[0].save(sub / f"doc{i:03d}.pdf", save_all=True, append_images=images[1:], resolution=72)
        else:
            images[0].save(sub / f"scan{i:03d}.{'png' if i % 2 else 'jpg'}")
        pages += count
    return pages


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "ocrbatch", *args]


def tree(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and not p.name.startswith((".", "manifest"))}


def records(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:  # the killed part's last line may be cut short
            pass
    return out


def keys(recs: list[dict]) -> set[tuple[str, int]]:
    return {(r["source"], r["page"]) for r in recs}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=300)
    ap.add_argument("--engine", default="fake-timed")
    ap.add_argument("--batch-ms", default="150", help="fake-timed: sleep per batch (OCRBATCH_FAKE_BATCH_MS)")
    ap.add_argument("--keep", type=Path, help="work here and keep it (default: a temporary folder)")
    a = ap.parse_args()
    work = a.keep or Path(tempfile.mkdtemp(prefix="shard-check-"))
    if work.exists() and a.keep:
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OCRBATCH_FAKE_BATCH_MS": a.batch_ms, "OCRBATCH_FAKE_PAGE_MS": "5",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    problems: list[str] = []

    def check(ok: bool, what: str) -> None:
        print(f"  [{'ok' if ok else 'FAILED'}] {what}")
        if not ok:
            problems.append(what)

    src, whole, out = work / "in", work / "whole", work / "out"
    pages = make_files(src, a.files)
    print(f"{a.files} files, {pages} pages in {src}")

    t0 = time.monotonic()
    reference = "fake" if a.engine == "fake-timed" else a.engine  # the same Markdown, without the waits
    r = subprocess.run(cli("convert", str(src), "-o", str(whole), "-e", reference, "-q"), env=env,
                       timeout=RUN_LIMIT_S)
    print(f"unsharded run ({reference}): exit {r.returncode}, {time.monotonic() - t0:.1f} s")
    check(r.returncode == 0, "the unsharded run converts every page")

    # each part's pages: the unsharded run's records that the documented rule (config.Shard) gives it
    share: dict[int, set[tuple[str, int]]] = {i: set() for i in range(1, PARTS + 1)}
    for rec in records(whole / "manifest.jsonl"):
        stem = natural_key(PurePosixPath(Path(rec["source"]).relative_to(src.resolve()).as_posix())).as_posix()
        share[next(i for i in share if Shard(i, PARTS).takes(stem))].add((rec["source"], rec["page"]))
    victim = max(share, key=lambda i: len(share[i]))
    goal = max(1, int(len(share[victim]) * KILL_AT))

    common = ("-e", a.engine, "-q", "--max-batch", "8")
    procs = {i: subprocess.Popen(cli("convert", str(src), "-o", str(out), "--shard", f"{i}/{PARTS}", *common),
                                 env=env) for i in range(1, PARTS + 1)}
    t0 = time.monotonic()
    manifests = {i: out / f"manifest.shard-{i}-of-{PARTS}.jsonl" for i in procs}
    while len(records(manifests[victim])) < goal and procs[victim].poll() is None:  # a condition: bounded by the
        time.sleep(POLL_S)                                                             # part's own end
    procs[victim].send_signal(signal.SIGKILL)
    procs[victim].wait()
    before = keys(records(manifests[victim]))
    print(f"part {victim}/{PARTS} ({len(share[victim])} pages) killed with SIGKILL after "
          f"{time.monotonic() - t0:.1f} s, "
          f"{len(before)} page(s) recorded")
    check(len(before) < len(share[victim]), "the kill landed before the part was done")
    codes = {i: p.wait(timeout=RUN_LIMIT_S) for i, p in procs.items() if i != victim}
    fleet_s = time.monotonic() - t0
    print(f"the other parts: exit codes {codes}, all ended {fleet_s:.1f} s after the start")
    check(all(c == 0 for c in codes.values()), "the other parts end with exit 0 beside the killed one")

    t1 = time.monotonic()
    r = subprocess.run(cli("convert", str(src), "-o", str(out), "--shard", f"{victim}/{PARTS}", *common, "--json"),
                       env=env, capture_output=True, text=True, timeout=RUN_LIMIT_S)
    summary = json.loads(r.stdout) if r.stdout.strip() else {}
    print(f"rerun of part {victim}: exit {r.returncode}, {time.monotonic() - t1:.1f} s, "
          f"{summary.get('pages_ok')} converted, {summary.get('pages_skipped')} skipped (done before the kill)")
    check(r.returncode == 0, "the killed part's rerun completes")
    final = records(manifests[victim])
    again = {(x["source"], x["page"]) for x in final if x["status"] == "ok"}
    check(not before & again, "no page finished before the kill is converted again")
    check(keys(final) == share[victim], "the rerun part holds exactly its pages")

    parts = {i: keys(records(m)) for i, m in manifests.items()}
    union = set().union(*parts.values())
    overlap = sum(len(parts[i] & parts[j]) for i in parts for j in parts if i < j)
    print("pages per part: " + ", ".join(f"{i}/{PARTS}: {len(p)}" for i, p in parts.items()))
    check(overlap == 0, "no page is in two parts")
    check(union == keys(records(whole / "manifest.jsonl")), "the parts' pages are the unsharded run's pages")
    t_whole, t_out = tree(whole), tree(out)
    same = t_whole == t_out
    check(same, f"the union of the parts is the unsharded run, file for file ({len(t_out)} files, "
                f"{sum(map(len, t_out.values()))} bytes)")
    if not same:
        diff = sorted(set(t_whole) ^ set(t_out)) + sorted(k for k in t_whole.keys() & t_out.keys()
                                                            if t_whole[k] != t_out[k])
        print("    differ: " + ", ".join(diff[:10]))
    leftovers = sorted(p.name for p in out.rglob(".*.tmp"))
    check(not leftovers, f"no temporary file left ({len(leftovers)})")

    t2 = time.monotonic()
    r = subprocess.run(cli("merge-manifests", str(out)), env=env, capture_output=True, text=True)
    print(f"merge-manifests: exit {r.returncode}, {time.monotonic() - t2:.2f} s: {r.stdout.strip()}")
    merged = {(x["source"], x["page"]): x["output"] for x in records(out / "manifest.jsonl")}
    ref = {(x["source"], x["page"]): x["output"] for x in records(whole / "manifest.jsonl")}
    check(r.returncode == 0 and merged == ref, "the merged manifest names the unsharded run's pages and outputs")
    check(not list(out.glob("manifest.shard-*")), "the parts' manifests are folded in")
    print(f"{'every check holds' if not problems else f'{len(problems)} check(s) failed'}; work folder {work}")
    if not a.keep and not problems:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
