"""Loading DeepSeek-OCR-2 through transformers (engine.py's `load`): --quantize's bitsandbytes settings, the
model with flash-attn for its language model when that works (SDPA otherwise), a checkpoint that lacks weights
refused, and transformers kept quiet meanwhile (the run has its own display). Each step's failure is one
EngineLoadError line naming the checkpoint. torch and transformers come in as arguments or are imported
inside the functions: importing this module imports neither."""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import threading
from typing import Any, Iterator

from ...errors import EngineLoadError, error_line

log = logging.getLogger("ocrbatch")


def quantize_support() -> dict[str, str | None]:
    """For each --quantize mode, None when this install can load it, else why not (for doctor)."""
    missing = [m for m in ("bitsandbytes", "accelerate") if importlib.util.find_spec(m) is None]
    why = f"needs {' and '.join(missing)}: pip install 'ocrbatch[quantize]'" if missing else None
    return {"none": None, "int8": why, "nf4": why}


def quantization(transformers: Any, torch: Any, mode: str, dtype: Any, device: str) -> dict[str, Any] | None:
    """`from_pretrained`'s arguments for --quantize (bitsandbytes: int8 weights, or 4-bit NF4 weights computing in
    `dtype`, for the language model), None for none; EngineLoadError when this install cannot."""
    if mode == "none":
        return None
    why = quantize_support()[mode]
    if why:
        raise EngineLoadError(f"--quantize {mode} {why}")
    if mode == "int8" and not device.startswith("cuda"):  # its CPU kernels fail on this model's activations
        raise EngineLoadError("--quantize int8 needs a CUDA GPU (bitsandbytes' CPU int8 path fails on this model); "
                              "nf4 runs on a CPU too")
    # The language model only (nearly all the weights): the vision towers, their projector and the output head
    # keep their precision (bitsandbytes' int8 kernels also refuse the towers' 4-D activations).
    # Named both ways: transformers 5.x matches a name from the start of the module path (or as its suffix), so
    # the bare "vision_tower" no longer covers "model.vision_tower..." and the towers were quantized too.
    kept = ["vision_tower", "multi_modal_projector"]
    skip = [*kept, *(f"model.{name}" for name in kept), "lm_head"]
    if mode == "int8":
        config = transformers.BitsAndBytesConfig(load_in_8bit=True, llm_int8_skip_modules=skip)
    else:
        config = transformers.BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                                 bnb_4bit_compute_dtype=dtype, llm_int8_skip_modules=skip)
    return {"quantization_config": config, "device_map": {"": device}}


def load_model(transformers: Any, path: str, dtype: Any, attn: str | dict[str, str],
                quantized: dict[str, Any] | None = None) -> tuple[Any, Any]:
    """(model, attention used): flash-attn as asked when it works, else SDPA."""
    try:
        return _load_weights(transformers, path, dtype, attn, quantized), attn
    except EngineLoadError:
        raise
    except Exception as exc:  # noqa: BLE001 - flash-attn can fail in many ways; SDPA is the fallback
        if attn == "sdpa":
            raise EngineLoadError(f"cannot load the model from {path}: {error_line(exc, named=False)}") from exc
        log.warning("flash-attn could not be used (%s); using SDPA", error_line(exc, named=False))
    return load_step(path, "model", lambda: _load_weights(transformers, path, dtype, "sdpa", quantized)), "sdpa"


def _load_weights(transformers: Any, path: str, dtype: Any, attn: str | dict[str, str],
                  quantized: dict[str, Any] | None = None) -> Any:
    """The model from `path`; a checkpoint that lacks weights is refused rather than run half-random."""
    model, info = transformers.DeepseekOcr2ForConditionalGeneration.from_pretrained(
        path, dtype=dtype, attn_implementation=attn, output_loading_info=True, **(quantized or {}))
    missing = sorted(info.get("missing_keys") or [])
    if missing:
        raise EngineLoadError(f"{path}: the checkpoint lacks {len(missing)} of the model's weights "
                              f"(e.g. {missing[0]}); transformers renames an official checkpoint's weights from "
                              f"version 5.19 on (this is {transformers.__version__})")
    return model


def load_step(path: str, what: str, fn: Any) -> Any:
    try:
        return fn()
    except (OSError, ValueError, KeyError) as exc:
        raise EngineLoadError(f"cannot load the {what} from {path}: {error_line(exc, named=False)}") from exc


_QUIET = threading.Lock()
_quiet_depth = 0
_quiet_saved: tuple[int, bool] = (0, True)


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """No progress bars or advisory warnings from transformers while loading: the run has its own display.
    Threads may load at once (a decode thread its processor, each device its model): the first one in
    silences, the last one out restores."""
    global _quiet_depth, _quiet_saved
    from transformers.utils import logging as hf_logging

    with _QUIET:
        if _quiet_depth == 0:
            _quiet_saved = (hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled())
            hf_logging.set_verbosity_error()
            hf_logging.disable_progress_bar()
        _quiet_depth += 1
    try:
        yield
    finally:
        with _QUIET:
            _quiet_depth -= 1
            if _quiet_depth == 0:
                level, bars = _quiet_saved
                hf_logging.set_verbosity(level)
                if bars:
                    hf_logging.enable_progress_bar()
