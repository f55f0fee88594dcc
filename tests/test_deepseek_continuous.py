"""Continuous decoding (engines/deepseek_ocr2/continuous.py) on a tiny random DeepSeek-OCR-2: every page's greedy
tokens equal a single-page `generate` of it, token for token, whatever joins or leaves the batch around it.

The checkpoint never emits its end token by itself; a test-only row hook ends each page at the step chosen
for it, so that lengths vary (a page without a chosen step loops to the token limit and is retried)."""

from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "DeepseekOcr2ForConditionalGeneration"):
    pytest.skip("transformers has no DeepSeek-OCR-2 model", allow_module_level=True)

from conftest import draw_page  # noqa: E402
from ocrbatch.config import EngineOptions  # noqa: E402
from ocrbatch.engines.base import Decoder  # noqa: E402
from ocrbatch.engines.deepseek_ocr2.continuous import banned_per_row  # noqa: E402
from ocrbatch.engines.deepseek_ocr2.common import GUARD, RETRY_GUARD  # noqa: E402
from ocrbatch.engines.deepseek_ocr2.engine import DeepseekOcr2Engine  # noqa: E402
from ocrbatch.engines.deepseek_ocr2.ngram_guard import NgramGuard  # noqa: E402
from tiny_deepseek import build  # noqa: E402
from test_deepseek_ocr2 import page_image  # noqa: E402

# 0, 2, 3, 6, 0 and 2 crops
SIZES = [(700, 500), (1400, 700), (1500, 500), (620, 877), (500, 500), (1400, 720)]


@pytest.fixture(scope="module")
def never_ends(tmp_path_factory):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield build(tmp_path_factory.mktemp("continuous") / "never-ends", never_ends=True)
    torch.set_num_threads(threads)


class EndAt:
    """Ends the page named `name` after `steps[name]` tokens; pages it does not name never end."""

    def __init__(self, steps: dict[str, int], end_id: int) -> None:
        self.steps, self.end_id = steps, end_id

    def __call__(self, pages, steps, scores):
        for i, (page, step) in enumerate(zip(pages, steps)):
            if self.steps.get(page.ref.source.path.name) == step:
                scores[i] = float("-inf")
                scores[i, self.end_id] = 0.0
        return scores


def pages_of(folder: Path, sizes=SIZES):
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i, size in enumerate(sizes):
        path = folder / f"p{i}.png"
        draw_page(f"Page {i}\n" + "words " * (3 + i), size=size).save(path)
        out.append(page_image(path))
    return out


def engine_for(model, hook_steps, max_new=14, schedule="continuous"):
    engine = DeepseekOcr2Engine(EngineOptions(model=str(model), max_new_tokens=max_new, schedule=schedule))
    engine.load("cpu")
    engine.row_hook = EndAt(hook_steps, engine._end_ids[0])
    return engine


def generate_alone(engine, page, guard):
    from ocrbatch.engines.deepseek_ocr2.inputs import unstage

    engine.stage([page])
    try:
        return engine._generate([page], guard)[0]
    finally:
        unstage([page.prepared])


def test_rows_that_join_and_leave_get_the_tokens_of_a_single_page_generate(never_ends, tmp_path):
    # p4 has no end step: it loops to the limit, joins again with the retry guard and loops again.
    ends = {"p0.png": 3, "p1.png": 11, "p2.png": 0, "p3.png": 7, "p5.png": 5}
    engine = engine_for(never_ends, ends)
    pages = [engine.prepare(p) for p in pages_of(tmp_path)]
    assert [p.prepared.crops for p in pages] == [0, 2, 3, 6, 0, 2]
    try:
        alone = {}
        for page in pages:
            name = page.ref.source.path.name
            alone[name] = generate_alone(engine, page, RETRY_GUARD if name == "p4.png" else GUARD)
        # Pages joining at steps 0, 2 and 6 with 3 rows; then all six at once with 2 rows: one prefill for
        # the six, four of them waiting prefilled while two decode (and p4's retry prefilled on its own).
        for rows, joins in ((3, {0: pages[:2], 2: pages[2:4], 6: pages[4:]}), (2, {0: pages})):
            decoder = engine.decoder()
            assert isinstance(decoder, Decoder)  # the whole protocol pipeline/streaming.py drives
            got, widths = {}, []
            step = 0
            while step < 200 and (joins or not decoder.idle()):
                if step in joins:
                    decoder.add(joins.pop(step))
                for page, gen, info in decoder.step(rows=rows):
                    got[page.ref.source.path.name] = (gen, info)
                widths.append(decoder.active)
                step += 1
            assert decoder.idle() and len(got) == 6
            assert max(widths) == rows  # never more rows than asked for
            for name, (gen, info) in got.items():
                assert (gen.tokens, gen.ended) == (alone[name].tokens, alone[name].ended), (rows, name)
                # each token's log-probability, as the page alone gets it (a confidence independent of its batch)
                assert len(gen.logprobs) == len(gen.tokens) and all(p <= 0 for p in gen.logprobs)
                assert gen.logprobs == pytest.approx(alone[name].logprobs, abs=1e-3), (rows, name)
                assert gen.guard_fired == alone[name].guard_fired, (rows, name)
                if name in ends:
                    assert gen.ended and len(gen.tokens) == ends[name]
            assert got["p4.png"][1].get("retried") and not got["p4.png"][0].ended
            assert len(got["p4.png"][0].tokens) == 14
            assert got["p5.png"][1]["joined_step"] > 0  # prefilled, then waited while other rows were decoding
            # Every row computed (a prefill's first tokens included) chose one token: slot efficiency ≤ 1.
            assert decoder.figures.useful == decoder.figures.row_steps <= decoder.figures.slot_steps
        assert decoder.figures.prefills == 2
    finally:
        engine.release(pages)
        engine.close()


