"""The layout-model trial (layout/regions.py, layout/region_order.py): box decoding, and reading order from
regions on pages of lines made here. The model itself is not installed; these need no model file."""

import numpy as np

from ocrbatch.layout import lines_to_markdown
from ocrbatch.layout.region_order import regions_to_markdown
from ocrbatch.layout.regions import INPUT_H, INPUT_W, STRIDES, LayoutRegion, decode, nms
from ocrbatch.records import TextLine

W, H = 1240, 1754
LINE = 24  # line height in page pixels (150 dpi body text)


def column(words: str, x0: float, x1: float, y: float, n: int) -> list[TextLine]:
    return [TextLine(f"{words} {k}.", (x0, y + k * 30, x1, y + k * 30 + LINE)) for k in range(n)]


def text_region(lines: list[TextLine], kind: str = "text") -> LayoutRegion:
    x0 = min(l.box[0] for l in lines)
    y0 = min(l.box[1] for l in lines)
    x1 = max(l.box[2] for l in lines)
    y1 = max(l.box[3] for l in lines)
    return LayoutRegion((x0 + 4, y0 + 4, x1 - 4, y1 - 4), kind, 0.95)


def test_decode_turns_bin_distributions_into_boxes_around_each_anchor():
    outs = []
    for s in STRIDES:  # scores, then side distributions (8 bins); all-zero logits: each side 3.5 bins
        n = -(-INPUT_H // s) * -(-INPUT_W // s)
        outs.append(np.zeros((1, n, 10), np.float32))
    for s in STRIDES:
        n = -(-INPUT_H // s) * -(-INPUT_W // s)
        outs.append(np.zeros((1, n, 32), np.float32))
    boxes, scores = decode(outs)
    assert boxes.shape[0] == scores.shape[0] == sum(-(-INPUT_H // s) * -(-INPUT_W // s) for s in STRIDES)
    # first anchor of stride 8: centre (4, 4), each side 3.5 * 8 = 28 away
    np.testing.assert_allclose(boxes[0], [-24, -24, 32, 32], atol=1e-4)
    # second anchor of the row: centre (12, 4)
    np.testing.assert_allclose(boxes[1], [-16, -24, 40, 32], atol=1e-4)


def test_nms_keeps_the_best_of_overlapping_boxes_and_every_separate_one():
    boxes = np.array([[0, 0, 100, 100], [5, 5, 100, 100], [200, 0, 300, 100]], np.float32)
    assert nms(boxes, np.array([0.6, 0.9, 0.5]), 0.5) == [1, 2]


def test_sections_of_balanced_columns_are_read_section_by_section():
    """A multi-column section under a lone heading: left column, right column, then the next heading."""
    lines, regions = [], []
    y = 150
    for name in ("Alpha", "Beta"):
        head = [TextLine(f"{name} heading", (100, y, 400, y + LINE))]
        left = column(f"{name} left", 100, 600, y + 50, 6)
        right = column(f"{name} right", 640, 1140, y + 50, 6)
        lines += head + left + right
        regions += [text_region(head, "title"), text_region(left), text_region(right)]
        y += 50 + 6 * 30 + 60
    md = regions_to_markdown(lines, regions, W, H)
    order = [md.index(s) for s in ("Alpha heading", "Alpha left 5.", "Alpha right 0.", "Alpha right 5.",
                                   "Beta heading", "Beta left 0.", "Beta right 0.")]
    assert order == sorted(order), md


def test_only_a_region_the_model_calls_a_table_becomes_a_table():
    rows = [[TextLine(f"c{r}{c}", (100 + 300 * c, 200 + 40 * r, 200 + 300 * c, 200 + 40 * r + LINE))
             for c in range(3)] for r in range(5)]
    lines = [l for row in rows for l in row]
    as_text = regions_to_markdown(lines, [text_region(lines)], W, H)
    as_table = regions_to_markdown(lines, [text_region(lines, "table")], W, H)
    assert "|" not in as_text and "c00 c01 c02" in as_text
    assert "| c00 | c01 | c02 |" in as_table


def test_a_page_the_regions_do_not_cover_keeps_our_own_order():
    lines = column("Receipt line", 100, 600, 200, 10)
    stray = LayoutRegion((900, 900, 1000, 950), "figure", 0.9)
    assert regions_to_markdown(lines, [stray], W, H) == lines_to_markdown(lines, W, H)
