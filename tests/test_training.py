"""The recognizer's training recipe (ocrbatch/training, `make train-rec`) end to end on a few hundred lines: pages
drawn with Pillow's own font and Python's docstrings (no system package), cut by the real detector, a real CTC
fine-tune of the shipped tiny recognizer at 32 rows with the Latin head, and an ONNX model onnxruntime runs."""

from __future__ import annotations

import json
import pickle
import random

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")

from ocrbatch.engines import ppocr, runtimes  # noqa: E402
from ocrbatch.training import crops, draw, graph, train  # noqa: E402
from ocrbatch.training.text import Corpus  # noqa: E402


def test_the_graph_module_computes_what_the_shipped_model_does():
    import onnxruntime as ort

    path = ppocr.model_dir() / ppocr.MODELS["tiny"][1]
    module = graph.GraphModule(graph.adapt(graph.load(path), 48, None)).eval()
    x = np.random.default_rng(0).uniform(-1, 1, (2, 3, 48, 120)).astype(np.float32)
    want = ort.InferenceSession(str(path)).run(None, {"x": x})[0]
    with torch.no_grad():
        got = torch.softmax(module(torch.from_numpy(x)), -1).numpy()
    assert got.shape == want.shape
    assert np.abs(got - want).max() < 1e-3


def test_the_graph_module_lets_go_of_each_activation_once_no_later_node_reads_it(monkeypatch):
    """Memory goes with the activations held at once (a batch of wide lines took the machine's 24 GB when each
    was held to the end of the graph): by the last node, only the few still to be read are alive."""
    import weakref

    module = graph.GraphModule(graph.load(ppocr.model_dir() / ppocr.MODELS["tiny"][1])).eval()
    made: list = []
    alive_at_end: list[int] = []
    ops = dict(graph._OPS)

    def watched(op):
        def run(v, a):
            if len(made) == len(module._nodes) - 2:  # the last node forward runs
                alive_at_end.append(sum(ref() is not None for ref in made))
            out = ops[op](v, a)
            made.append(weakref.ref(out))
            return out
        return run

    monkeypatch.setattr(graph, "_OPS", {op: watched(op) for op in ops})
    with torch.no_grad():
        module(torch.zeros(1, 3, 48, 320))
    assert len(made) > 50 and alive_at_end
    assert alive_at_end[0] <= 5, alive_at_end


def test_a_drawn_page_is_labelled_with_whole_lines_where_the_detector_boxed_them():
    rng = random.Random(7)
    draw.SYSTEM = False
    page = draw.draw_page(rng, Corpus.found(rng, system=False))
    det = ppocr.OnnxRuntimeModel(ppocr.model_dir() / ppocr.MODELS["small"][0])
    found = crops.page_crops(page, det, ppocr.DetParams(), 32, rng)
    texts = {u.text for u in page.units}
    assert len(found) >= 0.3 * len(page.units)
    assert all(c.image.shape[0] == 32 for c in found)
    # each label is drawn units of one row, whole: most are one unit as drawn
    assert sum(c.text in texts for c in found) >= 0.7 * len(found)


def test_shards_are_the_same_for_a_seed(tmp_path):
    a = train.make_shard(tmp_path / "a", 3, 0, 1, 32, "small", "builtin")
    b = train.make_shard(tmp_path / "b", 3, 0, 1, 32, "small", "builtin")
    ca, cb = pickle.loads(a.read_bytes()), pickle.loads(b.read_bytes())
    assert [t for _, t in ca] == [t for _, t in cb] and len(ca) > 5
    assert all(np.array_equal(x, y) for (x, _), (y, _) in zip(ca, cb))


