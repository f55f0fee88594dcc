"""The detector's distillation: the tiny detector taught the small one's probability maps on drawn pages.

    python -m ocrbatch.training.distil WORKDIR [--steps N] [--seed S] ...     (make train-det)

No labels: on each page the project draws (draw.py: columns, tables, records, receipts, scan defects), the small
detector (the teacher, run by onnxruntime) gives its per-pixel text probability, and the tiny detector (the
student: the shipped graph run by graph.py, every weight trainable; its BatchNorm is folded into the
convolutions) learns to give the same, by binary cross-entropy against the teacher's probability plus a dice
term on the pixels over the engine's threshold (DetParams.thresh), which weighs the thin gaps between lines and
columns as much as the text itself.

Each step takes CROPS crops of CROP pixels from one page (page i drawn with the seed (seed, i)), at the scale the
engine detects it at (ppocr.detect's max_side) times a factor in SCALES (the engine's second pass enlarges
small type), so a run is the same for a seed and a resumed run goes on where it stopped. Every EVAL_EVERY steps
the student's agreement with the teacher on held-out drawn pages (seed + EVAL_SEED, whole pages at the engine's
scale) is logged to WORKDIR/log.jsonl: the F1 of their text pixels and of the boxes the engine's
post-processing draws (a box matches at IoU ≥ BOX_IOU). The state is checkpointed atomically (WORKDIR/ckpt.pt)
and the model exported (WORKDIR/det.onnx, and a snapshot per evaluation). A CUDA GPU is used when there is one.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from pathlib import Path

import numpy as np

EVAL_SEED = 1000003
CROP = 512  # side of a training crop, detector pixels (a multiple of ppocr.DET_MULTIPLE): DistilConfig.crop; 0: pages
CROPS = 4  # crops per step, all of one page
SCALES = (0.7, 1.3)  # the crop's scale, times the engine's first-pass scale of the page (uniform in the log)
INK_TRIES = 6  # a crop is drawn again (up to this many times) while the teacher sees no text in it
BOX_IOU = 0.5


@dataclass(frozen=True)
class DistilConfig:
    workdir: str
    steps: int = 1500  # the run's length, in steps of CROPS crops
    seed: int = 0
    student: str = "tiny"
    teacher: str = "small"
    lr: float = 5e-5
    warmup: int = 50  # steps over which the learning rate rises
    dice: float = 1.0  # weight of the dice term beside the cross-entropy
    crop: int = CROP
    train_from: str = "Resize"  # only the weights of the nodes from the first of these on train (the top-down
    # path and the head; the backbone stays as shipped); "": every weight
    eval_every: int = 250
    eval_pages: int = 6
    threads: int = 2
    sources: str = "system"  # "system": the machine's fonts and texts; "builtin": Pillow's font, Python's docstrings


@lru_cache(maxsize=2)
def _sources(sources: str):
    from .text import Corpus

    return Corpus.found(random.Random(0), system=sources == "system")  # sorted lists: the same on every call


def _page(seed: int, i: int, sources: str):
    from . import draw

    rng = random.Random(f"{seed}/det/{i}")
    draw.SYSTEM = sources == "system"
    page = draw.draw_page(rng, replace(_sources(sources), rng=rng))
    bgr = np.ascontiguousarray(np.asarray(page.image)[:, :, ::-1])
    return rng, bgr


def _input(bgr: np.ndarray) -> np.ndarray:
    """The detector's input for a BGR image: the engine's normalisation (ppocr._detect_once), (3, H, W)."""
    return (bgr.astype(np.float32) * (2 / 255.0) - 1.0).transpose(2, 0, 1)


def _scaled(bgr: np.ndarray, scale: float) -> np.ndarray:
    import cv2

    from ..engines import ppocr

    h, w = bgr.shape[:2]
    m = ppocr.DET_MULTIPLE
    nh, nw = max(m, int(round(h * scale / m)) * m), max(m, int(round(w * scale / m)) * m)
    return cv2.resize(bgr, (nw, nh), interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR)


def crops(rng: random.Random, bgr: np.ndarray, teacher, n: int = CROPS,
          side: int = CROP) -> tuple[np.ndarray, np.ndarray]:
    """`n` crops of the page (inputs (n, 3, side, side)) and the teacher's probabilities for them (n, 1, side,
    side): the page at the engine's scale times a factor in SCALES, each crop placed at random where the teacher
    sees some text (else the last try). `side` 0: the whole page, as the engine detects it (one input)."""
    from ..engines import ppocr

    h, w = bgr.shape[:2]
    base = min(1.0, ppocr.DetParams().max_side / max(h, w))
    lo, hi = math.log(SCALES[0]), math.log(SCALES[1])
    scaled = _scaled(bgr, base * math.exp(rng.uniform(lo, hi)))
    if side <= 0:  # the page's own statistics (its margins, its blank space) in every attention pooling
        x = _input(scaled)[None]
        return x, teacher(x).astype(np.float32)
    sh, sw = scaled.shape[:2]
    if sh < side or sw < side:  # a short page: padded with its paper colour
        pad = np.empty((max(sh, side), max(sw, side), 3), np.uint8)
        pad[:] = np.median(scaled.reshape(-1, 3), axis=0).astype(np.uint8)
        pad[:sh, :sw] = scaled
        scaled, (sh, sw) = pad, pad.shape[:2]
    xs, ys = [], []
    for _ in range(n):
        for _ in range(INK_TRIES):
            y0, x0 = rng.randrange(sh - side + 1), rng.randrange(sw - side + 1)
            x = _input(scaled[y0:y0 + side, x0:x0 + side])[None]
            prob = teacher(x)
            if (prob > ppocr.DetParams().thresh).mean() > 0.01:
                break
        xs.append(x[0])
        ys.append(prob[0])
    return np.stack(xs), np.stack(ys).astype(np.float32)


def loss_fn(logits, target, dice_weight: float):
    """Cross-entropy against the teacher's probability, plus dice on the pixels over the engine's threshold."""
    import torch.nn.functional as F

    from ..engines import ppocr

    bce = F.binary_cross_entropy_with_logits(logits, target)
    if dice_weight <= 0:
        return bce
    prob = logits.sigmoid()
    hard = (target > ppocr.DetParams().thresh).float()
    inter = (prob * hard).sum()
    dice = 1 - (2 * inter + 1) / (prob.sum() + hard.sum() + 1)
    return bce + dice_weight * dice


def agreement(student, teacher, pages: list[np.ndarray]) -> dict[str, float]:
    """The student's agreement with the teacher on whole pages at the engine's scale: F1 of their text pixels
    (probability over DetParams.thresh) and of the line boxes the engine's post-processing draws from each."""
    from ..engines import ppocr

    params = ppocr.DetParams()
    tp = fp = fn = 0
    box_hit = box_s = box_t = 0
    for bgr in pages:
        h, w = bgr.shape[:2]
        img = _scaled(bgr, min(1.0, params.max_side / max(h, w)))
        x = _input(img)[None]
        ps, pt = student(x)[0, 0] > params.thresh, teacher(x)[0, 0] > params.thresh
        tp += int((ps & pt).sum())
        fp += int((ps & ~pt).sum())
        fn += int((~ps & pt).sum())
        qs, _ = ppocr.detect(student, bgr, params)
        qt, _ = ppocr.detect(teacher, bgr, params)
        box_s, box_t = box_s + len(qs), box_t + len(qt)
        box_hit += _matched(qs, qt)
    pixel = 2 * tp / max(1, 2 * tp + fp + fn)
    boxes = 2 * box_hit / max(1, box_s + box_t)
    return {"pixel_f1": round(pixel, 4), "box_f1": round(boxes, 4)}


