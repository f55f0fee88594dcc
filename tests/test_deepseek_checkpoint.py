"""DeepSeek-OCR-2's two checkpoint layouts (engines/deepseek_ocr2/checkpoint.py) and `--backend`.

The official layout (deepseek-ai's, what vLLM reads) and the transformers one (deepseek-community's) are told
apart by config.json; the transformers backend reads an official checkpoint through a view of it and converts
the same pages to the same Markdown as from the transformers layout of the same weights. --backend vllm's own
tests need vLLM (tests/backend_vllm, `make test-vllm`); here, what a user sees without it.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from conftest import draw_page, manifest, run_cli
from ocrbatch.engines.deepseek_ocr2 import checkpoint, synthetic
from ocrbatch.errors import EngineLoadError


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The same random weights in the transformers and in the official layout."""
    root = tmp_path_factory.mktemp("layouts")
    return synthetic.build(root / "community"), synthetic.build(root / "official", layout="official")


def test_the_layouts_are_told_apart_by_config_json(both: tuple[Path, Path], tmp_path: Path) -> None:
    community, official = both
    assert checkpoint.layout(community) == checkpoint.TRANSFORMERS
    assert checkpoint.layout(official) == checkpoint.OFFICIAL
    config = checkpoint.read_config(official)
    assert config["model_type"] == "deepseek_vl_v2" and config["architectures"] == ["DeepseekOCR2ForCausalLM"]
    assert not (official / "processor_config.json").exists()
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
    with pytest.raises(EngineLoadError, match="not a DeepSeek-OCR-2 checkpoint.*llama"):
        checkpoint.layout(tmp_path)


def test_an_official_config_converts_to_the_transformers_one_and_back(both: tuple[Path, Path]) -> None:
    community, official = both
    made = checkpoint.transformers_config(checkpoint.read_config(official), checkpoint.image_token_id(official))
    real = checkpoint.read_config(community)
    assert made["image_token_id"] == real["image_token_id"]
    for key in ("vocab_size", "hidden_size", "num_hidden_layers", "n_routed_experts", "num_experts_per_tok",
                "mlp_layer_types", "rope_parameters", "eos_token_id"):
        assert made["text_config"][key] == real["text_config"][key], key
    for tower in ("sam_config", "encoder_config"):
        for key, value in made["vision_config"][tower].items():
            if key in real["vision_config"][tower]:
                assert real["vision_config"][tower][key] == value, (tower, key)
    # A real official config names no towers: the published sizes are written, which vLLM builds as they are.
    bare = {k: v for k, v in checkpoint.read_config(official).items() if k != "vision_config"}
    published = checkpoint.transformers_config(bare, 128815)
    assert published["vision_config"]["encoder_config"]["num_hidden_layers"] == 24
    assert checkpoint.published_towers(bare) and not checkpoint.published_towers(checkpoint.read_config(official))


def test_the_transformers_backend_reads_the_official_layout_to_the_same_markdown(
        both: tuple[Path, Path], tmp_path: Path) -> None:
    community, official = both
    docs = tmp_path / "docs"
    docs.mkdir()
    draw_page("Minutes\nItem 1: budget\nItem 2: dates", size=(700, 600)).save(docs / "a.png")
    draw_page("Wide table\n1 2 3 4 5 6", size=(1600, 800)).save(docs / "b.png")
    env = {"OCRBATCH_CACHE": str(tmp_path / "cache")}
    outs = {}
    for name, ckpt in (("community", community), ("official", official)):
        out = tmp_path / name
        r = run_cli("convert", str(docs), "-o", str(out), "--engine", "deepseek-ocr2", "--model", str(ckpt),
                    "--max-new-tokens", "12", "--devices", "cpu", "--no-progress", env=env)
        assert r.returncode in (0, 3), r.stderr
        outs[name] = {Path(m["source"]).name: (m["status"], (out / m["output"]).read_text()) for m in manifest(out)}
    assert outs["official"] == outs["community"] and len(outs["official"]) == 2
    # The view is a folder of links beside a converted config, under the cache folder, made once.
    views = list((tmp_path / "cache" / "checkpoints").iterdir())
    assert len(views) == 1 and (views[0] / "model.safetensors").is_symlink()
    assert checkpoint.layout(views[0]) == checkpoint.TRANSFORMERS


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_backend_vllm_without_vllm_says_how_to_install_it(both: tuple[Path, Path], tmp_path: Path) -> None:
    draw_page("x").save(tmp_path / "a.png")
    r = run_cli("convert", str(tmp_path / "a.png"), "-o", str(tmp_path / "out"), "--engine", "deepseek-ocr2",
                "--backend", "vllm", "--model", str(both[1]), "--devices", "cpu", "--no-progress")
    assert r.returncode == 5, r.stderr
    assert "vLLM is not installed" in r.stderr and "ocrbatch[vllm]" in r.stderr


def test_backend_is_refused_for_an_engine_without_backends(tmp_path: Path) -> None:
    draw_page("x").save(tmp_path / "a.png")
    r = run_cli("convert", str(tmp_path / "a.png"), "-o", str(tmp_path / "out"), "--engine", "fake",
                "--backend", "vllm")
    assert r.returncode == 2 and "--backend vllm" in r.stderr and "deepseek-ocr2" in r.stderr
    r = run_cli("convert", str(tmp_path / "a.png"), "-o", str(tmp_path / "out"), "--engine", "fake",
                env={"OCRBATCH_BACKEND": "tensorrt"})
    assert r.returncode == 2 and "OCRBATCH_BACKEND='tensorrt'" in r.stderr and "transformers or vllm" in r.stderr
