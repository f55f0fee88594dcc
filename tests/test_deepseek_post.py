"""DeepSeek-OCR-2 output → Markdown and figures, on fixed strings; the crop count the batcher buckets by.

No model here: these are the rules applied to whatever the model writes.
"""

import io
from pathlib import PurePosixPath

import pytest
from PIL import Image, ImageDraw

from ocrbatch.engines.deepseek_ocr2.common import resolve_prompt
from ocrbatch.engines.deepseek_ocr2.inputs import Tiling
from ocrbatch.engines.deepseek_ocr2.post import figure_path, parse_regions, pixel_box, tidy, to_markdown
from ocrbatch.errors import UsageError

PAGE_MD = PurePosixPath("report/page-0003.md")


def page_with_figure() -> Image.Image:
    """A 1000×500 white page with a red block at pixels (100, 100)–(300, 300)."""
    im = Image.new("RGB", (1000, 500), "white")
    ImageDraw.Draw(im).rectangle((100, 100, 299, 299), fill=(255, 0, 0))
    return im


def test_figure_is_cropped_beside_the_page_and_linked_in_place():
    text = ("<|ref|>title<|/ref|><|det|>[[10, 10, 500, 60]]<|/det|>\n# Results\n\n"
            "<|ref|>image<|/ref|><|det|>[[100, 200, 300, 600]]<|/det|>\n"
            "<|ref|>text<|/ref|><|det|>[[0, 700, 999, 800]]<|/det|>\nThe red block above.")
    md, figures = to_markdown(text, page_with_figure(), PAGE_MD)
    assert md == "# Results\n\n![](images/page-0003-1.png)\n\nThe red block above.\n"
    assert [f.relpath for f in figures] == [PurePosixPath("report/images/page-0003-1.png")]
    crop = Image.open(io.BytesIO(figures[0].data))
    assert crop.format == "PNG"
    assert crop.size == (200, 200)  # 100/999..300/999 of 1000 px wide, 200/999..600/999 of 500 px high
    assert crop.convert("RGB").getpixel((100, 100)) == (255, 0, 0)


def test_several_boxes_and_figures_are_numbered_in_order():
    text = ("<|ref|>image<|/ref|><|det|>[[0, 0, 100, 100], [500, 500, 600, 600]]<|/det|>\ncaption\n"
            "<|ref|>image<|/ref|><|det|>[[800, 0, 999, 999]]<|/det|>")
    md, figures = to_markdown(text, page_with_figure(), PAGE_MD)
    names = [f.relpath.name for f in figures]
    assert names == ["page-0003-1.png", "page-0003-2.png", "page-0003-3.png"]
    assert md.index("page-0003-1.png") < md.index("page-0003-2.png") < md.index("caption") \
        < md.index("page-0003-3.png")


def test_single_image_input_puts_figures_in_an_images_folder_beside_it():
    assert figure_path(PurePosixPath("a/scan.md"), 2) == PurePosixPath("a/images/scan-2.png")
    # A page name as long as the file system allows: its figures' names are cut short with a hash, each its own.
    long = PurePosixPath("a/" + "ü" * 126 + ".md")  # 252 + 3 bytes
    names = [figure_path(long, k).name for k in (1, 2)]
    assert all(len(n.encode()) <= 255 and n.endswith(".png") for n in names) and names[0] != names[1]
    assert figure_path(long, 1).parent == PurePosixPath("a/images")
    md, figures = to_markdown("<|ref|>image<|/ref|><|det|>[[0,0,500,500]]<|/det|>", page_with_figure(),
                              PurePosixPath("scan.md"))
    assert md == "![](images/scan-1.png)\n"
    assert figures[0].relpath == PurePosixPath("images/scan-1.png")


def test_boxes_off_the_page_are_clamped_and_empty_ones_skipped():
    assert pixel_box((-50, -5, 2000, 999), 1000, 500) == (0, 0, 1000, 500)
    assert pixel_box((300, 100, 100, 200), 1000, 500) == (100, 50, 300, 100)  # corners given backwards
    assert pixel_box((10, 10, 10, 500), 1000, 500) is None
    md, figures = to_markdown("before <|ref|>image<|/ref|><|det|>[[5,5,5,5]]<|/det|> after", page_with_figure(),
                              PAGE_MD)
    assert figures == [] and md == "before  after\n"


