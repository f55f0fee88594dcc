"""The recognizer's fine-tune: CTC on the detector's crops of drawn pages, from the shipped tiny weights.

    python -m ocrbatch.training WORKDIR [--lines N] [--seed S] ...     (make train-rec)

Data: shard i holds the labelled crops of PAGES_PER_SHARD pages drawn with the seed (seed, i); generator
processes draw shards into WORKDIR/data, at most AHEAD past the one the trainer is on (WORKDIR/data/.at), so
that on a machine of few cores they take its CPU only while the trainer needs data. The trainer takes shards in
order, each for PASSES passes mixed with crops of the shards before it, in batches of lines of similar width; so
a run is the same for a seed whatever the generators' speed, and a resumed run goes on where it stopped.

The model: the shipped tiny recognizer at `height` rows with the Latin head (graph.py). BatchNorm's statistics
stay as shipped; every other weight trains, at a learning rate that warms up and then falls by a cosine to a
tenth. With a teacher (`--teacher small`, `make train-reread`) the model also learns, with the weight `distil`,
to match the shipped recognizer's per-frame output at its own 48 rows: a reader that keeps what the shipped one
knows (its rarer characters too, which drawn pages hold few of) at fewer rows. The teacher may be another network
than the model's (small teaching tiny's): its output is cut to the model's characters, and `--distil-shift 1`
matches each of its frames with the model's nearest one a frame either way. Every EVAL_EVERY lines the CER on
held-out drawn pages (seed + 1000003, never trained on) is logged to WORKDIR/log.jsonl, the state is
checkpointed (WORKDIR/ckpt.pt, written atomically: a run killed at any moment resumes from the last one) and the
model exported (WORKDIR/rec.onnx and dict.txt). A CUDA GPU is used when there is one.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import pickle
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..atomic import atomic_write

PAGES_PER_SHARD = 8
AHEAD = 3  # shards the generators draw past the trainer's
EVAL_SEED = 1000003


@dataclass(frozen=True)
class TrainConfig:
    workdir: str
    lines: int = 60000  # training lines to see (with repeats), the run's length
    seed: int = 0
    height: int = 32
    width_scale: float = 1.25  # crops widened by this past their aspect (the engine's RecSpec.width_scale)
    base: str = "tiny"  # the shipped recognizer to start from
    init: str = ""  # or a recognizer this recipe made (its rec.onnx, dict.txt beside it): a second phase
    batch: int = 24
    # the most input columns (lines x the widest line's width) one batch holds, or 0 for no bound: wide lines then
    # come in smaller batches. Training memory goes with the columns (small at 32 rows: about 0.3 MB a column; 24
    # lines 3,200 wide took the machine's 24 GB).
    batch_columns: int = 0
    lr: float = 1e-4
    warmup: int = 2000  # lines over which the learning rate rises
    passes: int = 2  # each shard's crops are seen this many times, mixed with earlier ones
    replay: float = 0.3  # share of each batch drawn from earlier shards
    eval_every: int = 3000
    generators: int = 1
    threads: int = 2
    detector: str = "small"
    eval_pages: int = 8  # held-out pages scored at each checkpoint
    pages_per_shard: int = PAGES_PER_SHARD
    sources: str = "system"  # "system": the machine's fonts and texts; "builtin": Pillow's font, Python's docstrings
    # Distillation: a shipped recognizer (any whose dictionary holds the model's characters, at its own REC_HEIGHT
    # rows, its output cut to the model's classes) reads each batch too, and the model learns to match its
    # per-frame distribution (KL) with weight `distil`, the labels (CTC) with the rest. The teacher reads the batch
    # scaled to its rows, the width kept: both emit the same frames (at a width scale of REC_HEIGHT / height the
    # crops have the teacher's own aspect; at 1.25 and 32 rows it reads them a sixth narrower, as well).
    teacher: str = ""
    distil: float = 0.8
    # frames either way a teacher's frame may be matched by the student's nearest (per frame the least KL of the
    # 2 * distil_shift + 1 around it): a student of another network spikes a frame off where the teacher does,
    # and matching frame by frame would make it learn the teacher's timing instead of its reading
    distil_shift: int = 0


# -- the character set ----------------------------------------------------------------------------------

def head_classes(base_dict: list[str], chars: list[str]) -> list[int]:
    """The base model's classes a head of `chars` keeps (graph.adapt's `keep`): the blank, those characters, the
    space."""
    pos = {c: i for i, c in enumerate(base_dict)}
    return [0] + [pos[c] + 1 for c in chars] + [len(base_dict) + 1]


def charset(base_dict: list[str]) -> list[str]:
    """The Latin head's characters, in the base dictionary's order: every character of the base dictionary
    below the CJK blocks (Latin, Greek, digits, punctuation, symbols, arrows, maths), and the CJK look-alikes
    the models write for Western punctuation (rapid.clean_texts maps them back)."""
    from ..engines.rapid import _WESTERN

    lookalikes = {chr(k) if isinstance(k, int) else k for k in _WESTERN}
    return [c for c in base_dict if len(c) == 1 and (ord(c) < 0x2E80 or c in lookalikes)]


_TO_HEAD = {"⟨": "〈", "⟩": "〉"}  # characters the dictionary writes as a look-alike


def encode(text: str, index: dict[str, int]) -> list[int] | None:
    """The label's classes (1-based; the space is the last), or None when it has a character the head lacks."""
    out = []
    for ch in text:
        ch = _TO_HEAD.get(ch, ch)
        if ch not in index:
            return None
        out.append(index[ch])
    return out


