"""The embedded engine's cascade (--model-size auto): the tiny recognizer reads every line, the small one reads
again the lines the tiny one is unsure of, and the page keeps the better reading. Real models, pages drawn here."""

from __future__ import annotations

import json

import pytest
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from ocrbatch.config import OPTION, EngineOptions
from ocrbatch.engines.rapid import RapidOcrEngine
from ocrbatch.records import PageImage

CLEAN = "A clean line of plain text to start"


def hard_page(text: str, size: int, blur: float, ink: int) -> Image.Image:
    """A clean line, then `text` small, grey and blurred."""
    im = Image.new("L", (760, 120), 235)
    d = ImageDraw.Draw(im)
    d.text((30, 20), CLEAN, font=ImageFont.load_default(size=24), fill=0)
    d.text((30, 70), text, font=ImageFont.load_default(size=size), fill=ink)
    return im.filter(ImageFilter.GaussianBlur(blur)).convert("RGB")


HARD_TEXT, HARD_DRAWN = "cl vs d: clam dam clown", dict(size=17, blur=1.3, ink=120)


@pytest.fixture(scope="module")
def engines():
    made = {}

    def engine(**options) -> RapidOcrEngine:
        key = tuple(sorted(options.items()))
        if key not in made:
            made[key] = RapidOcrEngine(EngineOptions(**options))
            made[key].load("cpu")
        return made[key]

    yield engine
    for e in made.values():
        e.close()


def _read(engine: RapidOcrEngine, *images: Image.Image):
    return engine.infer([PageImage(ref=None, image=im) for im in images])  # type: ignore[arg-type]


class Forced:
    """The engine's first recognizer, with its readings forced: a line it reads about as `readings` has a key
    (a few characters off still counts) it reads as that key's value, `(text, sureness of each character)`. A
    disagreement made here, so that no test depends on which way a model errs on which CPU."""

    def __init__(self, real, readings: dict[str, tuple[str, float]]) -> None:
        self.real, self.readings = real, readings

    def __getattr__(self, name):
        return getattr(self.real, name)

    def read(self, crops):
        import difflib

        from ocrbatch.engines.cascade import Reading

        out = []
        for r in self.real.read(crops):
            key = max(self.readings, key=lambda k: difflib.SequenceMatcher(None, k, r.text).ratio())
            if difflib.SequenceMatcher(None, key, r.text).ratio() >= 0.7:
                text, sure = self.readings[key]
                r = Reading(text, sure, (sure,) * len(text), r.frames)
            out.append(r)
        return out

    def __call__(self, crops):
        return [(r.text, r.score) for r in self.read(crops)]


PLAIN_TEXT = "Apples and pears, sold by weight"


def test_a_line_the_fast_model_is_unsure_of_is_read_again_and_the_better_reading_kept():
    page = hard_page(PLAIN_TEXT, size=24, blur=0, ink=0)
    engine = RapidOcrEngine(EngineOptions(model_size="auto"))
    engine.load("cpu")
    try:
        engine._rec = Forced(engine._rec, {CLEAN: (CLEAN, 1.0), PLAIN_TEXT: ("Apples and peas, sold by wight", 0.5)})
        forced_alone = engine._reread
        engine._reread = None  # first: no second reading, so the forced misreading is what the page keeps
        alone = _read(engine, page)[0]
        engine._reread = forced_alone
        cascade = _read(engine, page)[0]
    finally:
        engine.close()
    assert "Apples and peas, sold by wight" in alone.markdown  # the first recognizer's (forced) misreading...
    assert PLAIN_TEXT in cascade.markdown and "wight" not in cascade.markdown  # ...read again by small, kept
    assert CLEAN in cascade.markdown
    assert cascade.info["confidence"]["reread"] == 1  # only the unsure line was read again
    assert cascade.info["confidence"]["score"] > alone.info["confidence"]["score"]


def test_the_threshold_is_honoured_at_0_and_at_1(engines):
    page = hard_page(HARD_TEXT, **HARD_DRAWN)
    none = _read(engines(model_size="auto", reread_below=0.0), page)[0]
    every = _read(engines(model_size="auto", reread_below=1.0), page)[0]
    assert engines(model_size="auto", reread_below=0.0).device_facts()["reread_by"] is None  # not even loaded
    assert engines(model_size="auto", reread_below=1.0).device_facts()["reread_by"] == "small"
    assert none.info["confidence"]["reread"] == 0
    assert every.info["confidence"]["reread"] == every.info["confidence"]["lines"] == 2
    assert "reread" not in _read(engines(model_size="small"), page)[0].info["confidence"]  # no cascade, no count


def _reading(text: str, probs: list[float]):
    from ocrbatch.engines.cascade import Reading

    return Reading(text, sum(probs) / max(1, len(probs)), tuple(probs))