def test_a_guard_that_fires_is_recorded_by_both_schedules(never_ends, tmp_path):
    """The checkpoint loops; past the guard's n-gram length the guard bans what it wants next, and the page's
    confidence says so (static `generate` and continuous rows alike); a short page never meets it."""
    engine = engine_for(never_ends, {"p1.png": 5}, max_new=48)
    pages = [engine.prepare(p) for p in pages_of(tmp_path, SIZES[:2])]
    try:
        first = generate_alone(engine, pages[0], GUARD)
        retry = generate_alone(engine, pages[0], RETRY_GUARD)
        short = generate_alone(engine, pages[1], GUARD)
        decoder = engine.decoder()
        decoder.add(pages)
        got = {}
        while not decoder.idle():
            got.update((page.ref.source.path.name, gen) for page, gen, _ in decoder.step(rows=2))
    finally:
        engine.release(pages)
        engine.close()
    assert first.guard_fired and retry.guard_fired and not short.guard_fired
    assert got["p0.png"].guard_fired and not got["p1.png"].guard_fired  # p0: its retry, as the page's result
    assert got["p0.png"].logprobs == pytest.approx(retry.logprobs, abs=1e-3)


def test_the_guard_per_row_bans_what_the_batch_guard_bans():
    torch.manual_seed(0)
    vocab, n, window = 7, 3, 8
    rows = [torch.randint(0, 3, (k,)) for k in (0, 2, 3, 5, 8, 12)]  # few distinct tokens: many repeats
    hist = torch.full((len(rows), window), -1, dtype=torch.long)
    for i, r in enumerate(rows):
        tail = r[-window:]
        if len(tail):
            hist[i, window - len(tail):] = tail
    hlen = torch.tensor([len(r) for r in rows])
    got = banned_per_row(hist, hlen, n, vocab, exempt=[2])
    for i, r in enumerate(rows):
        alone = NgramGuard(n, window, prompt_len=1, exempt=[2]).banned(torch.cat([torch.tensor([6]), r])[None], vocab)
        assert torch.equal(got[i], alone[0]), i
    assert got.any()  # the case is not vacuous


def test_static_and_continuous_engines_write_the_same_pages(never_ends, tmp_path):
    """Through the infer worker (as the pipeline runs it): the same Markdown and statuses either way."""
    from ocrbatch.pipeline.infer import InferWorker
    from ocrbatch.records import Batch

    ends = {"p0.png": 2, "p1.png": 9, "p2.png": 4, "p3.png": 1, "p5.png": 6}
    results, confidence = {}, {}
    for schedule in ("static", "continuous"):
        engine = engine_for(never_ends, ends, max_new=10, schedule=schedule)
        pages = [engine.prepare(p) for p in pages_of(tmp_path / schedule)]
        queue = [Batch(tuple(pages[i:i + 2])) for i in range(0, 6, 2)]
        out = []
        worker = InferWorker(engine, out.append)
        try:
            worker.run(lambda block: queue.pop(0) if queue else None, busy=lambda s: None)
        finally:
            engine.close()
        results[schedule] = {r.ref.source.path.name: (r.markdown, r.status.value, r.info.get("tokens")) for r in out}
        confidence[schedule] = {r.ref.source.path.name: r.confidence for r in out}
        assert worker.pages == 6 and engine._prep.pool.in_use() == 0  # every page's slots came back
    assert results["static"] == results["continuous"]
    for name, conf in confidence["continuous"].items():  # the manifest's info.confidence, either way
        other = confidence["static"][name]
        assert conf.method == "tokens" and conf.tokens == results["continuous"][name][2] == other.tokens
        assert conf.mean_logprob == pytest.approx(other.mean_logprob, abs=1e-3) and conf.min_logprob <= conf.mean_logprob
        assert 0 < conf.score <= 1 and conf.guard_fired == other.guard_fired
    assert results["continuous"]["p4.png"][1] == "truncated"
    assert sorted(v[2] for k, v in results["continuous"].items() if k != "p4.png") == [1, 2, 4, 6, 9]