def _matched(a: np.ndarray, b: np.ndarray) -> int:
    """Boxes of `a` with a box of `b` at IoU ≥ BOX_IOU (axis-aligned bounds of the quadrilaterals), each once."""
    def rect(q):
        return q[:, 0].min(), q[:, 1].min(), q[:, 0].max(), q[:, 1].max()

    free = [rect(q) for q in b]
    hits = 0
    for q in a:
        ax0, ay0, ax1, ay1 = rect(q)
        for k, (bx0, by0, bx1, by1) in enumerate(free):
            iw, ih = min(ax1, bx1) - max(ax0, bx0), min(ay1, by1) - max(ay0, by0)
            if iw <= 0 or ih <= 0:
                continue
            inter = iw * ih
            union = (ax1 - ax0) * (ay1 - ay0) + (bx1 - bx0) * (by1 - by0) - inter
            if inter / union >= BOX_IOU:
                hits += 1
                del free[k]
                break
    return hits


class _TorchDetector:
    """The student as the engine's detector is called: float32 (N, 3, H, W) in, probabilities out."""

    def __init__(self, module, device: str) -> None:
        self.module, self.device = module, device

    def __call__(self, x: np.ndarray) -> np.ndarray:
        import torch

        with torch.no_grad():
            return self.module(torch.from_numpy(x).to(self.device)).sigmoid().cpu().numpy()


