"""deepseek-ocr2's checks for `ocrbatch doctor` (its plug-in names `checks`): torch and transformers, the
backends that load (--backend), flash-attn, --quantize, and the default weights in the Hugging Face cache. Local
checks only: no network, no download; torch is imported here, never by `ocrbatch --help`."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Mapping

from ...errors import error_line
from ...findings import Finding, version as _version

NAME = "deepseek-ocr2"


def checks(found: Mapping[str, Finding]) -> list[Finding]:
    torch_found = found.get("torch") or Finding("torch", None, "", {})
    engine = check_deepseek(torch_found)
    cache = hub_cache()
    return [engine, check_backends(engine), check_flash_attn(), check_quantize(),
            *[check_cached_model(m, cache) for m in model_ids()]]


def check_deepseek(torch_found: Finding) -> Finding:
    name = NAME
    missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        return Finding(name, False, f"needs {' and '.join(missing)}: pip install 'ocrbatch[gpu]' "
                                    f"(install torch for your platform first)")
    try:
        import transformers

        transformers.DeepseekOcr2ForConditionalGeneration  # noqa: B018 - imports the model code
    except AttributeError:
        return Finding(name, False, f"transformers {transformers.__version__} has no DeepSeek-OCR-2 model "
                                    f"(needs transformers 5 or newer)")
    except Exception as exc:  # noqa: BLE001
        return Finding(name, False, f"transformers cannot load the DeepSeek-OCR-2 model code: {error_line(exc)}")
    where = ("on CUDA" if torch_found.data.get("cuda_available")
             else "on the CPU only (slow: torch sees no CUDA GPU)")
    return Finding(name, True, f"available {where}; torch {torch_found.data.get('version')}, transformers "
                               f"{transformers.__version__}; needs --model")


def check_backends(transformers_found: Finding) -> Finding:
    """Which deepseek-ocr2 backends load here (--backend), and why not."""
    from ..deepseek_ocr2_vllm.engine import support, version

    why = support(load=True)
    vllm = f"--backend vllm: {version()} loads" if why is None else f"--backend vllm: no, {why}"
    ready = (["transformers"] if transformers_found.ok else []) + (["vllm"] if why is None else [])
    text = f"--backend transformers: {'loads' if transformers_found.ok else 'no (see deepseek-ocr2)'}; {vllm}"
    return Finding("deepseek-ocr2 backends", bool(ready), text, {"available": ready, "vllm": why})


def check_flash_attn() -> Finding:
    if importlib.util.find_spec("flash_attn") is None:
        return Finding("flash-attn", None, "not installed (deepseek-ocr2 uses PyTorch SDPA attention)",
                       {"installed": False})
    v = _version("flash-attn", "flash_attn")
    return Finding("flash-attn", None, f"installed ({v or 'version unknown'})", {"installed": True, "version": v})


def check_quantize() -> Finding:
    from .loading import quantize_support

    support = quantize_support()
    ready = [m for m, why in support.items() if why is None]
    missing = sorted({why for why in support.values() if why})
    text = f"--quantize {', '.join(ready)}" + (f" (int8, nf4 {missing[0]})" if missing else " (bitsandbytes)")
    return Finding("quantize", None, text, {"available": ready})


def hub_cache() -> Path:
    try:
        from .common import hub_cache as engine_hub_cache
    except ImportError:
        engine_hub_cache = None
    if engine_hub_cache is not None:
        return engine_hub_cache()
    return Path(os.environ.get("HF_HUB_CACHE") or "~/.cache/huggingface/hub").expanduser()


def model_ids() -> list[str]:
    """The default DeepSeek-OCR-2 weights in transformers format, as the engine names them."""
    from .common import HUB_ID  # torch-free at import time

    return [HUB_ID]


def check_cached_model(model_id: str, cache: Path) -> Finding:
    """Is `model_id` complete in the hub cache? Reads the folder only: no network."""
    folder = cache / ("models--" + model_id.replace("/", "--"))
    snapshots = sorted((p for p in (folder / "snapshots").iterdir() if p.is_dir()),
                       key=lambda p: p.stat().st_mtime, reverse=True) if (folder / "snapshots").is_dir() else []
    data = {"model": model_id, "cache": str(cache)}
    for snap in snapshots:
        missing = _missing_weights(snap)
        if missing is None:
            continue  # no config.json or no weights at all
        if not missing:
            return Finding("model", True, f"{model_id}: in the Hugging Face cache: {snap}",
                           {**data, "cached": True, "path": str(snap)})
        return Finding("model", False, f"{model_id}: partly in the cache ({len(missing)} weight file(s) missing, "
                                       f"e.g. {missing[0]}): {snap}",
                       {**data, "cached": False, "path": str(snap)})
    return Finding("model", False, f"{model_id}: not in the Hugging Face cache {cache} (hf download {model_id})",
                   {**data, "cached": False})


def _missing_weights(snap: Path) -> list[str] | None:
    """Weight files a snapshot lacks ([] = complete); None when it holds no checkpoint at all."""
    if not (snap / "config.json").exists():
        return None
    for index in snap.glob("*.index.json"):
        try:
            shards = sorted(set(json.loads(index.read_text()).get("weight_map", {}).values()))
        except (OSError, ValueError):
            continue
        return [s for s in shards if not (snap / s).exists()]  # exists() follows the blob symlinks
    weights = [p for p in snap.iterdir() if p.suffix in (".safetensors", ".bin") and p.exists()]
    return [] if weights else None
