#!/usr/bin/env python3
"""Which lines should the cascade read again? An offline table of every detected line of the dev corpus and
the stress set: the tiny recognizer's text and its per-frame evidence, and the small recognizer's text.

    python scripts/reread_table.py build [--cache /tmp/reread.pkl]     # reads every line with both (minutes)
    python scripts/reread_table.py report [--cache /tmp/reread.pkl]    # signals: re-read share vs dissimilarity

For each way of telling an unsure line (a signal computed from the tiny recognizer's CTC output: the mean
character probability, the cascade's default before issue 26; a low quantile of them, ocrbatch/engines/cascade.py's
sureness; the least sure character; margins to the runner-up class; ...), and for shares of the lines' width
read again (the small recognizer's time goes with the width it reads), the report gives the dissimilarity left
to small alone (character edits between the kept reading and small's, over small's characters): a better
signal leaves less for the same width.
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
import zlib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))


def build(cache: Path, sets: list[str], keep_crops: bool = False, dev: Path | None = None) -> None:
    import tempfile

    import corpus_bench as bench
    from ocrbatch.config import EngineOptions
    from ocrbatch.engines import ppocr, rapid, registry

    pages = []
    if "dev" in sets:
        pages += [("dev", n, im) for n, im in bench.named_pages(dev or bench.DEFAULT_DEV, 150)]
    if "stress" in sets:
        work = Path(tempfile.mkdtemp(prefix="reread-"))
        pages += [("stress", n, im) for n, im in bench.stress_pages(work)]
    engine = registry.create("rapidocr", EngineOptions(model_size="auto", reread_below=1.0))
    engine.load("cpu")
    tiny, small = engine._rec, engine._reread
    rows = []
    t0 = time.perf_counter()
    for k, (kind, name, image) in enumerate(pages):
        state = rapid._Page(rapid._bgr(image))
        engine._detect(state)
        for j, crop in enumerate(state.crops):
            probs = tiny.model(ppocr.recognizer_input([crop], tiny.model.size_for, tiny.height,
                                                      tiny.width_scale))[0]
            frames = int(np.ceil(crop.shape[1] * tiny.height / crop.shape[0] * tiny.width_scale
                                 / ppocr.REC_STRIDE)) + 1
            probs = probs[:frames]
            idx = probs.argmax(axis=1)
            top2 = np.sort(probs, axis=1)[:, -2:]
            # the reading from these very probabilities (one call, not two)
            first = tiny._decode(idx, top2[:, 1], probs[:, tiny.space], frames)
            text, score = first.text, first.score
            stext, sscore = small([crop])[0]
            rows.append({"set": kind, "page": name, "line": j, "width": crop.shape[1], "tiny": text,
                         "tiny_score": score, "small": stext, "small_score": sscore, "idx": idx.astype(np.int32),
                         "best": top2[:, 1].astype(np.float32), "second": top2[:, 0].astype(np.float32),
                         "blank": probs[:, 0].astype(np.float32), "space": probs[:, tiny.space].astype(np.float32),
                         "reading": first, "reader": tiny.name,
                         "crop": crop if keep_crops else None})
        print(f"  {k + 1}/{len(pages)} pages, {len(rows)} lines ({time.perf_counter() - t0:.0f} s)",
              file=sys.stderr, flush=True)
        if k % 4 == 3:  # a partial table is there to report on while the build goes on
            cache.write_bytes(pickle.dumps(rows))
    engine.close()
    cache.write_bytes(pickle.dumps(rows))


def edits(a: str, b: str) -> int:
    if a == b:
        return 0
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
        prev = cur
    return prev[-1]


_WORDS: set[str] | None = None
WORD_LISTS = ("/usr/share/dict/words", "/usr/share/dict/french", "/usr/share/dict/ngerman",
              "/usr/share/dict/spanish", "/usr/share/dict/italian")  # measurement only: a system package's lists


def words() -> set[str]:
    global _WORDS
    if _WORDS is None:
        _WORDS = set()
        for path in WORD_LISTS:
            try:
                _WORDS |= {w.strip().lower() for w in open(path, encoding="utf-8", errors="ignore")}
            except OSError:
                pass
    return _WORDS


def shape(text: str) -> dict[str, float]:
    """The line's shape: its share of digits, whether it is short, and its share of words (3+ letters) outside the
    word lists (0 when it has none)."""
    import re

    chars = text.replace(" ", "")
    digits = sum(ch.isdigit() for ch in chars) / max(1, len(chars))
    tokens = [t.lower() for t in re.findall(r"[^\W\d_]{3,}", text)]
    oov = sum(t not in words() for t in tokens) / len(tokens) if tokens and words() else 0.0
    return {"digits": digits, "short": float(len(chars) < 6), "oov": oov}


def signals(r: dict) -> dict[str, float]:
    """Ways of summing up how sure the tiny recognizer was of a line; lower = less sure."""
    idx, best, second, blank = r["idx"], r["best"], r["second"], r["blank"]
    keep = idx != 0
    keep[1:] &= idx[1:] != idx[:-1]
    if not keep.any():
        return {k: 0.0 for k in ("q15 (default)", "q15, digits x0.99", "q15, short x0.99", "q15 - 0.02*oov",
                                 "oov only", "q15 margin", "mean", "min", "q10", "margin_min", "n_low90", "gap_min",
                                 "prod", "frame_err", "char_err")}
    emitted = best[keep]
    # a character class's probability wherever the frame's winner is blank: a missed character
    nonblank = np.where(idx == 0, 1.0 - blank, 0.0)
    # the least sure frame anywhere: the winner's margin over the runner-up (blank included)
    margin = best - second
    from ocrbatch.engines.cascade import sureness

    form = shape(r["tiny"])
    q15 = sureness(r["reading"]) if "reading" in r else float(np.quantile(emitted, 0.15))
    return {
        "q15 (default)": q15,
        # the line's shape: digit-heavy and short lines held to a stricter bar (their errors cost whole fields)
        "q15, digits x0.99": q15 * (0.99 if form["digits"] > 0.3 else 1.0),
        "q15, short x0.99": q15 * (0.99 if form["short"] else 1.0),
        # words outside the word lists: each one lowers the bar
        "q15 - 0.02*oov": q15 - 0.02 * form["oov"],
        "oov only": -form["oov"],
        "q15 margin": float(np.quantile(margin[keep], 0.15)),
        "mean": float(emitted.mean()),
        "min": float(emitted.min()),
        "q10": float(np.quantile(emitted, 0.1)),
        "margin_min": float(margin.min()),
        "n_low90": -float((emitted < 0.9).sum()),
        "gap_min": float(1.0 - nonblank.max()),
        "prod": float(np.exp(np.log(np.maximum(emitted, 1e-6)).sum())),
        "frame_err": -float((1.0 - best).sum() / len(best)),
        "char_err": -float((1.0 - emitted).sum() / len(best)),
    }


def report(cache: Path) -> None:
    from ocrbatch.engines.rapid import _odd, other_script

    rows = pickle.loads(cache.read_bytes())
    for r in rows:
        r["sig"] = signals(r)
        # what the cascade reads again whatever the sureness: odd symbols, and (a Latin head's) the script check
        r["odd"] = _odd(r["tiny"]) or ("reading" in r and r.get("reader", "").endswith("-latin")
                                       and other_script(r["reading"]))
        r["e_tiny"] = edits(r["tiny"], r["small"])
    n = len(rows)
    total = sum(len(r["small"]) for r in rows)
    diff = [r for r in rows if r["e_tiny"]]
    print(f"{n} lines, {len(diff)} where tiny differs from small; tiny alone dissimilarity "
          f"{sum(r['e_tiny'] for r in rows) / total:.4f}; odd lines {sum(r['odd'] for r in rows)}")
    weights = np.array([r["width"] for r in rows], float)  # the second recognizer's cost goes with width
    odd = np.array([r["odd"] for r in rows])
    e = np.array([r["e_tiny"] for r in rows], float)
    sets = np.array([r["set"] for r in rows])
    per_set = {k: sum(len(r["small"]) for r in rows if r["set"] == k) for k in sorted(set(sets))}
    print(f"the script check and odd symbols alone send {odd.mean():.3f} of the lines "
          f"({weights[odd].sum() / weights.sum():.3f} of the width)")
    for name in rows[0]["sig"]:
        vals = np.array([r["sig"][name] for r in rows])
        order = np.argsort(vals, kind="stable")
        cost = np.cumsum(weights[order]) / weights.sum()
        print(f"\n{name}: share of line width re-read -> dissimilarity left (threshold, share of lines)")
        for share in (0.10, 0.15, 0.20, 0.25, 0.30, 0.37):
            k = int(np.searchsorted(cost, share))
            t = vals[order[min(k, len(order) - 1)]]
            sel = (vals < t) | odd
            left = "  ".join(f"{k} {e[~sel & (sets == k)].sum() / max(1, n):.4f}" for k, n in per_set.items())
            print(f"  width {weights[sel].sum() / weights.sum():.3f} left {e[~sel].sum() / total:.4f} ({left})"
                  f"   (t={t:.4f}, lines {sel.mean():.3f})")
    from ocrbatch.config import OPTION

    below = OPTION["reread_below"].default
    cur = np.array([r["sig"]["q15 (default)"] < below or r["odd"] for r in rows])
    left = "  ".join(f"{k} {e[~cur & (sets == k)].sum() / max(1, n):.4f}" for k, n in per_set.items())
    print(f"\ndefault (sureness < {below} or odd): width {weights[cur].sum() / weights.sum():.3f} "
          f"lines {cur.mean():.3f}, left {e[~cur].sum() / total:.4f} ({left})")
    headroom(rows, weights, e, total)


SHARES = (0.10, 0.12, 0.15, 0.18, 0.21)  # shares of the lines' width read again, for headroom()
FOLDS = 5  # headroom(): pages in this many groups; each group's lines are scored by a fit on the others


def headroom(rows: list[dict], weights: np.ndarray, e: np.ndarray, total: int) -> None:
    """What a better signal could win: the dissimilarity left at a few shares of the width read again by the
    default signal, by a perfect one (the lines where the first reading differs from small's, widest edits
    first), and by a logistic regression of every signal above plus the line's length, width and share of digits,
    fitted to tell the lines that differ, each page scored by a fit on other pages (FOLDS groups), its lines ranked
    by that probability or by it per pixel of width."""
    names = list(rows[0]["sig"])
    x = np.array([[r["sig"][k] for k in names] + [np.log1p(len(r["tiny"])), np.log(r["width"]),
                                                  shape(r["tiny"])["digits"]] for r in rows])
    x = np.column_stack([(x - x.mean(0)) / (x.std(0) + 1e-9), np.ones(len(x))])
    y = (e > 0).astype(float)
    group = np.array([zlib.crc32(r["page"].encode()) % FOLDS for r in rows])
    learned = np.zeros(len(rows))
    for g in range(FOLDS):
        fit, b = group != g, np.zeros(x.shape[1])
        for _ in range(300):  # gradient descent on the logistic loss, a little L2
            p = 1 / (1 + np.exp(-x[fit] @ b))
            b -= 0.5 * (x[fit].T @ (p - y[fit]) / fit.sum() + 1e-3 * b)
        learned[~fit] = x[~fit] @ b
    print("\nheadroom: share of width re-read -> dissimilarity left")
    for label, need in (("default signal", -np.array([r["sig"]["q15 (default)"] for r in rows])),
                        ("learned (by page)", learned), ("learned, per width", 1 / (1 + np.exp(-learned)) / weights),
                        ("perfect", e / weights)):
        order = np.argsort(-need, kind="stable")
        cost = np.cumsum(weights[order]) / weights.sum()
        cells = []
        for share in SHARES:
            sel = np.zeros(len(rows), bool)
            sel[order[:int(np.searchsorted(cost, share))]] = True
            cells.append(f"{share:.2f} {e[~sel].sum() / total:.4f}")
        print(f"  {label:18s} " + "   ".join(cells))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("build", "report"))
    ap.add_argument("--cache", type=Path, default=Path("/tmp/reread.pkl"))
    ap.add_argument("--sets", default="dev,stress")
    ap.add_argument("--dev", type=Path, help="the dev corpus (default: ../shared/bench/dev)")
    ap.add_argument("--crops", action="store_true", help="keep each line's crop in the table (about 400 MB)")
    a = ap.parse_args(argv)
    if a.what == "build":
        build(a.cache, a.sets.split(","), a.crops, a.dev)
    else:
        report(a.cache)
    return 0


if __name__ == "__main__":
    sys.exit(main())
