"""The embedded PP-OCR engine on pages drawn here with known structure (real OCR, a few seconds)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from ocrbatch.config import EngineOptions
from ocrbatch.engines.rapid import RapidOcrEngine, clean_texts
from ocrbatch.records import PageImage

LEFT = ["The left column starts right here", "and then it runs all the way down", "to its very own bottom line."]
RIGHT = ["Then the right column goes on", "with more of the same kind of text", "and so it ends the whole page."]


def _font(size: int):
    return ImageFont.load_default(size=size)


def article() -> Image.Image:
    im = Image.new("RGB", (1160, 520), "white")
    d = ImageDraw.Draw(im)
    d.text((250, 40), "Harvest Report", font=_font(56), fill="black")
    for i, (a, b) in enumerate(zip(LEFT, RIGHT)):
        d.text((60, 200 + 44 * i), a, font=_font(30), fill="black")
        d.text((620, 200 + 44 * i), b, font=_font(30), fill="black")
    return im


def table() -> Image.Image:
    rows = [("Fruit", "Kilos", "Price"), ("Apples", "120", "3.50"), ("Pears", "80", "4.20"),
            ("Plums", "45", "5.10")]
    im = Image.new("RGB", (900, 320), "white")
    d = ImageDraw.Draw(im)
    for r, cells in enumerate(rows):
        for c, text in enumerate(cells):
            d.text((80 + 280 * c, 40 + 60 * r), text, font=_font(30), fill="black")
    return im


def _page(im: Image.Image) -> PageImage:
    return PageImage(ref=None, image=im)  # type: ignore[arg-type] - the engine reads only the image


def _norm(md: str) -> str:
    return " ".join(md.replace("|", " ").split()).lower()


def test_heading_and_two_columns_in_reading_order(rapid):
    out = rapid.infer([_page(article())])[0]
    md = out.markdown
    assert out.info["path"] == "ocr"
    assert md.splitlines()[0].startswith(("# ", "## ")) and "harvest report" in md.splitlines()[0].lower()
    text = _norm(md)
    assert text.index("bottom line") < text.index("then the right column"), md
    assert text.index("the left column") < text.index("bottom line")


def test_table_becomes_a_pipe_table(rapid):
    md = rapid.infer([_page(table())])[0].markdown
    rows = [r for r in md.splitlines() if r.startswith("|")]
    assert len(rows) == 5, md  # header, rule, three rows
    assert rows[1].replace(" ", "") == "|---|---|---|"
    assert [c.strip().lower() for c in rows[2].strip("|").split("|")] == ["apples", "120", "3.50"]


def test_batch_of_pages_keeps_each_page_its_own_text(rapid):
    outs = rapid.infer([_page(table()), _page(article()), _page(Image.new("RGB", (300, 200), "white"))])
    assert "apples" in _norm(outs[0].markdown) and "harvest" not in _norm(outs[0].markdown)
    assert "harvest" in _norm(outs[1].markdown) and "apples" not in _norm(outs[1].markdown)
    assert outs[2].markdown == ""


def test_the_engine_types_its_confidence_and_the_manifest_keeps_the_same_figures(rapid):
    out = rapid.infer([_page(article())])[0]
    assert out.confidence is not None and out.confidence.method == "recognizer" and 0.5 < out.confidence.score <= 1
    assert out.info["confidence"] == out.confidence.as_dict()  # the manifest's info.confidence, unchanged


@pytest.mark.parametrize("turned, rotated", [(180, 180), (90, 90), (270, 270)])
def test_page_scanned_upside_down_or_sideways_reads_as_upright(rapid, turned, rotated):
    upright = rapid.infer([_page(article())])[0]
    assert "rotated" not in upright.info  # an upright page is read as it comes
    out = rapid.infer([_page(article().rotate(turned, expand=True))])[0]  # PIL turns anticlockwise
    assert out.info.get("rotated") == rotated  # degrees clockwise the engine turned it back
    assert out.markdown == upright.markdown


def test_space_hidden_behind_blank_frames_is_restored():
    from ocrbatch.engines.ppocr import Recognizer

    rec = Recognizer.__new__(Recognizer)
    rec.chars = ["<blank>", "a", "b", " "]
    rec.space = 3
    idx = np.array([1, 0, 0, 0, 2, 0])
    best = np.ones(6, np.float32)
    quiet = np.zeros(6, np.float32)
    assert rec._decode(idx, best, quiet, 6).text == "ab"
    hint = quiet.copy()
    hint[2] = 0.3  # the space class came close in the gap
    assert rec._decode(idx, best, hint, 6).text == "a b"


def test_no_space_is_made_up_beside_a_full_stop_in_file_names_and_addresses():
    # A full stop is about one frame wide: the few blank frames of its side bearings (wide in
    # typewriter type) are no word space, even where the space class comes close there. After a
    # sentence's stop the blank run is wider, and the space stays.
    from ocrbatch.engines.ppocr import Recognizer

    rec = Recognizer.__new__(Recognizer)
    rec.chars = ["<blank>", "e", "x", ".", "t", " "]
    rec.space = 5
    word = np.array([1, 0, 3, 0, 0, 4, 0])  # "e", 1 blank, ".", 2 blanks, "t"
    hint = np.full(7, 0.3, np.float32)
    assert rec._decode(word, np.ones(7, np.float32), hint, 7).text == "e.t"
    sentence = np.array([1, 0, 3, 0, 0, 0, 0, 4, 0])  # "e.", 4 blanks, "t"
    assert rec._decode(sentence, np.ones(9, np.float32), np.full(9, 0.3, np.float32), 9).text == "e. t"


def _spaced_line(words: list[str], tracking: int, word_gap: int) -> tuple[np.ndarray, list[float]]:
    """A line of capitals in Pillow's font, 48 rows (BGR): the ink of two letters of a word `tracking` pixels
    apart, of two words `word_gap` apart; and the column of each letter's middle."""
    font = _font(34)
    im = Image.new("RGB", (40 * sum(map(len, words)) + word_gap * len(words), 48), "white")
    d = ImageDraw.Draw(im)
    x, middles = 10, []
    for n, word in enumerate(words):
        x += word_gap if n else 0
        for ch in word:
            left, _, right, _ = font.getbbox(ch)
            d.text((x - left, 4), ch, font=font, fill="black")
            middles.append(x + (right - left) / 2)
            x += right - left + tracking
        x -= tracking
    return np.ascontiguousarray(np.asarray(im.crop((0, 0, x + 10, 48)))[:, :, ::-1]), middles