# -- data ----------------------------------------------------------------------------------------------

def _shard_path(workdir: Path, i: int) -> Path:
    return workdir / "data" / f"shard-{i:06d}.pkl"


def make_shard(workdir: Path, seed: int, i: int, pages: int, height: int, detector: str,
               sources: str = "system", width_scale: float = 1.0) -> Path:
    """Draw `pages` pages with the seed (seed, i), cut them with the detector, and write the labelled crops."""
    path = _shard_path(workdir, i)
    if path.exists():
        return path
    from ..engines import ppocr, runtimes
    from . import crops, draw
    from .text import Corpus

    rng = random.Random(f"{seed}/{i}")
    draw.SYSTEM = sources == "system"
    corpus = Corpus.found(rng, system=draw.SYSTEM)
    models = ppocr.model_dir()
    det = runtimes.OnnxRuntimeModel(models / ppocr.MODELS[detector][0])
    params = ppocr.DetParams(unclip_ratio=ppocr.UNCLIP[detector])
    found = []
    for _ in range(pages):
        page = draw.draw_page(rng, corpus)
        found += [(c.image, c.text) for c in crops.page_crops(page, det, params, height, rng, width_scale)]
    atomic_write(path, pickle.dumps(found, protocol=pickle.HIGHEST_PROTOCOL))
    return path


def _generate(workdir: str, seed: int, start: int, step: int, stop: int, pages: int, height: int, detector: str,
              sources: str, width_scale: float) -> None:
    try:
        os.nice(5)
    except OSError:
        pass
    trainer = os.getppid()
    for i in range(start, stop, step):
        while i > _trainer_at(Path(workdir)) + AHEAD and os.getppid() == trainer:
            time.sleep(0.5)
        if os.getppid() != trainer:  # the trainer is gone (killed outright): draw no more
            return
        make_shard(Path(workdir), seed, i, pages, height, detector, sources, width_scale)


def _trainer_at(workdir: Path) -> int:
    """The shard the trainer is on (0 before it says)."""
    try:
        return int((workdir / "data" / ".at").read_text())
    except (OSError, ValueError):
        return 0


def _tell_generators(workdir: Path, shard: int) -> None:
    atomic_write(workdir / "data" / ".at", str(shard).encode())


