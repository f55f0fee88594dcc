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

from ocrbatch.engines import ppocr  # noqa: E402
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
