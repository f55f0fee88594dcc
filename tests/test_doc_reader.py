"""The document recognizer trained here (ocrbatch/models/rec_doc): the default's first reader, fed crops at its
file's height and widened by its width scale; --script all gives way to tiny's full head; pages read with an
earlier version of the model are read again (the engine's identity names it)."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from ocrbatch.config import EngineOptions
from ocrbatch.engines import heads, ppocr, runtimes
from ocrbatch.engines.rapid import PROFILES, RapidOcrEngine, heads_for, other_reader


def crop(text: str, size: int = 30) -> np.ndarray:
    font = ImageFont.load_default(size=size)
    box = ImageDraw.Draw(Image.new("L", (1, 1))).textbbox((0, 0), text, font=font)
    im = Image.new("L", (box[2] + 24, box[3] + 14), 255)
    ImageDraw.Draw(im).text((12, 7), text, font=font, fill=0)
    return np.repeat(np.asarray(im)[:, :, None], 3, axis=2)


class Spy:
    """A recognizer model that notes the shape of each input it is given."""

    def __init__(self, model, seen: list) -> None:
        self.model, self.seen = model, seen
        self.size_for = model.size_for

    def __call__(self, x):
        self.seen.append(x.shape)
        return self.model(x)


def test_the_default_and_tiny_profiles_read_first_with_the_document_model():
    assert PROFILES["auto"].recognizer == "doc" and PROFILES["tiny"].recognizer == "doc"
    spec = ppocr.RECOGNIZERS["doc"]
    assert spec.latin_only and spec.model.is_file() and spec.dictionary.is_file()
    assert (spec.model.parent / "MODEL_CARD.md").is_file() and (spec.model.parent / "LICENSE").is_file()


def test_the_document_model_is_fed_its_files_height_and_crops_widened_by_its_width_scale(tmp_path):
    spec = ppocr.RECOGNIZERS["doc"]
    path, classes, height = heads.resolve(spec, folder=tmp_path)
    assert height == ppocr.input_height(path) == 32 and spec.width_scale == ppocr.DOC_WIDTH_SCALE > 1
    seen: list = []
    model = runtimes.OnnxRuntimeModel(path)
    rec = ppocr.Recognizer(Spy(model, seen), classes, height, "doc", spec.width_scale)  # type: ignore[arg-type]
    line = crop("Total due 1,234.56")
    rec.read([line])
    want = math.ceil(line.shape[1] * height / line.shape[0] * spec.width_scale)
    assert seen[0][2] == 32 and seen[0][3] == model.size_for(want, ppocr.REC_STRIDE)
    assert seen[0][3] > model.size_for(math.ceil(line.shape[1] * height / line.shape[0]), ppocr.REC_STRIDE)


def test_the_engine_reads_a_clean_line_with_it_and_script_all_takes_tinys_full_head():
    assert heads_for(PROFILES["auto"], "all", True) == ("tiny", "small")
    assert heads_for(PROFILES["auto"], "auto", True) == ("doc", "small-latin")
    assert heads_for(PROFILES["auto"], "latin", True)[0] == "doc"
    engine = RapidOcrEngine(EngineOptions(model_size="auto", runtime="onnxruntime"))
    engine.load("cpu")
    try:
        assert engine._rec.name == "doc" and engine._rec.width_scale == ppocr.DOC_WIDTH_SCALE
        assert engine._script_check  # a line of another script still goes to small's full head
        page = Image.new("RGB", (760, 90), "white")
        ImageDraw.Draw(page).text((20, 25), "Invoice 2041 total due 1,234.56", font=ImageFont.load_default(size=28),
                                  fill="black")
        from ocrbatch.records import PageImage

        out = engine.infer([PageImage(ref=None, image=page)])[0]  # type: ignore[arg-type]
    finally:
        engine.close()
    assert not isinstance(out, Exception)
    assert "1,234.56" in out.markdown and "Invoice" in out.markdown


def test_a_new_version_of_the_model_changes_the_engines_identity(tmp_path, monkeypatch):
    before = RapidOcrEngine(EngineOptions(model_size="auto")).identity()
    spec = ppocr.RECOGNIZERS["doc"]
    other = tmp_path / "rec.onnx"
    shutil.copy(spec.model, other)
    with open(other, "ab") as fh:
        fh.write(b"\0")  # another file: another digest
    monkeypatch.setitem(ppocr.RECOGNIZERS, "doc", ppocr.RecSpec(other, spec.dictionary, latin=True,
                                                                 width_scale=spec.width_scale, full="tiny"))
    ppocr.model_digest.cache_clear()
    try:
        after = RapidOcrEngine(EngineOptions(model_size="auto")).identity()
    finally:
        ppocr.model_digest.cache_clear()
    assert before != after and "+doc-" in before
    assert "+doc" not in RapidOcrEngine(EngineOptions(model_size="auto", script="all")).identity()


def test_the_faster_profiles_second_reader_is_small_at_32_rows_on_crops_as_wide_as_at_48():
    """The faster profile's second reader (--model-size tiny: small32): small's Latin head at 32 rows, fed crops
    widened by 48 / 32, so a line is as many pixels and CTC frames wide as at small's own 48 rows; lines of other
    scripts still go to small's full head, and the page's crops are cut at 32 rows, not 48. The default keeps
    small at 48 rows (docs/design.md: at its accuracy, small32 costs more)."""
    assert PROFILES["tiny"].reread == "small32" and PROFILES["auto"].reread == "small"
    assert other_reader(PROFILES["tiny"], "auto", True) == "small"
    assert heads_for(PROFILES["tiny"], "all", True) == ("tiny", "small")
    engine = RapidOcrEngine(EngineOptions(model_size="tiny", runtime="onnxruntime"))
    engine.load("cpu")
    try:
        rec = engine._reread
        assert rec.name == "small32" and rec.height == 32 and engine._crop_height == 32
        assert rec.width_scale == ppocr.REREAD_WIDTH_SCALE == 48 / 32
        seen: list = []
        model = rec.model
        rec.model = Spy(model, seen)
        line = ppocr.fit_height(crop("Total due 1,234.56"), 32)
        text = rec.read([line])[0].text
    finally:
        engine.close()
    assert seen[0][2] == 32
    assert seen[0][3] == model.size_for(math.ceil(line.shape[1] * 48 / 32), ppocr.REC_STRIDE)
    assert "1,234.56" in text