def _wait_shard(workdir: Path, i: int, procs: list) -> list:
    path = _shard_path(workdir, i)
    while not path.exists():
        if procs and not any(p.is_alive() for p in procs) and not path.exists():
            raise RuntimeError(f"the data generators stopped before shard {i}")
        time.sleep(0.5)
    with open(path, "rb") as fh:
        return pickle.load(fh)


def batch_tensor(images: list[np.ndarray], height: int):
    """Crops (BGR uint8, `height` rows) as one input batch, each padded with its own last column."""
    import torch

    width = max(8, int(math.ceil(max(im.shape[1] for im in images) / 8) * 8))
    x = np.empty((len(images), 3, height, width), np.float32)
    for i, im in enumerate(images):
        w = im.shape[1]
        x[i, :, :, :w] = im.transpose(2, 0, 1).astype(np.float32) * (2 / 255.0) - 1.0
        x[i, :, :, w:] = x[i, :, :, w - 1:w]
    return torch.from_numpy(x)


def batches_of(items: list, lines: int, columns: int = 0) -> list[list]:
    """`items` (crop, text), in their order, cut into batches of at most `lines` lines and, when `columns` is not
    0, at most `columns` input columns (the lines times the widest one's width, which the others are padded to)."""
    out: list[list] = []
    cur: list = []
    widest = 0
    for it in items:
        w = max(widest, it[0].shape[1])
        if cur and (len(cur) == lines or (columns and (len(cur) + 1) * w > columns)):
            out.append(cur)
            cur, w = [], it[0].shape[1]
        cur.append(it)
        widest = w
    if cur:
        out.append(cur)
    return out


def greedy(logits, chars: list[str]) -> list[str]:
    idx = logits.argmax(-1).cpu().numpy()
    out = []
    for row in idx:
        keep = row != 0
        keep[1:] &= row[1:] != row[:-1]
        out.append("".join(chars[k] for k in row[keep]))
    return out


def cer(pairs: list[tuple[str, str]]) -> float:
    def dist(a: str, b: str) -> int:
        prev = list(range(len(b) + 1))
        for i, ca in enumerate(a, 1):
            cur = [i]
            for j, cb in enumerate(b, 1):
                cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
            prev = cur
        return prev[-1]

    errors = sum(dist(p, t) for p, t in pairs)
    return errors / max(1, sum(len(t) for _, t in pairs))


# -- the run -------------------------------------------------------------------------------------------