def test_other_tags_are_dropped_and_their_text_kept():
    text = ("<|ref|>sub_title<|/ref|><|det|>[[1,2,3,4]]<|/det|>\n## Method\n"
            "<|ref|>table<|/ref|><|det|>[[1,2,3,4]]<|/det|>\n<table><tr><td>1</td></tr></table>\n"
            "stray <|grounding|>markers<|/ref|> and <|det|>[[9,9,9,9]]<|/det|>gone")
    md, figures = to_markdown(text, page_with_figure(), PAGE_MD)
    assert figures == []
    assert md == "## Method\n\n<table><tr><td>1</td></tr></table>\nstray markers and gone\n"
    assert [r.label for r in parse_regions(text)] == ["sub_title", "table"]


def test_a_stray_tag_does_not_swallow_the_text_after_it():
    text = "<|ref|>text<|/ref|>Keep this.\n<|ref|>text<|/ref|><|det|>[[1, 2, 3, 4]]<|/det|>\nAnd this."
    md, _ = to_markdown(text, page_with_figure(), PAGE_MD)
    assert md == "Keep this.\n\nAnd this.\n"
    md, _ = to_markdown("<|ref|>Keep this <|ref|>title<|/ref|> and this", page_with_figure(), PAGE_MD)
    assert md == "Keep this  and this\n"


def test_a_tag_cut_off_by_the_token_limit_is_removed():
    for tail in ("<|ref|>te", "<|ref|>text<|/ref|><|det|>[[12, 40", "<|ref|>image<|/ref|>"):
        md, figures = to_markdown("Last full line.\n" + tail, page_with_figure(), PAGE_MD)
        assert md == "Last full line.\n" and figures == []


def test_tokenizer_markers_latex_leftovers_and_blank_runs_are_tidied():
    text = "<bos>Title   \n\n\n\n\nx \\coloneqq y and y \\eqqcolon x\n\n\n<eos><pad><pad>"
    md, _ = to_markdown(text, page_with_figure(), PAGE_MD, specials=["<bos>", "<eos>", "<pad>"])
    assert md == "Title\n\nx := y and y =: x\n"
    assert tidy("\n\n") == ""
    assert tidy("a\r\nb") == "a\nb\n"


def test_prompts():
    assert resolve_prompt("markdown") == "<image>\n<|grounding|>Convert the document to markdown."
    assert resolve_prompt("free") == "<image>\nFree OCR."
    assert resolve_prompt("<image>\nParse the figure.") == "<image>\nParse the figure."
    with pytest.raises(UsageError, match="<image>"):
        resolve_prompt("Convert the document to markdown.")


@pytest.mark.parametrize("size, crops", [((700, 500), 0), ((768, 768), 0), ((1400, 700), 2), ((1500, 500), 3),
                                         ((1000, 1000), 4), ((1241, 1754), 6), ((932, 1973), 2)])
def test_crop_count_of_common_page_shapes(size, crops):
    assert Tiling().crops(*size) == crops


def test_crop_count_agrees_with_the_transformers_tiling():
    tiling = pytest.importorskip("transformers.models.deepseek_ocr2.image_processing_pil_deepseek_ocr2")
    t = Tiling()
    for w in range(200, 4001, 97):
        for h in range(200, 4001, 89):
            expected = 0
            if max(w, h) > t.tile:
                cols, rows = tiling.get_optimal_tiled_canvas((h, w), (t.tile, t.tile), t.min_crops, t.max_crops)
                expected = cols * rows
            assert t.crops(w, h) == expected, (w, h)


def test_tiling_is_read_from_the_checkpoint_folder(tmp_path):
    (tmp_path / "processor_config.json").write_text(
        '{"image_processor": {"tile_size": 640, "min_patches": 1, "max_patches": 9, "crop_to_patches": true}}')
    assert Tiling.from_folder(tmp_path) == Tiling(tile=640, min_crops=1, max_crops=9)
    assert Tiling.from_folder(tmp_path / "absent") == Tiling()