def test_an_out_of_memory_error_mid_decoding_sends_the_pages_through_whole_batches(never_ends, tmp_path):
    """A step runs out of memory: every page the decoder held still gets its one result (the same as static
    decoding gives), the cap is halved, and decoding goes on with the pages after them."""
    from ocrbatch.gpu.throughput import ThroughputController
    from ocrbatch.pipeline.infer import InferWorker
    from ocrbatch.records import Batch

    ends = {"p0.png": 2, "p1.png": 9, "p2.png": 4, "p3.png": 1, "p4.png": 3, "p5.png": 6}
    outputs = {}
    for schedule in ("static", "continuous"):
        engine = engine_for(never_ends, ends, max_new=10, schedule=schedule)
        make = engine.decoder

        def failing_decoder(make=make):
            decoder = make()
            if decoder is None:  # static
                return None
            real, calls = decoder._decode, []

            def decode():
                calls.append(1)
                if len(calls) == 3:
                    raise RuntimeError("CUDA out of memory (simulated)")
                return real()

            decoder._decode = decode
            return decoder

        engine.decoder = failing_decoder
        pages = [engine.prepare(p) for p in pages_of(tmp_path / schedule)]
        queue = [Batch(tuple(pages[i:i + 2])) for i in range(0, 6, 2)]
        out = []
        worker = InferWorker(engine, out.append, ThroughputController(4))
        try:
            worker.run(lambda block: queue.pop(0) if queue else None, busy=lambda s: None)
        finally:
            engine.close()
        outputs[schedule] = sorted((r.ref.source.path.name, r.status.value, r.markdown) for r in out)
        assert len(out) == 6 and engine._prep.pool.in_use() == 0
        if schedule == "continuous":
            assert worker.controller.cap == 2 and worker.controller.ooms == 1
    assert outputs["static"] == outputs["continuous"]


@pytest.mark.parametrize("fails", ["prefill", "join", "decode"])
def test_pages_whose_step_raised_are_all_given_back_by_abandon(fails, never_ends, tmp_path):
    """Whatever part of a step raises (the prefill of a group taken off the waiting pages, rows joining the
    running ones, a decoding step), every page added and not yet returned is in what `abandon()` gives back,
    once: none sits only in a local of the step that raised."""
    engine = engine_for(never_ends, {"p0.png": 1}, max_new=6)
    try:
        decoder = engine.decoder()
        pages = [engine.prepare(p) for p in pages_of(tmp_path, SIZES[:4])]
        decoder.add(pages[:2])
        finished = [page for page, _, _ in decoder.step(rows=2)]  # two rows running
        decoder.add(pages[2:])
        if fails == "join":  # the running rows' caches cannot take the joining ones (out of memory, say)
            def cannot_extend(other):
                raise RuntimeError("CUDA out of memory (simulated)")

            decoder.running.extend = cannot_extend
        elif fails == "prefill":  # the forward pass of a group taken off the waiting pages raises
            def cannot_prefill(group):
                raise RuntimeError("shape '[96, 0]' is invalid for input of size 48")

            decoder._prefill = cannot_prefill
        else:
            real = decoder._decode

            def broken():
                real()  # the work is done (a token chosen, ended rows dropped)...
                raise RuntimeError("CUDA error: device-side assert triggered")  # ...and then it fails

            decoder._decode = broken
        while True:
            try:
                finished += [page for page, _, _ in decoder.step(rows=4)]
            except RuntimeError:
                break
        back = decoder.abandon()
        assert sorted(p.ref.source.path.name for p in back + finished) == [f"p{i}.png" for i in range(4)]
        assert len({id(p) for p in back}) == len(back) and decoder.idle()
    finally:
        engine.close()