def run(cfg: TrainConfig, log=print) -> Path:
    import torch

    from ..engines import ppocr
    from . import graph

    work = Path(cfg.workdir)
    work.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(cfg.threads)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    models = ppocr.model_dir()
    if cfg.init:  # a model of this recipe's: its graph (height, head) and its characters as they are
        template = graph.load(Path(cfg.init))
        chars = graph.dictionary(Path(cfg.init).parent / "dict.txt")
        if template.graph.input[0].type.tensor_type.shape.dim[2].dim_value != cfg.height:
            raise ValueError(f"{cfg.init} is not a {cfg.height}-row model (--height)")
    else:
        base_dict = graph.dictionary(models / ppocr.MODELS[cfg.base][2])
        chars = charset(base_dict)
        keep = head_classes(base_dict, chars)
        template = graph.adapt(graph.load(models / ppocr.MODELS[cfg.base][1]), cfg.height, keep)
    index = {c: i + 1 for i, c in enumerate(chars)}
    index[" "] = len(chars) + 1
    decode_chars = ["", *chars, " "]
    model = graph.GraphModule(template).to(device)
    model.eval()  # BatchNorm's statistics stay as shipped; no dropout in this graph
    teacher = _teacher(cfg, models, chars, device) if cfg.teacher else None
    opt = torch.optim.AdamW([p for p in model.parameters()], lr=cfg.lr, weight_decay=0.0)
    ctc = torch.nn.CTCLoss(blank=0, zero_infinity=True)
    state = {"lines": 0, "shard": 0, "step": 0, "wall": 0.0}
    ckpt = work / "ckpt.pt"
    if ckpt.exists():
        saved = torch.load(ckpt, map_location=device, weights_only=False)
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["opt"])
        state = saved["state"]
        log(f"resumed at {state['lines']} lines (shard {state['shard']})")
    (work / "config.json").write_text(json.dumps(asdict(cfg), indent=1))
    (work / "dict.txt").write_text("\n".join(chars) + "\n", encoding="utf-8")
    (work / "rec.json").write_text(json.dumps({"height": cfg.height, "width_scale": cfg.width_scale}) + "\n")

    total_shards = state["shard"] + int(math.ceil((cfg.lines - state["lines"]) / max(1, 40 * cfg.pages_per_shard)
                                                  / cfg.passes)) + 4
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_generate, args=(str(work), cfg.seed, state["shard"] + k, cfg.generators,
                                                  total_shards * 4, cfg.pages_per_shard, cfg.height, cfg.detector,
                                                  cfg.sources, cfg.width_scale),
                         daemon=True)
             for k in range(cfg.generators)]
    eval_dir = work / "eval"
    evalset = []
    for i in range(max(1, cfg.eval_pages // cfg.pages_per_shard)):
        make_shard(eval_dir, cfg.seed + EVAL_SEED, i, cfg.pages_per_shard, cfg.height, cfg.detector, cfg.sources,
                   cfg.width_scale)
        evalset += _wait_shard(eval_dir, i, [])
    evalset = [(im, t) for im, t in evalset if encode(t, index) is not None]
    _tell_generators(work, state["shard"])
    for p in procs:
        p.start()

    def evaluate() -> float:
        pairs = []
        with torch.no_grad():
            for chunk in batches_of(sorted(evalset, key=lambda it: it[0].shape[1]), 32, cfg.batch_columns):
                out = model(batch_tensor([im for im, _ in chunk], cfg.height).to(device))
                pairs += list(zip(greedy(out, decode_chars), [t for _, t in chunk]))
        return cer(pairs)

    def checkpoint(eval_cer: float) -> None:
        tmp = work / ".ckpt.pt.tmp"
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "state": state}, tmp)
        tmp.replace(ckpt)
        graph.export(model, template, work / "rec.onnx")
        graph.export(model, template, work / "snapshots" / f"rec-{state['lines']:07d}.onnx")
        with open(work / "log.jsonl", "a") as fh:
            fh.write(json.dumps({**state, "eval_cer": round(eval_cer, 5)}) + "\n")
        log(f"lines {state['lines']:>7}  eval CER {eval_cer:.4f}  wall {state['wall']:.0f} s")

    if state["lines"] == 0:
        checkpoint(evaluate())
    seen: list = []  # crops of earlier shards, for replay
    rng = random.Random(f"{cfg.seed}/train/{state['shard']}")
    for i in range(max(0, state["shard"] - 4), state["shard"]):
        seen += _wait_shard(work, i, procs)
    next_eval = (state["lines"] // cfg.eval_every + 1) * cfg.eval_every
    try:
        while state["lines"] < cfg.lines:
            shard = [(im, t) for im, t in _wait_shard(work, state["shard"], procs) if encode(t, index) is not None]
            t0 = time.time()
            # this shard's crops, PASSES times, and a REPLAY share of earlier ones, in batches of lines of
            # similar width (little padding), the batches in random order
            items = shard * cfg.passes
            if seen:
                items += rng.sample(seen, min(len(seen), int(len(items) * cfg.replay / (1 - cfg.replay))))
            items.sort(key=lambda it: it[0].shape[1] * (1 + 0.1 * rng.random()))
            batches = batches_of(items, cfg.batch, cfg.batch_columns)
            rng.shuffle(batches)
            losses = []
            for b in batches:
                if state["lines"] >= cfg.lines:
                    break
                b = [(im, t) for im, t in b if len(t) <= im.shape[1] // 8 - 1]
                if not b:
                    continue
                x = batch_tensor([im for im, _ in b], cfg.height).to(device)
                labels = [encode(t, index) for _, t in b]
                lr = cfg.lr * min(1.0, (state["lines"] + 1) / cfg.warmup) * \
                    (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, state["lines"] / cfg.lines))))
                for g in opt.param_groups:
                    g["lr"] = lr
                logits = model(x)
                logp = logits.log_softmax(-1).permute(1, 0, 2)  # (T, N, C)
                T = logp.shape[0]
                loss = ctc(logp, torch.tensor([k for lab in labels for k in lab], dtype=torch.long),
                           torch.full((len(b),), T, dtype=torch.long),
                           torch.tensor([len(lab) for lab in labels], dtype=torch.long))
                if teacher is not None:
                    loss = (1 - cfg.distil) * loss + cfg.distil * distil_loss(logits, teacher(x), cfg.distil_shift)
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
                opt.step()
                losses.append(loss.item())
                state["lines"] += len(b)
                state["step"] += 1
                if state["step"] % 50 == 0:
                    log(f"  step {state['step']} lines {state['lines']} loss {loss.item():.3f} lr {lr:.2e}")
            state["wall"] += time.time() - t0
            state["loss"] = round(float(np.mean(losses)), 4) if losses else None
            seen = (seen + shard)[-20000:]
            state["shard"] += 1
            _tell_generators(work, state["shard"])
            if state["lines"] >= next_eval or state["lines"] >= cfg.lines:
                checkpoint(evaluate())
                next_eval += cfg.eval_every
    finally:
        for p in procs:
            p.terminate()
    return work / "rec.onnx"