def test_the_recipe_trains_checkpoints_resumes_and_exports_a_model_onnxruntime_runs(tmp_path):
    import onnxruntime as ort

    cfg = train.TrainConfig(workdir=str(tmp_path), lines=240, seed=1, batch=16, warmup=40, passes=3, replay=0.0,
                            eval_every=10_000, threads=1, sources="builtin", eval_pages=1, pages_per_shard=2,
                            lr=5e-4)
    train.run(cfg, log=lambda s: None)
    log = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert log[0]["lines"] == 0 and log[-1]["lines"] >= 240
    first = log[1]["loss"]
    # resumed from the checkpoint, not from the start: the lines go on
    train.run(train.TrainConfig(**{**cfg.__dict__, "lines": 480}), log=lambda s: None)
    log = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert log[-1]["lines"] >= 480 and all(r["lines"] > 0 for r in log[2:])
    assert log[-1]["loss"] < first  # the loss falls
    chars = (tmp_path / "dict.txt").read_text(encoding="utf-8").splitlines()
    assert "A" in chars and "é" in chars and "中" not in chars  # the Latin head
    session = ort.InferenceSession(str(tmp_path / "rec.onnx"))
    assert session.get_inputs()[0].shape[2] == 32
    crop = np.full((1, 3, 32, 160), 1.0, np.float32)
    out = session.run(None, {session.get_inputs()[0].name: crop})[0]
    assert out.shape[2] == len(chars) + 2  # blank, the characters, space
    assert np.allclose(out.sum(-1), 1, atol=1e-3)
    # BatchNorm's statistics are as shipped; the weights moved
    import onnx
    from onnx import numpy_helper

    base = graph.load(ppocr.model_dir() / ppocr.MODELS["tiny"][1])
    stats = {i for n in base.graph.node if n.op_type == "BatchNormalization" for i in n.input[3:5]}
    shipped = {t.name: numpy_helper.to_array(t) for t in base.graph.initializer}
    trained = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(tmp_path / "rec.onnx")).graph.initializer}
    assert stats and all(np.array_equal(trained[n], shipped[n]) for n in stats)
    assert any(not np.array_equal(trained[n], shipped[n]) for n in trained
               if n not in stats and trained[n].shape == shipped[n].shape)


@pytest.mark.parametrize("size", ["tiny", "small"])
def test_the_graph_module_runs_the_detectors_and_the_small_recognizer_as_shipped(size):
    """The distillation's student and teacher (detectors: pooling, upsampling, transposed convolutions) and the
    small recognizer (attention, LayerNorm, reshapes) computed node by node as onnxruntime computes them."""
    import onnxruntime as ort

    rng = np.random.default_rng(1)
    det = ppocr.model_dir() / ppocr.MODELS[size][0]
    x = rng.uniform(-1, 1, (1, 3, 96, 160)).astype(np.float32)
    want = ort.InferenceSession(str(det)).run(None, {"x": x})[0]
    module = graph.GraphModule(graph.load(det)).eval()
    with torch.no_grad():
        got = torch.sigmoid(module(torch.from_numpy(x))).numpy()
    assert got.shape == want.shape and np.abs(got - want).max() < 1e-3
    # the weights train; the upsampling factors are constants
    scales = {i for n in graph.load(det).graph.node if n.op_type == "Resize" for i in n.input[1:] if i}
    weights = {k for k, attr in module._names.items() if isinstance(getattr(module, attr), torch.nn.Parameter)}
    assert scales and len(weights) > 50 and not weights & scales
    if size == "small":
        rec = graph.adapt(graph.load(ppocr.model_dir() / ppocr.MODELS[size][1]), 32, None)
        x = rng.uniform(-1, 1, (2, 3, 32, 96)).astype(np.float32)
        session = ort.InferenceSession(rec.SerializeToString())
        want = session.run(None, {session.get_inputs()[0].name: x})[0]
        with torch.no_grad():
            got = torch.softmax(graph.GraphModule(rec).eval()(torch.from_numpy(x)), -1).numpy()
        assert got.shape == want.shape and np.abs(got - want).max() < 1e-3


