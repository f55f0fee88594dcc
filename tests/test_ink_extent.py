"""The detector convolves only the part of the page that holds ink (ppocr.ink_extent, ppocr.det_window), at the
page's own scale and on the network's grid: the paper around the text is never convolved, and no line is lost or
moved by it. Drawn pages, the real detector."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from ocrbatch.engines import ppocr

W, H = 1240, 1754  # A4 at 150 dpi


def _bgr(im: Image.Image) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(im.convert("RGB"))[:, :, ::-1])


def _letter(ink="black", paper="white", footer="#b4b4b4") -> Image.Image:
    """A letter: a block of text in the middle, and a faint one-pixel-stroke footer near the bottom edge."""
    im = Image.new("RGB", (W, H), paper)
    d = ImageDraw.Draw(im)
    font = ImageFont.load_default(size=22)
    for i in range(12):
        d.text((300, 500 + 40 * i), f"line {i} of the letter, with a few words on it", font=font, fill=ink)
    d.text((1000, 1700), "page 3 of 7", font=ImageFont.load_default(size=12), fill=footer)
    return im


def test_the_extent_holds_the_text_and_a_faint_hairline_footer_and_leaves_the_margins_out():
    x0, y0, x1, y1 = ppocr.ink_extent(_bgr(_letter()), 48)
    # the footer (grey 180 on white, one-pixel strokes) is ink at its own contrast, not averaged away
    assert y1 >= 1700 + 8 and x1 >= 1000 + 60
    assert 250 <= x0 <= 300 and 450 <= y0 <= 500  # the margins above and to the left stay out
    assert (x1 - x0) * (y1 - y0) < 0.6 * W * H


def test_light_type_on_a_dark_page_counts_as_ink_and_a_blank_page_is_kept_whole():
    x0, y0, x1, y1 = ppocr.ink_extent(_bgr(_letter(ink="white", paper="#202020", footer="#a0a0a0")), 48)
    assert 250 <= x0 <= 300 and 450 <= y0 <= 500 and y1 >= 1708
    assert ppocr.ink_extent(_bgr(Image.new("RGB", (W, H), "white")), 48) == (0, 0, W, H)


def test_the_window_is_the_ink_and_its_pad_cut_on_the_networks_grid():
    page = _bgr(_letter())
    nw, nh = 992, 1280  # the page scaled for the detector (max_side 1280)
    x0, y0, x1, y1 = ppocr.ink_extent(page, 48)
    p = ppocr.DetParams()
    wx0, wy0, wx1, wy1 = ppocr.det_window(page, nw, nh, p)
    assert all(v % ppocr.DET_MULTIPLE == 0 for v in (wx0, wy0, wx1)) and wy1 == nh  # the footer is near the edge
    assert wx0 <= x0 * nw / W - p.ink_pad and wy0 <= y0 * nh / H - p.ink_pad
    assert wx1 >= x1 * nw / W + p.ink_pad
    assert (wx1 - wx0) * (wy1 - wy0) < 0.7 * nw * nh
    blank = _bgr(Image.new("RGB", (W, H), "white"))
    assert ppocr.det_window(blank, nw, nh, p) == (0, 0, nw, nh)


@pytest.fixture(scope="module")
def detector():
    return ppocr.OnnxRuntimeModel(ppocr.model_dir() / ppocr.MODELS["small"][0])


def test_the_detector_finds_the_same_lines_in_the_extent_as_on_the_whole_page(detector):
    page = _bgr(_letter())
    cropped, _ = ppocr.detect(detector, page, ppocr.DetParams())
    whole, _ = ppocr.detect(detector, page, ppocr.DetParams(ink_contrast=256))  # nothing counts: the whole page
    assert len(cropped) == len(whole) == 13  # twelve lines and the footer
    key = lambda q: (round(float(q[:, 1].mean()) / 10), float(q[:, 0].min()))  # noqa: E731
    for a, b in zip(sorted(cropped, key=key), sorted(whole, key=key)):
        assert np.abs(a - b).max() <= 4, (a, b)  # in page pixels: the same boxes, where the page has them
