"""What runs the embedded engine's models (engines/runtimes.py): OpenVINO where it is installed, onnxruntime
elsewhere, both reading a page alike; a runtime asked for but missing is one clear load error."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from ocrbatch.config import EngineOptions
from ocrbatch.engines import ppocr, runtimes
from ocrbatch.engines.rapid import RapidOcrEngine
from ocrbatch.errors import EngineLoadError
from ocrbatch.records import PageImage

needs_openvino = pytest.mark.skipif(not runtimes.installed("openvino"), reason="OpenVINO has no wheel here")
LINES = ["Invoice 2041 for the harvest of apples", "Total due by the end of March: 1,280.50",
         "Thank you for your custom and good day"]


def letter() -> Image.Image:
    im = Image.new("RGB", (1000, 1300), "white")  # a page size that is no multiple of the detector's stride
    d = ImageDraw.Draw(im)
    for i, line in enumerate(LINES):
        d.text((70, 120 + 70 * i), line, font=ImageFont.load_default(size=34), fill="black")
    return im


def _read(runtime: str) -> tuple[str, dict]:
    engine = RapidOcrEngine(EngineOptions(runtime=runtime, threads=2))
    engine.load("cpu")
    try:
        out = engine.infer([PageImage(ref=None, image=letter())])[0]  # type: ignore[arg-type]
        assert not isinstance(out, Exception), out
        return out.markdown, engine.device_facts()
    finally:
        engine.close()


def _words(md: str) -> list[str]:
    return " ".join(md.split()).lower().split()


@needs_openvino
def test_openvino_and_onnxruntime_read_a_page_alike():
    ov_md, ov_facts = _read("openvino")
    ort_md, ort_facts = _read("onnxruntime")
    assert ov_facts["runtime"].startswith("openvino ") and ort_facts["runtime"] == "onnxruntime f32"
    for line in LINES:  # every word of every line, on both
        assert " ".join(_words(line)) in " ".join(_words(ov_md)), ov_md
        assert " ".join(_words(line)) in " ".join(_words(ort_md)), ort_md


@needs_openvino
def test_auto_is_openvino_where_installed():
    assert runtimes.pick("auto") == "openvino"


def test_without_openvino_auto_falls_back_to_onnxruntime_and_asking_for_it_is_a_load_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "openvino", None)  # as on a machine where it is not installed
    assert runtimes.pick("auto") == "onnxruntime"
    engine = RapidOcrEngine(EngineOptions(runtime="openvino"))
    with pytest.raises(EngineLoadError, match="--runtime openvino: the openvino package is not installed"):
        engine.load("cpu")
    md, facts = _read("auto")
    assert facts["runtime"] == "onnxruntime f32" and "harvest of apples" in " ".join(_words(md))


@pytest.mark.parametrize("multiple", [8, 32])
def test_openvino_sizes_are_few_and_pad_little(multiple):
    """OpenVINO prepares the model anew for each input size it meets (time and memory kept for each): a
    line or page is padded to one of a few sizes per doubling, and by under 1/2**SHAPE_BITS."""
    sizes = {n: runtimes.OpenVinoModel.size_for(n, multiple) for n in range(1, 4097)}
    assert all(s >= n and s % multiple == 0 for n, s in sizes.items())
    assert all(s - n < multiple or s < n * (1 + 2 ** -runtimes.SHAPE_BITS) + multiple for n, s in sizes.items())
    over_256 = {s for n, s in sizes.items() if n > 256}
    assert len(over_256) <= 2 ** runtimes.SHAPE_BITS * 4 + 1  # 256..4096 is four doublings
    assert runtimes.OnnxRuntimeModel.size_for(1001, 8) == 1008  # onnxruntime: any size, the stride's multiple


@needs_openvino
def test_a_padded_page_is_detected_as_the_page_itself():
    """The detector's input is padded with the page's own edge and its output cut back: no line is found in
    the padding, and the boxes are where the page has them."""
    model = runtimes.load(ppocr.model_dir() / ppocr.MODELS["tiny"][0], "openvino", 1)
    bgr = np.ascontiguousarray(np.asarray(letter())[:, :, ::-1])
    quads, _ = ppocr.detect(model, bgr, ppocr.DetParams())
    assert len(quads) == len(LINES)
    assert quads[:, :, 0].max() < 900 and quads[:, :, 1].max() < 400  # the lines, not the padded margins