def trainable(module, model, train_from: str) -> list:
    """The module's parameters that train: those the graph's nodes use from the first `train_from` node on (its
    input and beyond); the others are frozen (requires_grad off). "" or no such node: all of them."""
    nodes = list(model.graph.node)
    start = next((k for k, n in enumerate(nodes) if n.op_type == train_from), 0) if train_from else 0
    late = {i for n in nodes[start:] for i in n.input}
    keep = []
    for name, attr in module._names.items():
        p = getattr(module, attr)
        if isinstance(p, __import__("torch").nn.Parameter):
            p.requires_grad_(name in late)
            if name in late:
                keep.append(p)
    return keep


def run(cfg: DistilConfig, log=print) -> Path:
    import torch

    from ..engines import ppocr, runtimes
    from . import graph

    work = Path(cfg.workdir)
    work.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(cfg.threads)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    models = ppocr.model_dir()
    teacher = runtimes.OnnxRuntimeModel(models / ppocr.MODELS[cfg.teacher][0])
    template = graph.load(models / ppocr.MODELS[cfg.student][0])
    model = graph.GraphModule(template).to(device)
    model.eval()  # folded BatchNorm, no dropout: nothing differs between training and inference
    trained = trainable(model, template, cfg.train_from)
    opt = torch.optim.AdamW(trained, lr=cfg.lr, weight_decay=0.0)
    state = {"step": 0, "wall": 0.0}
    ckpt = work / "ckpt.pt"
    if ckpt.exists():
        saved = torch.load(ckpt, map_location=device, weights_only=False)
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["opt"])
        state = saved["state"]
        log(f"resumed at step {state['step']}")
    (work / "config.json").write_text(json.dumps(asdict(cfg), indent=1))
    evalset = [_page(cfg.seed + EVAL_SEED, i, cfg.sources)[1] for i in range(cfg.eval_pages)]
    student = _TorchDetector(model, device)

    def checkpoint() -> None:
        figures = agreement(student, teacher, evalset)
        tmp = work / ".ckpt.pt.tmp"
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "state": state}, tmp)
        tmp.replace(ckpt)
        graph.export(model, template, work / "det.onnx")
        graph.export(model, template, work / "snapshots" / f"det-{state['step']:06d}.onnx")
        with open(work / "log.jsonl", "a") as fh:
            fh.write(json.dumps({**state, **figures}) + "\n")
        log(f"step {state['step']:>6}  pixel F1 {figures['pixel_f1']:.4f}  box F1 {figures['box_f1']:.4f}  "
            f"wall {state['wall']:.0f} s")

    if state["step"] == 0:
        checkpoint()
    losses: list[float] = []
    while state["step"] < cfg.steps:
        t0 = time.time()
        rng, bgr = _page(cfg.seed, state["step"], cfg.sources)
        x, y = crops(rng, bgr, teacher, side=cfg.crop)
        lr = cfg.lr * min(1.0, (state["step"] + 1) / cfg.warmup) * \
            (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, state["step"] / cfg.steps))))
        for g in opt.param_groups:
            g["lr"] = lr
        logits = model(torch.from_numpy(x).to(device))
        loss = loss_fn(logits, torch.from_numpy(y).to(device), cfg.dice)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trained, 5.0)
        opt.step()
        losses.append(loss.item())
        state["step"] += 1
        state["wall"] += time.time() - t0
        if state["step"] % 25 == 0:
            state["loss"] = round(float(np.mean(losses)), 4)
            losses = []
            log(f"  step {state['step']} loss {state['loss']:.4f} lr {lr:.2e}")
        if state["step"] % cfg.eval_every == 0 or state["step"] >= cfg.steps:
            checkpoint()
    return work / "det.onnx"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ocrbatch.training.distil", description=__doc__.split("\n\n")[0])
    ap.add_argument("workdir")
    for f, v in asdict(DistilConfig(workdir="")).items():
        if f != "workdir":
            ap.add_argument(f"--{f.replace('_', '-')}", type=type(v), default=v)
    cfg = DistilConfig(**vars(ap.parse_args(argv)))
    run(cfg, log=lambda s: print(s, flush=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