def test_the_detector_distillation_trains_resumes_and_exports_a_detector_the_engine_runs(tmp_path):
    """A few steps of `make train-det` on small crops of drawn pages: the teacher's maps, a checkpoint, a resume
    that goes on from it, and a det.onnx with the tiny detector's operators that onnxruntime runs as the
    student computes."""
    import onnxruntime as ort

    from ocrbatch.training import distil

    cfg = distil.DistilConfig(workdir=str(tmp_path), steps=3, eval_every=3, eval_pages=1, crop=128, threads=1,
                              sources="builtin")
    distil.run(cfg, log=lambda s: None)
    distil.run(distil.DistilConfig(**{**cfg.__dict__, "steps": 5}), log=lambda s: None)
    log = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [0, 3, 5]  # resumed at 3, not from the start
    assert all(0 <= r["pixel_f1"] <= 1 and 0 <= r["box_f1"] <= 1 for r in log)
    exported = graph.load(tmp_path / "det.onnx")
    shipped = graph.load(ppocr.model_dir() / ppocr.MODELS["tiny"][0])
    assert [n.op_type for n in exported.graph.node] == [n.op_type for n in shipped.graph.node]
    ckpt = torch.load(tmp_path / "ckpt.pt", weights_only=False)
    student = graph.GraphModule(shipped).eval()
    student.load_state_dict(ckpt["model"])
    x = np.random.default_rng(2).uniform(-1, 1, (1, 3, 64, 96)).astype(np.float32)
    with torch.no_grad():
        want = torch.sigmoid(student(torch.from_numpy(x))).numpy()
    got = ort.InferenceSession(str(tmp_path / "det.onnx")).run(None, {"x": x})[0]
    assert np.abs(got - want).max() < 1e-4
    from onnx import numpy_helper

    before = {t.name: numpy_helper.to_array(t) for t in shipped.graph.initializer}
    after = {t.name: numpy_helper.to_array(t) for t in exported.graph.initializer}
    assert any(not np.array_equal(after[k], before[k]) for k in before)  # trained: the head moved
    stem = next(n for n in shipped.graph.node if n.op_type == "Conv").input[1]
    assert np.array_equal(after[stem], before[stem])  # the backbone stays as shipped (DistilConfig.train_from)


def test_the_distillation_loss_is_least_where_the_student_agrees_with_the_teacher():
    from ocrbatch.training import distil

    teacher = torch.zeros(1, 1, 8, 8)
    teacher[..., 2:4, :] = 0.9  # a line of text
    agree = torch.logit(teacher.clamp(0.05, 0.95))
    shifted = torch.roll(agree, 3, dims=2)  # the line drawn three rows off
    assert distil.loss_fn(agree, teacher, 1.0) < distil.loss_fn(shifted, teacher, 1.0)
    assert distil.loss_fn(agree, teacher, 1.0) < distil.loss_fn(agree, teacher, 0.0) + 0.5


def test_a_second_phase_starts_from_the_shipped_document_recognizer_with_its_characters(tmp_path):
    """`--init rec_doc --teacher small --distil-shift 1`: the shipped model's second phase, taught by small at 48
    rows, as the card's run was."""
    import onnxruntime as ort

    shipped = ppocr.PACKAGE_MODELS / "rec_doc"
    cfg = train.TrainConfig(workdir=str(tmp_path), init=str(shipped / "rec.onnx"), lines=24, batch=8, warmup=8,
                            passes=1, replay=0.0, eval_every=10_000, threads=1, sources="builtin", eval_pages=1,
                            pages_per_shard=1, lr=1e-5, teacher="small", distil=0.7, distil_shift=1)
    train.run(cfg, log=lambda s: None)
    log = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    # it starts where the shipped model is: its held-out CER at line 0 is the shipped model's own
    assert log[0]["lines"] == 0 and log[0]["eval_cer"] < 0.5
    assert (tmp_path / "dict.txt").read_text(encoding="utf-8") == (shipped / "dict.txt").read_text(encoding="utf-8")
    session = ort.InferenceSession(str(tmp_path / "rec.onnx"))
    assert session.get_inputs()[0].shape[2] == 32
    # the weights it went on from are the shipped model's (24 lines at a small rate move them little)
    from onnx import numpy_helper

    start = {t.name: numpy_helper.to_array(t) for t in graph.load(shipped / "rec.onnx").graph.initializer}
    went = {t.name: numpy_helper.to_array(t) for t in graph.load(tmp_path / "rec.onnx").graph.initializer}
    assert start.keys() == went.keys()
    assert max(float(np.abs(went[k] - start[k]).max()) for k in start if start[k].size) < 0.01
    with pytest.raises(ValueError, match="48-row"):
        train.run(train.TrainConfig(**{**cfg.__dict__, "workdir": str(tmp_path / "b"), "height": 48}),
                  log=lambda s: None)


