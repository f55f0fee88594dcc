"""DeepSeek-OCR-2's two checkpoint layouts, told apart by config.json, and a view of one in the other.

    official       deepseek-ai/DeepSeek-OCR-2: model_type `deepseek_vl_v2`, architectures
                   `DeepseekOCR2ForCausalLM`, the language model under `language_config`; the vision towers are not
                   described (their sizes are the published ones). vLLM reads this layout.
    transformers   deepseek-community/DeepSeek-OCR-2: model_type `deepseek_ocr2`, `text_config` and a
                   `vision_config` that spells out both towers, and a processor_config.json. transformers reads this.

The weights are named alike in both (transformers renames them when it loads, and back when it saves;
transformers 5.19 and later know the renamings for `deepseek_ocr2`), so one layout becomes the other by its
config alone: `view(path, want)` is the checkpoint itself when it is already in `want`'s layout, else a
folder of links to its weights and tokenizer beside a converted config.json (kept under the cache folder,
written again whenever the source config changes).

A converted official config keeps the towers' sizes (`vision_config.sam_config` and `encoder_config`), so that
the random test checkpoints (synthetic.py), whose towers are small, come back as they were.

Pure Python and JSON; the transformers view's processor files are written with transformers (imported inside).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from ...errors import EngineLoadError, error_line

OFFICIAL, TRANSFORMERS = "official", "transformers"
OFFICIAL_ARCH = "DeepseekOCR2ForCausalLM"
COMMUNITY_ARCH = "DeepseekOcr2ForConditionalGeneration"

# The published vision towers (the official config does not describe them): a SAM ViT-B and a 24-layer Qwen2
# encoder. Written into a transformers config made from an official one.
PUBLISHED_SAM = {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "patch_size": 16,
                 "window_size": 14, "global_attn_indexes": [2, 5, 8, 11], "mlp_dim": 3072, "output_channels": 256,
                 "downsample_channels": [512, 896]}
PUBLISHED_ENCODER = {"hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
                     "num_attention_heads": 14, "num_key_value_heads": 2, "max_position_embeddings": 131072,
                     "rms_norm_eps": 1e-6, "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}}
TEXT_ROPE_THETA = 10000.0

# language_config (official) <-> text_config (transformers): the fields named alike in both.
_TEXT_FIELDS = ("vocab_size", "hidden_size", "intermediate_size", "moe_intermediate_size", "num_hidden_layers",
                "num_attention_heads", "num_key_value_heads", "n_routed_experts", "n_shared_experts",
                "num_experts_per_tok", "routed_scaling_factor", "topk_method", "n_group", "topk_group",
                "max_position_embeddings", "bos_token_id", "eos_token_id", "pad_token_id", "rms_norm_eps",
                "hidden_act")
# Files a view links (weights, tokenizer, generation settings); config.json and processor files are its own.
_OWN = {"config.json", "processor_config.json", "preprocessor_config.json"}


def read_config(path: str | Path) -> dict[str, Any]:
    file = Path(path) / "config.json"
    try:
        config = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EngineLoadError(f"cannot read {file}: {error_line(exc, named=False)}") from exc
    if not isinstance(config, dict):
        raise EngineLoadError(f"{file}: not a JSON object")
    return config


def layout_of(config: dict[str, Any]) -> str | None:
    """OFFICIAL, TRANSFORMERS, or None when the config is not a DeepSeek-OCR-2's."""
    model_type = config.get("model_type")
    if model_type == "deepseek_ocr2":
        return TRANSFORMERS
    if model_type == "deepseek_vl_v2" and OFFICIAL_ARCH in (config.get("architectures") or []):
        return OFFICIAL
    return None


def layout(path: str | Path) -> str:
    """The layout of the checkpoint at `path`; EngineLoadError naming what it is when it is neither."""
    config = read_config(path)
    found = layout_of(config)
    if found is None:
        raise EngineLoadError(f"{path} is not a DeepSeek-OCR-2 checkpoint (config.json: model_type "
                              f"{config.get('model_type')!r}, architectures {config.get('architectures')}); use "
                              f"deepseek-ai/DeepSeek-OCR-2 or deepseek-community/DeepSeek-OCR-2")
    return found


