"""What both DeepSeek-OCR-2 backends share (transformers: engine.py and continuous.py here; vLLM:
engines/deepseek_ocr2_vllm/): the prompts, the dtypes, the repetition guard's settings, the record of a page's
generated tokens (`Generated`), how it becomes the page's output (`page_output`), and where the checkpoint is
(`resolve_model`: a local folder or a Hugging Face id's cached snapshot).

Importing this module imports neither torch nor transformers nor vLLM.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ... import confidence
from ...config import EngineOptions
from ...errors import EngineLoadError, UsageError, error_line
from ...pagerecord import of_markdown
from ...records import PageImage, PageOutput, Status
from .post import page_lines, to_markdown

log = logging.getLogger("ocrbatch")

PROMPTS = {
    "markdown": "<image>\n<|grounding|>Convert the document to markdown.",
    "free": "<image>\nFree OCR.",
}
IMAGE_TOKEN = "<image>"
HUB_ID = "deepseek-community/DeepSeek-OCR-2"  # the transformers-format weights
PROMPT_HASH_CHARS = 12  # hex digits of a custom prompt's hash in the engine's identity

# (n, window) of the repetition guard: the official settings for PDFs, then a stronger one for the retry
# (shorter n-grams banned over a longer history).
GUARD = (20, 50)
RETRY_GUARD = (10, 200)
GUARD_EXEMPT = ("<td>", "</td>")  # table cells legitimately repeat

# --dtype's spellings -> the dtype's name in torch (and vLLM)
DTYPES = {"bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16", "fp16": "float16",
          "half": "float16", "float32": "float32", "fp32": "float32", "float": "float32"}


def resolve_prompt(prompt: str) -> str:
    """`markdown`, `free`, or the user's own text, which must contain `<image>`."""
    text = PROMPTS.get(prompt, prompt)
    if IMAGE_TOKEN not in text:
        raise UsageError(f"--prompt must be markdown, free, or text containing {IMAGE_TOKEN}; got {prompt!r}")
    return text


def prompt_tag(option: str, text: str) -> str:
    """The prompt as the engine's identity names it: `markdown`, `free`, or a hash of the user's text."""
    return option if option in PROMPTS else "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:PROMPT_HASH_CHARS]


def check_options(options: EngineOptions) -> None:
    """What both backends refuse at once (a usage error): no --model, an unknown --dtype."""
    if not options.model:
        raise UsageError(f"--engine deepseek-ocr2 needs --model: a local folder or a Hugging Face id "
                         f"such as {HUB_ID}")
    if options.dtype != "auto" and options.dtype.lower() not in DTYPES:
        raise UsageError(f"--dtype {options.dtype!r}: choose auto, bfloat16, float16 or float32")


def choose_dtype(dtype: str, device: str) -> str:
    """--dtype's choice, or for `auto`: bfloat16 on a GPU that computes it natively (Ampere on), float16 on an
    older one, float32 on a CPU. Imports torch only for a GPU."""
    if dtype != "auto":
        return DTYPES[dtype.lower()]
    if device.startswith("cuda"):
        import torch

        from ...gpu.device import cuda_caps

        return "bfloat16" if cuda_caps(torch, device)[0] else "float16"
    return "float32"


@dataclass
class Generated:
    """One page's generated tokens, as every backend (transformers static and continuous, vLLM) hands them to
    `output`."""

    tokens: list[int]  # generated ids, end token and padding removed
    ended: bool  # the model emitted its end token within the limit
    # The log-probability the model gave each token of `tokens` (log-softmax of its logits before the guard),
    # in order; None: the backend did not keep them (then the page has no confidence).
    logprobs: list[float] | None = None
    guard_fired: bool = False  # the repetition guard banned a token the model would have chosen


def page_output(text: str, gen: Generated, page: PageImage, info: dict[str, Any],
                specials: Sequence[str]) -> PageOutput:
    """A page's result from its decoded text (special tokens kept) and its Generated: Markdown, cropped
    figures, its blocks with their boxes, status, confidence and `info`. Every backend ends here."""
    markdown, figures = to_markdown(text, page.image, page.ref.output, specials)
    if figures:
        info["figures"] = len(figures)
    sure = confidence.tokens(gen.logprobs, gen.guard_fired) if gen.logprobs is not None else None
    if sure is not None:
        info["confidence"] = sure.as_dict()  # the manifest's copy (records.PageOutput)
    lines = page_lines(text, page.image.size, specials)
    # its record: its Markdown as it is, its tagged blocks with their boxes (no line boxes: pagerecord.py)
    return PageOutput(markdown=markdown, status=Status.OK if gen.ended else Status.TRUNCATED,
                      attachments=figures, info=info, lines=lines, tokens=len(gen.tokens), confidence=sure,
                      record=of_markdown(markdown, lines))


def rgb(image: Any) -> Any:
    """The page's image in RGB (what both backends' processors take)."""
    return image if image.mode == "RGB" else image.convert("RGB")


# -- checkpoint resolution ----------------------------------------------------------------------------

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def _offline() -> bool:
    return any(os.environ.get(v, "").strip().lower() in {"1", "true", "yes", "on"}
               for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def hub_cache() -> Path:
    """The Hugging Face hub cache, as huggingface_hub finds it (HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return Path(home).expanduser() / "hub"


def resolve_model(model: str) -> str:
    """A local checkpoint folder for `model`: the folder itself, or a Hugging Face id's cached snapshot
    (downloaded first unless HF_HUB_OFFLINE is set)."""
    local = Path(model).expanduser()
    if local.is_dir():
        if not (local / "config.json").is_file():
            raise EngineLoadError(f"--model {model}: the folder has no config.json (not a model checkpoint)")
        return str(local)
    if local.exists() or not _HUB_ID.match(model):
        raise EngineLoadError(f"--model {model}: no such model folder (nor a Hugging Face id like {HUB_ID})")
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:  # pragma: no cover - transformers depends on it
        raise EngineLoadError(f"cannot resolve {model!r}: huggingface_hub is not installed") from exc
    cache = hub_cache()
    try:
        return snapshot_download(model, cache_dir=cache, local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - LocalEntryNotFoundError and friends
        if _offline():
            raise EngineLoadError(f"model {model!r} is neither a local folder nor in the Hugging Face cache {cache}, "
                                  f"and HF_HUB_OFFLINE is set: download it first (hf download {model}) or pass "
                                  f"a local folder") from exc
    log.warning("model %s is not in the Hugging Face cache %s; downloading it (several GB)", model, cache)
    try:
        return snapshot_download(model, cache_dir=cache)
    except Exception as exc:  # noqa: BLE001 - network, auth, missing repo
        raise EngineLoadError(f"model {model!r} is not a local folder and cannot be downloaded into {cache}: "
                              f"{error_line(exc, named=False)}") from exc