def test_the_teacher_reads_the_batch_at_its_own_rows_and_gives_the_students_frames(tmp_path):
    """`--teacher small`: the shipped small recognizer at 48 rows reads the batch scaled to its rows, the width
    kept, so its frames are the student's (small at 32 rows, crops widened by 48 / 32); the loss to it is nil for a
    student that reads as it does and grows as the student strays."""
    models = ppocr.model_dir()
    chars = train.charset(graph.dictionary(models / ppocr.MODELS["small"][2]))
    cfg = train.TrainConfig(workdir=str(tmp_path), base="small", teacher="small", height=32, width_scale=1.5)
    teacher = train._teacher(cfg, models, chars, "cpu")
    page = draw.draw_page(random.Random(3), Corpus.found(random.Random(3), system=False))
    found = crops.page_crops(page, runtimes.OnnxRuntimeModel(models / ppocr.MODELS["small"][0]),
                             ppocr.DetParams(), 32, random.Random(3), 1.5)
    assert found
    x = train.batch_tensor([found[0].image], 32)
    want = teacher(x)
    assert want.shape[1] == x.shape[3] // ppocr.REC_STRIDE and want.shape[2] == len(chars) + 2
    keep = train.head_classes(graph.dictionary(models / ppocr.MODELS["small"][2]), chars)
    student = graph.GraphModule(graph.adapt(graph.load(models / ppocr.MODELS["small"][1]), 32, keep))
    with torch.no_grad():
        got = student(x)
    assert got.shape == want.shape  # the same frames
    assert float(train.distil_loss(want, want)) == pytest.approx(0.0, abs=1e-6)
    assert float(train.distil_loss(got, want)) > 0
    assert float(train.distil_loss(torch.roll(want, 2, dims=1), want)) > float(train.distil_loss(got, want))
    with pytest.raises(ValueError, match="--teacher"):
        train._teacher(train.TrainConfig(**{**cfg.__dict__, "teacher": "tiny"}), models, chars, "cpu")


def test_with_a_shift_a_student_spiking_a_frame_off_the_teacher_is_not_taught_the_teachers_timing():
    """--distil-shift 1: a student reading the same characters a frame later than the teacher is (nearly) not
    penalised; two frames off, or another reading, still is."""
    gen = torch.Generator().manual_seed(0)
    teacher = torch.randn(2, 24, 12, generator=gen) * 4  # peaky per-frame distributions
    late = torch.roll(teacher, 1, dims=1)
    assert float(train.distil_loss(teacher, teacher, 1)) == pytest.approx(0.0, abs=1e-6)
    assert float(train.distil_loss(late, teacher, 1)) < 0.1 * float(train.distil_loss(late, teacher, 0))
    two_late = torch.roll(teacher, 2, dims=1)
    assert float(train.distil_loss(two_late, teacher, 1)) > 0.5 * float(train.distil_loss(two_late, teacher, 0))
    other = torch.randn(2, 24, 12, generator=gen) * 4
    assert float(train.distil_loss(other, teacher, 1)) > 0.5 * float(train.distil_loss(other, teacher, 0))