def _forced_reading(line: np.ndarray, middles: list[float], text: str) -> str:
    """What a recognizer reads of `line` when its model emits `text`'s letters at their `middles`, and in each
    gap marked in `text` a space: "~" the space class coming close (0.3, a hint), "_" emitted at 0.4 (unsure: the
    blank 0.35, a letter 0.25), "^" emitted at 0.95 (sure)."""
    from ocrbatch.engines.ppocr import REC_STRIDE, Recognizer

    letters = sorted({ch for ch in text if ch.isalpha()})
    classes = ["<blank>", *letters, " "]

    class Forced:
        @staticmethod
        def size_for(width: int, multiple: int) -> int:
            return -(-width // multiple) * multiple

        def __call__(self, x: np.ndarray) -> np.ndarray:
            probs = np.zeros((1, x.shape[3] // REC_STRIDE, len(classes)), np.float32)
            probs[0, :, 0] = 1.0
            frames = [int(m // REC_STRIDE) for m in middles]
            k = 0
            for n, ch in enumerate(text):
                if ch.isalpha():
                    probs[0, frames[k]] = 0.0
                    probs[0, frames[k], classes.index(ch)] = 1.0
                    k += 1
                    continue
                a, b = frames[k - 1], frames[k]
                if ch == "~":
                    probs[0, a + 1:b, -1], probs[0, a + 1:b, 0] = 0.3, 0.7
                elif ch == "_":
                    probs[0, (a + b) // 2, [-1, 0, 1]] = 0.4, 0.35, 0.25
                else:
                    probs[0, (a + b) // 2, -1], probs[0, (a + b) // 2, 0] = 0.95, 0.05
            return probs

    rec = Recognizer(Forced(), classes, height=48)
    return rec.read([line])[0].text


def test_a_space_the_model_doubts_inside_a_letter_spaced_word_goes_and_one_between_words_stays():
    # A till receipt's letter-spaced print: the recognizers split words at its wide letter gaps ("TOT AL").
    # The image shows no word gap there, and shows one between the words.
    line, middles = _spaced_line(["TOTAL", "DUE"], tracking=7, word_gap=24)
    assert _forced_reading(line, middles, "TOT~AL~DUE") == "TOTAL DUE"
    assert _forced_reading(line, middles, "TOT_AL_DUE") == "TOTAL DUE"
    # letters set wider still: a word gap of a third of a line height stays, though under 2.5 letter gaps
    line, middles = _spaced_line(["TOTAL", "DUE"], tracking=8, word_gap=12)
    assert _forced_reading(line, middles, "TOT~AL~DUE") == "TOTAL DUE"


def test_a_narrow_word_space_in_tightly_set_type_stays():
    # letters that all but touch, and a word gap under a fifth of a line height: well over the letters' own gaps
    line, middles = _spaced_line(["TOTAL", "DUE"], tracking=-2, word_gap=4)
    assert _forced_reading(line, middles, "TOTAL~DUE") == "TOTAL DUE"
    assert _forced_reading(line, middles, "TO~TAL~DUE") == "TOTAL DUE"


def test_a_space_the_model_is_sure_of_stays_whatever_the_image():
    # italic type and a monospaced "f t" leave little blank between words: a sure space is the model's to set
    line, middles = _spaced_line(["TOTAL", "DUE"], tracking=7, word_gap=24)
    assert _forced_reading(line, middles, "TOT^AL~DUE") == "TOT AL DUE"


def test_stray_cjk_output_is_dropped_on_a_latin_page():
    texts = ["TOTAL SALES (EXCLUDING GST) 37.50", "THANK YOU PLEASE COME AGAIN", "家家家家冰家家", "Tel（03）1234"]
    assert clean_texts(texts) == ["TOTAL SALES (EXCLUDING GST) 37.50", "THANK YOU PLEASE COME AGAIN", "",
                                  "Tel(03)1234"]
    chinese = ["发票号码", "合计金额", "谢谢"]
    assert clean_texts(chinese) == chinese


def test_angle_brackets_read_round_on_one_side_are_paired():
    # what the recognizer makes of a manual's metavariables: one side of ⟨arg⟩ comes out round
    texts = ["\\newcommand(cmd⟩{⟨definition)}", "r⟨token1)⟨token2⟩ and (x + y) < z (a > b)",
             "E{(tokens⟩}{⟨defaults)}."]
    assert clean_texts(texts) == ["\\newcommand⟨cmd⟩{⟨definition⟩}", "r⟨token1⟩⟨token2⟩ and (x + y) < z (a > b)",
                                  "E{⟨tokens⟩}{⟨defaults⟩}."]
    plain = ["See (a) and <b>, (c> d) stays as printed."]  # no angle bracket on the line: left alone
    assert clean_texts(plain) == plain


def test_a_page_that_fails_detection_fails_alone(rapid, monkeypatch):
    real = rapid._detect

    def flaky(page):
        if page.image.shape[1] == 333:
            raise RuntimeError("detector broke on this page")
        real(page)

    monkeypatch.setattr(rapid, "_detect", flaky)
    outs = rapid.infer([_page(table()), _page(Image.new("RGB", (333, 200), "white"))])
    assert "apples" in _norm(outs[0].markdown)
    assert isinstance(outs[1], RuntimeError)


def test_threads_option_sets_the_engines_parallel_tasks(tmp_path):
    from conftest import draw_page, run_cli
    import json

    draw_page("Threads test page").save(tmp_path / "page.png")
    r = run_cli("convert", str(tmp_path / "page.png"), "-o", str(tmp_path / "out"), "--threads", "1", "--json")
    summary = json.loads(r.stdout)
    assert summary["engine"]["threads"] == 1 and summary["pages_ok"] == 1
    assert "Threads test page" in (tmp_path / "out" / "page.md").read_text()


def test_model_size_is_part_of_the_engine_identity_and_checked(tmp_path):
    from conftest import draw_page, run_cli

    auto = RapidOcrEngine(EngineOptions()).identity()  # the default
    small = RapidOcrEngine(EngineOptions(model_size="small")).identity()
    tiny = RapidOcrEngine(EngineOptions(model_size="tiny")).identity()
    assert len({auto, small, tiny}) == 3 and "tiny" in tiny and "small" in small  # resume never mixes them
    draw_page("Model size page").save(tmp_path / "page.png")
    r = run_cli("convert", str(tmp_path / "page.png"), "-o", str(tmp_path / "out"), "--model-size", "huge")
    assert r.returncode == 2 and "--model-size" in r.stderr


def test_a_converter_takes_the_model_size_from_the_environment_and_resume_never_mixes_sizes(tmp_path):
    from conftest import draw_page, manifest

    from ocrbatch import Converter
    from ocrbatch.errors import UsageError

    draw_page("Model size page").save(tmp_path / "page.png")
    out = tmp_path / "out"
    with Converter.from_env({"OCRBATCH_MODEL_SIZE": "tiny", "OCRBATCH_KEEP_FURNITURE": "yes"}) as conv:
        summary = conv.convert(tmp_path / "page.png", out)
    assert summary.engine["models"].startswith("PP-OCRv6 tiny")
    assert re.fullmatch(r"rapidocr/ppocrv6-tiny(\+doc-[0-9a-f]{8})?\+small32@0\.987\+furniture", manifest(out)[-1]["engine"])
    with Converter(model_size="small") as conv:  # another size: the page is read again, not skipped
        summary = conv.convert(tmp_path / "page.png", out)
    assert summary.counts["ok"] == 1 and summary.counts.get("skipped", 0) == 0
    assert manifest(out)[-1]["engine"] == "rapidocr/ppocrv6-small"
    assert "Model size page" in (out / "page.md").read_text()
    with pytest.raises(UsageError, match="OCRBATCH_MODEL_SIZE='huge': choose auto, tiny or small"):
        Converter.from_env({"OCRBATCH_MODEL_SIZE": "huge"})


def test_the_engine_says_how_far_it_is_into_a_batch_as_it_reads_lines(rapid, monkeypatch):
    """The live panel's progress within a batch (RunnerStats.batch_done): pages detected, then lines read; it only
    grows, and there is none between batches."""
    shares: list[float | None] = []
    read = type(rapid)._recognize

    def recognize(self, states, chunk):
        out = read(self, states, chunk)
        shares.append(self.stats().batch_done)
        return out

    monkeypatch.setattr(type(rapid), "_recognize", recognize)
    outs = rapid.infer([_page(article()), _page(table())])
    assert all(not isinstance(o, Exception) for o in outs)
    assert len(shares) > 1 and all(s is not None and 0 < s <= 1 for s in shares), shares
    assert min(shares) < max(shares) == 1.0, shares  # (read from several threads: not in order)
    assert rapid.stats().batch_done is None


def test_a_page_reaches_the_models_in_blue_green_red_order_whatever_its_mode():
    """The models were trained on OpenCV's BGR pages: a PIL page of any mode is converted so."""
    from ocrbatch.engines.rapid import _bgr

    red = Image.new("RGB", (4, 3), (255, 0, 0))
    assert _bgr(red).shape == (3, 4, 3) and _bgr(red)[0, 0].tolist() == [0, 0, 255]
    for mode in ("L", "P", "RGBA", "CMYK", "1", "I;16"):
        page = Image.fromarray(np.arange(36, dtype=np.uint8).reshape(3, 4, 3) * 7, "RGB").convert(mode)
        assert np.array_equal(_bgr(page), np.asarray(page.convert("RGB"))[:, :, ::-1]), mode
