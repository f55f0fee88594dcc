"""The detector's own line crops of a drawn page, each labelled with the text drawn there.

The page goes through the engine's own steps (ppocr.detect, readable_scale, crop_line, split_at_gutters), so a
crop has the detector's margins, its skew and its neighbours' ascenders and descenders, as the recognizer sees
them when it runs. A detected box is labelled when it covers drawn units that lie on one row, each whole; their
texts, left to right, joined by a space, are its label (a table's row run together reads so). A box that
covers part of a unit, or units of two rows, is not used.

Crops are scaled to the recognizer's input height in one of the two ways the engine may make them: warped
straight to that height, or warped at 48 rows and shrunk (MIXED_RESIZE of them); then widened by the model's
width scale (more frames per character: at 32 rows a letter is two frames wide, too few for CTC to put a blank
between two like letters), jittered by WIDTH_JITTER.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import cv2
import numpy as np

from ..engines import ppocr
from .draw import Page

COVER = 0.5  # a unit's ink may stick out of a box by at most this share of its height at either end
OVERHANG = 1.5  # a box may run past its units by at most this many unit heights at either end
ROW_OVERLAP = 0.5  # a unit is in a box's row when their heights overlap by this share of the smaller
MIXED_RESIZE = 0.5
WIDTH_JITTER = 0.12  # crops are widened by the model's width scale times 1 ± this (the engine uses the scale itself)


@dataclass
class Crop:
    image: np.ndarray  # BGR uint8, `height` rows
    text: str


def page_crops(page: Page, det, params: ppocr.DetParams, height: int, rng: random.Random,
               width_scale: float = 1.0) -> list[Crop]:
    bgr = np.ascontiguousarray(np.asarray(page.image)[:, :, ::-1])
    quads, _ = ppocr.detect(det, bgr, params)
    scale = ppocr.readable_scale(quads, bgr.shape, params)
    if scale is not None:
        quads, _ = ppocr.detect(det, bgr, params, scale)
    if len(quads) == 0:
        return []
    crops48 = [ppocr.crop_line(bgr, q) for q in quads]
    _, quads = ppocr.split_at_gutters(crops48, quads)
    out = []
    for q in quads:
        text = label(q, page)
        if not text:
            continue
        if rng.random() < MIXED_RESIZE:
            c = ppocr.crop_line(bgr, q, 48)
            img = cv2.resize(c, (max(1, round(c.shape[1] * height / 48)), height), interpolation=cv2.INTER_AREA)
        else:
            img = ppocr.crop_line(bgr, q, height)
        if width_scale != 1.0:
            f = width_scale * (1 + rng.uniform(-WIDTH_JITTER, WIDTH_JITTER))
            img = cv2.resize(img, (max(1, round(img.shape[1] * f)), height), interpolation=cv2.INTER_LINEAR)
        if img.shape[1] < 4:
            continue
        out.append(Crop(img, text))
    return out


def label(quad: np.ndarray, page: Page) -> str | None:
    """The text drawn under the detected `quad`, or None when the box does not hold whole units of one row."""
    x0, y0 = float(quad[:, 0].min()), float(quad[:, 1].min())
    x1, y1 = float(quad[:, 0].max()), float(quad[:, 1].max())
    row = []
    for u in page.units:
        ux0, uy0, ux1, uy1 = u.box
        h = uy1 - uy0
        overlap_y = min(y1, uy1) - max(y0, uy0)
        if overlap_y <= 0 or min(x1, ux1) - max(x0, ux0) <= 0:
            continue
        if overlap_y < ROW_OVERLAP * min(h, y1 - y0):
            return None  # a unit of another row reaches well into the box
        if ux0 < x0 - COVER * h or ux1 > x1 + COVER * h:
            return None  # part of a unit only
        row.append(u)
    if not row:
        return None
    h = float(np.median([u.box[3] - u.box[1] for u in row]))
    if min(u.box[0] for u in row) > x0 + OVERHANG * h or max(u.box[2] for u in row) < x1 - OVERHANG * h:
        return None  # the box runs on over ink that is no unit (a rule, a bullet, a neighbour)
    tops = [u.box[1] for u in row]
    if max(tops) - min(tops) > 0.6 * h:
        return None
    return " ".join(u.text for u in sorted(row, key=lambda u: u.box[0]))
