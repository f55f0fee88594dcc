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
def test_auto_is_openvino_where_it_computes_in_bfloat16():
    """auto takes OpenVINO on a CPU with AMX (bfloat16, 2-3x faster), onnxruntime elsewhere (OpenVINO's float32
    is no faster there)."""
    assert runtimes.pick("auto") == ("openvino" if runtimes.default_precision() == "bf16" else "onnxruntime")


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


def test_a_line_padded_to_a_wider_size_reads_the_same():
    """OpenVINO's lines are padded up to a quarter wider (size_for), with the line's own background: the
    recognizer reads the same text as from the line alone. (Padding with its own background rather than
    mid-grey is a corpus-wide figure, in engines/runtimes.py, not something one line shows.)"""
    im = Image.new("RGB", (760, 60), "white")
    ImageDraw.Draw(im).text((8, 10), "Total due by 31 March: 1,280.50 EUR", font=ImageFont.load_default(size=34),
                            fill="black")
    crop = cv2_crop(im)
    model = runtimes.OnnxRuntimeModel(ppocr.model_dir() / ppocr.MODELS["tiny"][1])
    dictionary = ppocr.model_dir() / ppocr.MODELS["tiny"][2]

    class Wider:  # the same model, its lines padded a quarter wider than they are
        def __call__(self, x):
            return model(x)

        @staticmethod
        def size_for(n: int, multiple: int) -> int:
            return (n + n // 4) // multiple * multiple + multiple

    assert ppocr.recognizer_input([crop], Wider.size_for).shape[3] >= 1.25 * crop.shape[1]
    exact = ppocr.Recognizer(model, dictionary)([crop])[0][0]
    assert exact == "Total due by 31 March: 1,280.50 EUR"
    assert ppocr.Recognizer(Wider(), dictionary)([crop])[0][0] == exact  # type: ignore[arg-type]


def cv2_crop(im: Image.Image) -> np.ndarray:
    bgr = np.ascontiguousarray(np.asarray(im)[:, :, ::-1])
    quad = np.array([[0, 0], [im.width, 0], [im.width, im.height], [0, im.height]], np.float32)
    return ppocr.crop_line(bgr, quad)


FIRST_CALLS_AT_ONCE = """
import threading, numpy as np
from ocrbatch.engines import ppocr, runtimes
path = ppocr.model_dir() / ppocr.MODELS["tiny"][1]
a, b = runtimes.load(path, "openvino", 2), runtimes.load(path, "openvino", 2)
start = threading.Barrier(4)
def first_call(model):
    start.wait()
    model(np.zeros((1, 3, 48, 64), np.float32))
threads = [threading.Thread(target=first_call, args=(m,)) for m in (a, b, a, b)]
[t.start() for t in threads]
[t.join() for t in threads]
"""


@needs_openvino
def test_threads_making_their_first_calls_at_once_never_hang():
    """The engine's threads all start reading at once. OpenVINO's binding, left to itself, could deadlock on
    the first calls made at the same moment (about one process in five, four first calls at once); each of
    these processes must end."""
    import subprocess

    for _ in range(10):
        r = subprocess.run([sys.executable, "-c", FIRST_CALLS_AT_ONCE], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr


def test_convert_runtime_flag_and_variable_as_a_user_runs_them(tmp_path):
    """`--runtime onnxruntime` (and OCRBATCH_RUNTIME) from the command line: the page is read, and the run's
    JSON summary says what ran the recognizers."""
    import json

    from conftest import run_cli

    letter().save(tmp_path / "letter.png")
    r = run_cli("convert", str(tmp_path / "letter.png"), "-o", str(tmp_path / "a"), "--json", "--runtime", "onnxruntime")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["engine"]["runtime"] == "onnxruntime f32"
    assert "harvest of apples" in " ".join(_words((tmp_path / "a" / "letter.md").read_text()))
    r = run_cli("convert", str(tmp_path / "letter.png"), "-o", str(tmp_path / "b"), "--json",
                env={"OCRBATCH_RUNTIME": "nonesuch"})
    assert r.returncode == 2 and "nonesuch" in r.stderr and len(r.stderr.strip().splitlines()) == 1