def test_a_teacher_with_more_classes_scores_each_of_the_students_characters_as_its_own(tmp_path):
    """`--init rec_doc --teacher small`: the document recognizer (tiny's network, 632 classes) learns from small,
    whose dictionary is larger and ordered otherwise; each of the student's classes gets small's score for the same
    character (the blank and the space included), so the two are compared character by character."""
    models = ppocr.model_dir()
    shipped = ppocr.PACKAGE_MODELS / "rec_doc"
    chars = graph.dictionary(shipped / "dict.txt")
    cfg = train.TrainConfig(workdir=str(tmp_path), init=str(shipped / "rec.onnx"), teacher="small")
    teacher = train._teacher(cfg, models, chars, "cpu")
    found = crops.page_crops(draw.draw_page(random.Random(5), Corpus.found(random.Random(5), system=False)),
                             runtimes.OnnxRuntimeModel(models / ppocr.MODELS["small"][0]), ppocr.DetParams(), 32,
                             random.Random(5), 1.25)
    x = train.batch_tensor([found[0].image], 32)
    got = teacher(x)
    small_dict = graph.dictionary(models / ppocr.MODELS["small"][2])
    assert small_dict[:len(chars)] != chars  # not the same order: a mapping by position would be wrong
    full = graph.GraphModule(graph.load(models / ppocr.MODELS["small"][1]))
    with torch.no_grad():
        every = full(torch.nn.functional.interpolate(x, size=(ppocr.REC_HEIGHT, x.shape[3]), mode="bilinear",
                                                     align_corners=False))
    pos = {c: k + 1 for k, c in enumerate(small_dict)}
    same = [0] + [pos[c] for c in chars] + [len(small_dict) + 1]
    assert got.shape == (1, x.shape[3] // ppocr.REC_STRIDE, len(chars) + 2)
    assert torch.allclose(got, every[..., same], atol=1e-4)


def test_the_generators_draw_only_a_few_shards_past_the_trainer(tmp_path):
    """On 2 cores a generator drawing the whole run's data ahead takes a core from the trainer all run long: it
    draws at most AHEAD shards past the one the trainer is on, and goes on when the trainer does."""
    import threading

    train._tell_generators(tmp_path, 0)
    gen = threading.Thread(target=train._generate, daemon=True,
                           args=(str(tmp_path), 0, 0, 1, train.AHEAD + 3, 1, 32, "tiny", "builtin", 1.25))
    gen.start()
    last = train._shard_path(tmp_path, train.AHEAD)
    for _ in range(600):
        if last.exists():
            break
        gen.join(timeout=0.2)
    assert last.exists()
    gen.join(timeout=5)  # time enough to draw a one-page shard several times over
    assert gen.is_alive() and not train._shard_path(tmp_path, train.AHEAD + 1).exists()
    train._tell_generators(tmp_path, 2)  # the trainer moved on two shards
    gen.join(timeout=120)
    assert not gen.is_alive()
    assert all(train._shard_path(tmp_path, i).exists() for i in range(train.AHEAD + 3))


def test_wide_lines_come_in_smaller_batches_so_memory_is_bounded():
    """--batch-columns: a batch holds at most that many input columns (its lines times the widest one's width),
    and at most --batch lines; every line is in one batch, in order."""
    widths = [100, 120, 300, 310, 900, 950, 2000, 3000, 100]
    items = [(np.zeros((32, w, 3), np.uint8), str(k)) for k, w in enumerate(widths)]
    out = train.batches_of(items, 4, 2000)
    assert [t for b in out for _, t in b] == [str(k) for k in range(len(widths))]
    assert all(len(b) <= 4 and (len(b) == 1 or len(b) * max(im.shape[1] for im, _ in b) <= 2000) for b in out)
    assert [len(b) for b in out] == [4, 2, 1, 1, 1]
    assert [len(b) for b in train.batches_of(items, 4)] == [4, 4, 1]  # no bound: by lines alone