def test_at_0_no_line_is_read_again_and_at_1_every_line_even_a_sure_or_odd_one():
    from ocrbatch.engines.rapid import needs_second_reading

    sure = _reading("Plain words", [1.0] * 11)
    unsure = _reading("Plain words", [0.5] * 11)
    odd = _reading("Plain 漢字 words", [0.99] * 14)
    assert [needs_second_reading(r, 0.0) for r in (sure, unsure, odd)] == [False, False, False]
    assert [needs_second_reading(r, 1.0) for r in (sure, unsure, odd)] == [True, True, True]
    assert [needs_second_reading(r, 0.98) for r in (sure, unsure, odd)] == [False, True, True]


def test_one_doubtful_word_in_a_long_sure_line_is_enough_to_read_it_again():
    # Forty sure characters and a doubtful word of eight: the line's mean hides them (it is above the default
    # threshold), its weakest characters do not.
    from ocrbatch.engines.rapid import needs_second_reading

    below = EngineOptions().reread_below
    text = "The total amount due is 1,234.56 euros, paid by card"
    long_line = _reading(text, [0.999] * 40 + [0.93] * 8)
    assert long_line.score >= below
    assert needs_second_reading(long_line, below)
    clean = _reading(text, [0.999] * 47 + [0.93])
    assert not needs_second_reading(clean, below)  # one soft character in a long line: no second reading


def test_sureness_is_a_low_quantile_of_the_character_probabilities():
    from ocrbatch.engines.cascade import sureness

    probs = [1.0] * 4 + [0.5] + [1.0] * 5  # the doubtful character mid-line
    assert sureness(_reading("abcdefghij", probs), 0.0) == 0.5  # the least sure character
    assert sureness(_reading("abcdefghij", probs), 0.5) == 1.0  # the median
    assert abs(sureness(_reading("abcdefghij", probs), 0.1) - 0.95) < 1e-9  # between the two lowest
    assert sureness(_reading("", []), 0.1) == 0.0


def test_a_failure_in_the_second_model_fails_only_its_page(engines):
    engine = RapidOcrEngine(EngineOptions(model_size="auto", reread_below=1.0))
    engine.load("cpu")
    real = engine._reread

    class BreaksOnZebra:
        def read(self, crops):
            read = real.read(crops)
            if any("Zebra" in r.text for r in read):
                raise RuntimeError("the second recognizer broke")
            return read

    try:
        engine._reread = BreaksOnZebra()
        first = hard_page("Apples and pears", size=24, blur=0, ink=0)
        second = hard_page("Zebra crossing", size=24, blur=0, ink=0)
        outs = _read(engine, first, second)
    finally:
        engine.close()
    assert "Apples and pears" in outs[0].markdown and outs[0].info["confidence"]["reread"] == 2
    assert isinstance(outs[1], RuntimeError)


def test_model_size_and_threshold_are_one_row_each_with_variable_and_converter_keyword(tmp_path):
    from conftest import draw_page, manifest

    from ocrbatch import Converter
    from ocrbatch.errors import UsageError

    size, below = OPTION["model_size"], OPTION["reread_below"]
    assert size.choices == ("auto", "tiny", "small") and size.default == "auto"
    assert size.env == "OCRBATCH_MODEL_SIZE" and below.env == "OCRBATCH_REREAD_BELOW"
    assert EngineOptions().model_size == "auto" and EngineOptions().reread_below == below.default
    draw_page("Cascade option page").save(tmp_path / "page.png")
    out = tmp_path / "out"
    with Converter(reread_below=1.0) as conv:
        conv.convert(tmp_path / "page.png", out)
    row = manifest(out)[-1]
    # a rerun at another threshold reads the page again
    assert row["engine"].startswith("rapidocr/ppocrv6-auto") and row["engine"].endswith("@1")
    assert row["info"]["confidence"]["reread"] == row["info"]["confidence"]["lines"] >= 1
    with Converter.from_env({"OCRBATCH_REREAD_BELOW": "0"}) as conv:
        conv.convert(tmp_path / "page.png", out)
    assert manifest(out)[-1]["info"]["confidence"]["reread"] == 0
    with pytest.raises(UsageError, match="OCRBATCH_REREAD_BELOW='2': choose between 0 and 1"):
        Converter.from_env({"OCRBATCH_REREAD_BELOW": "2"})
    with pytest.raises(UsageError, match="--reread-below -0.5: choose between 0 and 1"):
        Converter(reread_below=-0.5)


def test_json_output_says_how_many_lines_were_read_again(tmp_path):
    from conftest import draw_page, run_cli

    draw_page("Json cascade page\nwith a second line").save(tmp_path / "page.png")
    r = run_cli("convert", str(tmp_path / "page.png"), "-o", str(tmp_path / "out"), "--format", "md,json",
                "--reread-below", "1")
    assert r.returncode == 0, r.stderr
    page = json.loads((tmp_path / "out" / "page.json").read_text())
    assert page["confidence"]["reread"] == page["confidence"]["lines"] == 2