def layer_types(dense_first: int, count: int, every: int = 1) -> list[str]:
    """mlp_layer_types from the official `first_k_dense_replace` and `moe_layer_freq`."""
    return ["sparse" if i >= dense_first and (i - dense_first) % max(1, every) == 0 else "dense"
            for i in range(count)]


def transformers_config(official: dict[str, Any], image_token_id: int) -> dict[str, Any]:
    """A transformers-layout config.json from an official one."""
    lang = dict(official.get("language_config") or {})
    text = {k: lang[k] for k in _TEXT_FIELDS if lang.get(k) is not None}
    text.update(model_type="deepseek_ocr2_text", tie_word_embeddings=bool(lang.get("tie_word_embeddings", False)),
                rope_parameters={"rope_type": "default", "rope_theta": float(lang.get("rope_theta", TEXT_ROPE_THETA))},
                mlp_layer_types=layer_types(int(lang.get("first_k_dense_replace", 0)), int(lang["num_hidden_layers"]),
                                            int(lang.get("moe_layer_freq", 1))))
    vision = official.get("vision_config") or {}
    sam = {**PUBLISHED_SAM, **(vision.get("sam_config") or {})}
    encoder = {**PUBLISHED_ENCODER, **(vision.get("encoder_config") or {})}
    out = {"architectures": [COMMUNITY_ARCH], "model_type": "deepseek_ocr2", "image_token_id": image_token_id,
           "tie_word_embeddings": text["tie_word_embeddings"], "text_config": text,
           "vision_config": {"model_type": "deepseek_ocr2_vision", "sam_config": sam, "encoder_config": encoder}}
    dtype = official.get("torch_dtype") or official.get("dtype")
    if dtype:
        out["dtype"] = dtype
    return out


def official_config(community: dict[str, Any]) -> dict[str, Any]:
    """An official-layout config.json from a transformers one (the towers' sizes kept in vision_config)."""
    text = dict(community.get("text_config") or {})
    types = text.get("mlp_layer_types") or ["dense"] * int(text.get("num_hidden_layers", 0))
    dense_first = next((i for i, t in enumerate(types) if t == "sparse"), len(types))
    if any(t != "sparse" for t in types[dense_first:]):
        raise EngineLoadError(f"mlp_layer_types {types}: only dense layers then sparse ones have an official layout")
    lang = {k: text[k] for k in _TEXT_FIELDS if text.get(k) is not None}
    rope = text.get("rope_parameters") or {}
    lang.setdefault("n_group", 1)  # one group: plain top-k (vLLM's CPU router wants them named)
    lang.setdefault("topk_group", 1)
    lang.update(model_type="deepseek_v2", architectures=["DeepseekV2ForCausalLM"], first_k_dense_replace=dense_first,
                moe_layer_freq=1, kv_lora_rank=None, q_lora_rank=None, qk_nope_head_dim=0, qk_rope_head_dim=0,
                v_head_dim=0, use_mla=False, norm_topk_prob=False, scoring_func="softmax",
                rope_theta=float(rope.get("rope_theta", TEXT_ROPE_THETA)),
                tie_word_embeddings=bool(text.get("tie_word_embeddings", community.get("tie_word_embeddings", False))))
    vision = community.get("vision_config") or {}
    encoder = {**PUBLISHED_ENCODER, **(vision.get("encoder_config") or {})}
    out = {"architectures": [OFFICIAL_ARCH], "model_type": "deepseek_vl_v2", "tile_tag": "2D",
           "global_view_pos": "head", "candidate_resolutions": [[1024, 1024]], "language_config": lang,
           "projector_config": {"model_type": "mlp_projector", "projector_type": "linear",
                                "input_dim": encoder["hidden_size"], "n_embed": lang["hidden_size"]},
           "vision_config": {"model_type": "vision", "model_name": "deepencoderv2", "image_size": 1024,
                             "sam_config": _towers(vision.get("sam_config"), PUBLISHED_SAM),
                             "encoder_config": _towers(vision.get("encoder_config"), PUBLISHED_ENCODER)}}
    dtype = community.get("dtype") or community.get("torch_dtype")
    if dtype:
        out["torch_dtype"] = dtype
    return out