def _teacher(cfg: TrainConfig, models: Path, chars: list[str], device: str):
    """The shipped recognizer `cfg.teacher` at its own rows with the model's classes: a function from a batch at
    the model's rows to the teacher's logits, the same frames (the width kept)."""
    import torch

    from ..engines import ppocr
    from . import graph

    base_dict = graph.dictionary(models / ppocr.MODELS[cfg.teacher][2])
    lacking = sorted(set(chars) - set(base_dict))
    if lacking:
        raise ValueError(f"--teacher {cfg.teacher} cannot write {len(lacking)} of the model's characters "
                         f"({''.join(lacking[:10])}...)")
    keep = head_classes(base_dict, chars)
    net = graph.GraphModule(graph.adapt(graph.load(models / ppocr.MODELS[cfg.teacher][1]), ppocr.REC_HEIGHT,
                                        keep)).to(device)
    net.eval()
    for p in net.parameters():
        p.requires_grad_(False)

    def read(x):
        with torch.no_grad():
            return net(torch.nn.functional.interpolate(x, size=(ppocr.REC_HEIGHT, x.shape[3]), mode="bilinear",
                                                       align_corners=False))
    return read


def distil_loss(student, teacher, shift: int = 0):
    """KL(teacher || student) per frame, over the classes, averaged over frames and lines; logits (N, T, C). With
    a shift, each teacher frame is compared with the student's frames up to `shift` either way (the edges
    repeated) and the least of those KLs counts."""
    import torch

    frames = min(student.shape[1], teacher.shape[1])
    s, t = student[:, :frames].log_softmax(-1), teacher[:, :frames].log_softmax(-1)
    if shift:
        s = torch.cat([s[:, :1].expand(-1, shift, -1), s, s[:, -1:].expand(-1, shift, -1)], 1)
    kl = torch.stack([(t.exp() * (t - s[:, d:d + frames])).sum(-1) for d in range(2 * shift + 1)])
    return kl.min(0).values.mean()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ocrbatch.training", description=__doc__.split("\n\n")[0])
    ap.add_argument("workdir")
    for f, v in asdict(TrainConfig(workdir="")).items():
        if f != "workdir":
            ap.add_argument(f"--{f.replace('_', '-')}", type=type(v), default=v)
    args = ap.parse_args(argv)
    cfg = TrainConfig(**vars(args))
    import signal
    import sys

    # a kill ends the run through its `finally`, which stops the generators (the checkpoint is already on disk)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    run(cfg, log=lambda s: print(s, flush=True))
    return 0
