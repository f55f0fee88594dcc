"""PP-OCR through onnxruntime directly: text detection (DB), line recognition (CTC), orientation.

The ONNX models come from the rapidocr wheel, so nothing is downloaded. Calling them ourselves, rather
than through `rapidocr.RapidOCR`, lets the engine schedule the work: detect one page while another's
lines are recognised, and recognise lines of several pages together, sorted by width.

Sessions run one intra-op thread each and are called from several threads at once (onnxruntime's
`run` is thread-safe and releases the GIL): on a small CPU, whole tasks in parallel use the cores
better than splitting each convolution across them. Imported only by the engine's `load`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import cv2
import numpy as np
import onnxruntime as ort

REC_HEIGHT = 48
REC_STRIDE = 8  # the recognizer emits one frame per 8 input columns
REC_SQUEEZE = 1.0  # horizontal scale of line crops relative to their aspect: fewer frames, less work
DET_MULTIPLE = 32


def model_dir() -> Path:
    import rapidocr

    return Path(rapidocr.__file__).resolve().parent / "models"


def session(path: Path, threads: int = 1) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.log_severity_level = 3
    opts.enable_cpu_mem_arena = False  # line widths vary call to call: an arena only grows (~10% of RSS)
    # Spinning threads burn CPU that the other workers (and other processes) need.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])


# -- detection ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class DetParams:
    max_side: int = 1280  # longest side fed to the detector: 150 dpi A4 text is still 2x the smallest it finds
    thresh: float = 0.3  # pixel probability that counts as text
    box_thresh: float = 0.5  # mean probability a box needs to be kept
    unclip_ratio: float = 1.6  # how far a box grows around the detected text kernel
    max_candidates: int = 1000


def detect(sess: ort.InferenceSession, bgr: np.ndarray, p: DetParams) -> tuple[np.ndarray, list[float]]:
    """Quadrilaterals (N, 4, 2; tl, tr, br, bl in page pixels) of the text lines in `bgr`, and scores."""
    h, w = bgr.shape[:2]
    scale = min(1.0, p.max_side / max(h, w))
    nh = max(DET_MULTIPLE, int(round(h * scale / DET_MULTIPLE)) * DET_MULTIPLE)
    nw = max(DET_MULTIPLE, int(round(w * scale / DET_MULTIPLE)) * DET_MULTIPLE)
    img = cv2.resize(bgr, (nw, nh), interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR)
    x = (img.astype(np.float32) * (2 / 255.0) - 1.0).transpose(2, 0, 1)[None]
    prob = sess.run(None, {sess.get_inputs()[0].name: x})[0][0, 0]
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


def _warp(bgr: np.ndarray, quad: np.ndarray, w: int, h: int) -> np.ndarray:
    w, h = max(1, w), max(1, h)
    dst = np.array([[0, 0], [w, 0], [w, h], [0, h]], np.float32)
    m = cv2.getPerspectiveTransform(quad.astype(np.float32), dst)
    return cv2.warpPerspective(bgr, m, (w, h), borderMode=cv2.BORDER_REPLICATE, flags=cv2.INTER_LINEAR)


# -- recognition --------------------------------------------------------------------------------

class Recognizer:
    """CTC line recognizer. `__call__` reads a batch of crops of equal height, any widths."""

    def __init__(self, sess: ort.InferenceSession) -> None:
        self.sess = sess
        self.input = sess.get_inputs()[0].name
        chars = sess.get_modelmeta().custom_metadata_map["character"].splitlines()
        self.chars = ["<blank>", *chars, " "]
        self.space = len(self.chars) - 1

    def __call__(self, crops: Sequence[np.ndarray]) -> list[tuple[str, float]]:
        width = max(c.shape[1] for c in crops)
        width = int(math.ceil(width / REC_STRIDE) * REC_STRIDE)
        x = np.zeros((len(crops), 3, REC_HEIGHT, width), np.float32)  # 0 is mid-grey after scaling
        for i, c in enumerate(crops):
            x[i, :, :, : c.shape[1]] = c.transpose(2, 0, 1).astype(np.float32) * (2 / 255.0) - 1.0
        probs = self.sess.run(None, {self.input: x})[0]
        idx = probs.argmax(axis=2)
        best = np.take_along_axis(probs, idx[:, :, None], axis=2)[:, :, 0]
        space = probs[:, :, self.space]
        return [self._decode(idx[i], best[i], space[i], int(math.ceil(c.shape[1] / REC_STRIDE)) + 1)
                for i, c in enumerate(crops)]

    SPACE_HINT = 0.1

    def _decode(self, idx: np.ndarray, best: np.ndarray, space: np.ndarray, frames: int) -> tuple[str, float]:
        """Greedy CTC decoding, plus a space where blank frames between two characters hide one.

        The recognizer often lets a blank win over a word space on widely set text (receipts, tables):
        if some frame between two characters still gives the space class a fair probability, the
        characters belong to two words.
        """
        idx, best, space = idx[:frames], best[:frames], space[:frames]
        keep = idx != 0
        keep[1:] &= idx[1:] != idx[:-1]
        pos = np.nonzero(keep)[0]
        if len(pos) == 0:
            return "", 0.0
        out: list[str] = []
        for n, f in enumerate(pos):
            ch = self.chars[idx[f]]
            if n and ch != " " and out[-1] != " ":
                a = pos[n - 1]
                if f - a >= 2 and space[a + 1:f].max() >= self.SPACE_HINT:
                    out.append(" ")
            out.append(ch)
        return "".join(out), float(best[keep].mean())


class OrientationClassifier:
    """Tells a line printed upside down (180) from an upright one (0)."""

    SHAPE = (48, 192)

    def __init__(self, sess: ort.InferenceSession) -> None:
        self.sess = sess
        self.input = sess.get_inputs()[0].name

    def upside_down(self, crops: Sequence[np.ndarray]) -> np.ndarray:
        """Probability, for each crop, that its text is upside down."""
        h, w = self.SHAPE
        x = np.zeros((len(crops), 3, h, w), np.float32)
        for i, c in enumerate(crops):
            nw = min(w, max(1, int(math.ceil(h * c.shape[1] / c.shape[0]))))
            r = cv2.resize(c, (nw, h)).astype(np.float32) * (2 / 255.0) - 1.0
            x[i, :, :, :nw] = r.transpose(2, 0, 1)
        return self.sess.run(None, {self.input: x})[0][:, 1]


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