def _towers(given: dict[str, Any] | None, published: dict[str, Any]) -> dict[str, Any]:
    given = given or {}
    return {k: given.get(k, v) for k, v in published.items()}


def published_towers(official: dict[str, Any]) -> bool:
    """Whether an official config's vision towers are the published ones (vLLM builds only those)."""
    vision = official.get("vision_config") or {}
    return all((vision.get(key) or {}).get(k, v) == v
               for key, published in (("sam_config", PUBLISHED_SAM), ("encoder_config", PUBLISHED_ENCODER))
               for k, v in published.items())


def image_token_id(path: str | Path) -> int:
    """The id of `<image>` in the checkpoint's tokenizer.json."""
    file = Path(path) / "tokenizer.json"
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EngineLoadError(f"cannot read {file}: {error_line(exc, named=False)}") from exc
    for token in data.get("added_tokens") or []:
        if token.get("content") == "<image>":
            return int(token["id"])
    vocab = (data.get("model") or {}).get("vocab") or {}
    if "<image>" in vocab:
        return int(vocab["<image>"])
    raise EngineLoadError(f"{file}: the tokenizer has no <image> token")


def cache_root() -> Path:
    """Where views are kept: $OCRBATCH_CACHE, else ocrbatch/ under the XDG cache folder."""
    if os.environ.get("OCRBATCH_CACHE"):
        return Path(os.environ["OCRBATCH_CACHE"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "ocrbatch"


def view(path: str | Path, want: str) -> str:
    """The checkpoint at `path` in `want`'s layout: itself, or a view of it (see the module's docstring)."""
    source = Path(path).resolve()
    config = read_config(source)
    have = layout(source)
    if have == want:
        return str(source)
    if want == TRANSFORMERS:
        converted = transformers_config(config, image_token_id(source))
    else:
        converted = official_config(config)
    text = json.dumps(converted, indent=2, sort_keys=True)
    key = hashlib.sha256(f"{source}\n{text}".encode()).hexdigest()[:16]
    folder = cache_root() / "checkpoints" / f"{source.name}-{want}-{key}"
    if (folder / "config.json").is_file():
        return str(folder)
    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        for item in source.iterdir():
            if item.name not in _OWN and not item.name.startswith("."):
                (tmp / item.name).symlink_to(item)
        if want == TRANSFORMERS:
            _write_processor(tmp)
        (tmp / "config.json").write_text(text + "\n", encoding="utf-8")
        if not folder.exists():  # another process may have written the same view meanwhile
            os.replace(tmp, folder)
    except OSError as exc:
        raise EngineLoadError(f"cannot write a {want}-layout view of {source} in {folder.parent}: "
                              f"{error_line(exc, named=False)}") from exc
    finally:
        if tmp.exists():
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    return str(folder)


def _write_processor(folder: Path) -> None:
    """transformers' processor files (the default DeepSeek-OCR-2 image settings) beside the linked tokenizer."""
    from transformers import AutoTokenizer, DeepseekOcr2ImageProcessorPil, DeepseekOcr2Processor

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    processor = DeepseekOcr2Processor(image_processor=DeepseekOcr2ImageProcessorPil(), tokenizer=tokenizer)
    saved = folder / "processor"
    processor.save_pretrained(str(saved))
    for name in ("processor_config.json", "preprocessor_config.json"):
        if (saved / name).is_file():
            os.replace(saved / name, folder / name)
    import shutil

    shutil.rmtree(saved, ignore_errors=True)
