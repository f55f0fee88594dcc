"""DeepSeek-OCR-2 through transformers' own model class: batched greedy generation, loops caught.

Every page of a batch goes through one `generate` call, left-padded, whatever its size (pages with more
crops simply have longer prompts). Greedy decoding with left padding gives each page the tokens it would
get alone. A windowed no-repeat-n-gram guard (ngram_guard.py) breaks most repetition loops; a page that
still ends without the end token is run again alone with a stronger guard, and if it loops again it is
written as it stands with status `truncated`: no page is dropped.

Heavy imports (torch, transformers) happen in `load()`; constructing the engine and `bucket_key` need
neither, so the batcher can group pages by crop count before the model is loaded.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Hashable, Iterator, Sequence

from ..config import EngineOptions
from ..errors import EngineLoadError, UsageError
from ..records import PageImage, PageOutput, Status
from .base import Engine
from .deepseek_post import to_markdown

log = logging.getLogger("ocrbatch")

PROMPTS = {
    "markdown": "<image>\n<|grounding|>Convert the document to markdown.",
    "free": "<image>\nFree OCR.",
}
IMAGE_TOKEN = "<image>"
HUB_ID = "deepseek-community/DeepSeek-OCR-2"  # the transformers-format weights

# (n, window) of the repetition guard: the official settings for PDFs, then a stronger one for the retry
# (shorter n-grams banned over a longer history).
GUARD = (20, 50)
RETRY_GUARD = (10, 200)
GUARD_EXEMPT = ("<td>", "</td>")  # table cells legitimately repeat

_DTYPES = {"bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16", "fp16": "float16",
           "half": "float16", "float32": "float32", "fp32": "float32", "float": "float32"}


def resolve_prompt(prompt: str) -> str:
    """`markdown`, `free`, or the user's own text, which must contain `<image>`."""
    text = PROMPTS.get(prompt, prompt)
    if IMAGE_TOKEN not in text:
        raise UsageError(f"--prompt must be markdown, free, or text containing {IMAGE_TOKEN}; got {prompt!r}")
    return text


@dataclass(frozen=True)
class Tiling:
    """How the processor cuts a page: a global view plus `tile`-pixel crops when the page is larger."""

    tile: int = 768
    min_crops: int = 2
    max_crops: int = 6
    enabled: bool = True

    def crops(self, width: int, height: int) -> int:
        """How many local crops the processor makes for a page of this size (0 when it fits one tile).

        Picks the grid (columns × rows, between min_crops and max_crops tiles) whose aspect ratio is closest
        to the page's; on a tie, the larger grid, while the page's area exceeds half the grid's.
        """
        if not self.enabled or max(width, height) <= self.tile:
            return 0
        grids = sorted(((c, r) for c in range(1, self.max_crops + 1) for r in range(1, self.max_crops + 1)
                        if self.min_crops <= c * r <= self.max_crops), key=lambda g: g[0] * g[1])
        aspect, area = width / height, width * height
        best, best_diff = (1, 1), float("inf")
        for c, r in grids:
            diff = abs(aspect - c / r)
            if diff < best_diff:
                best, best_diff = (c, r), diff
            elif diff == best_diff and area > 0.5 * self.tile * self.tile * c * r:
                best = (c, r)
        return best[0] * best[1]

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> "Tiling":
        d = cls()
        return cls(tile=int(settings.get("tile_size", d.tile)),
                   min_crops=int(settings.get("min_patches", d.min_crops)),
                   max_crops=int(settings.get("max_patches", d.max_crops)),
                   enabled=bool(settings.get("crop_to_patches", d.enabled)))

    @classmethod
    def from_folder(cls, folder: Path) -> "Tiling":
        """Read the tiling from a checkpoint folder's processor files (defaults when absent)."""
        for name, key in (("processor_config.json", "image_processor"), ("preprocessor_config.json", None)):
            try:
                data = json.loads((folder / name).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            settings = data.get(key, {}) if key else data
            if isinstance(settings, dict):
                return cls.from_settings(settings)
        return cls()


@dataclass
class _Generated:
    tokens: list[int]  # generated ids, end token and padding removed
    ended: bool  # the model emitted its end token within the limit


class DeepseekOcr2Engine(Engine):
    name = "deepseek-ocr2"
    uses_gpu = True

    def __init__(self, options: EngineOptions) -> None:
        super().__init__(options)
        if not options.model:
            raise UsageError(f"--engine deepseek-ocr2 needs --model: a local folder or a Hugging Face id "
                             f"such as {HUB_ID}")
        if options.dtype != "auto" and options.dtype.lower() not in _DTYPES:
            raise UsageError(f"--dtype {options.dtype!r}: choose auto, bfloat16, float16 or float32")
        if options.max_new_tokens < 1:
            raise UsageError("--max-new-tokens must be at least 1")
        self.prompt = resolve_prompt(options.prompt)
        local = Path(options.model).expanduser()
        self._local = local.resolve() if local.is_dir() else None
        self.tiling = Tiling.from_folder(self._local) if self._local else Tiling()
        self.device = "not loaded"
        self.dtype = options.dtype
        self.attention = "-"
        self.tf32 = False
        self.retried = 0
        self.model: Any = None
        self.processor: Any = None

    # -- the interface ---------------------------------------------------------------------------
    def identity(self) -> str:
        model = str(self._local) if self._local else self.options.model
        prompt = self.options.prompt if self.options.prompt in PROMPTS else \
            "sha256:" + hashlib.sha256(self.prompt.encode()).hexdigest()[:12]
        return f"{self.name} model={model} prompt={prompt} max_new_tokens={self.options.max_new_tokens}"

    def describe(self) -> dict[str, Any]:
        facts = {"engine": self.name, "model": self.options.model, "device": self.device, "dtype": self.dtype,
                 "attention": self.attention}
        if self.tf32:
            facts["matmul"] = "tf32"
        facts.update(prompt=self.options.prompt if self.options.prompt in PROMPTS else "custom",
                     max_new_tokens=self.options.max_new_tokens, pages_retried=self.retried)
        return facts

    def bucket_key(self, page: PageImage) -> Hashable:
        """The processor's crop count: pages with equal counts have prompts of equal length."""
        w, h = page.size
        return self.tiling.crops(w, h)

    def load(self, device: str) -> None:
        missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
        if missing:
            raise EngineLoadError(f"the deepseek-ocr2 engine needs {' and '.join(missing)}: "
                                  f"pip install 'ocrbatch[gpu]' (install torch for your platform first)")
        path = resolve_model(self.options.model or "")
        model_type = _model_type(path)
        if model_type != "deepseek_ocr2":  # e.g. deepseek_vl_v2: the original release, which needs remote code
            raise EngineLoadError(f"{self.options.model} is not a transformers-format DeepSeek-OCR-2 checkpoint "
                                  f"(model_type {model_type!r}); use {HUB_ID} or a copy of it")
        import torch
        import transformers

        if not hasattr(transformers, "DeepseekOcr2ForConditionalGeneration"):
            raise EngineLoadError(f"transformers {transformers.__version__} has no DeepSeek-OCR-2 model; "
                                  f"the deepseek-ocr2 engine needs transformers 5 or newer")
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise EngineLoadError(f"device {device} requested but torch sees no CUDA GPU "
                                  f"(torch {torch.__version__})")
        dtype = self._choose_dtype(torch, device)
        if device.startswith("cuda"):
            torch.set_float32_matmul_precision("high")  # TF32 for float32 matmuls (cuDNN convs default to it)
            self.tf32 = True
        if self.options.threads and device == "cpu":
            torch.set_num_threads(self.options.threads)
        with _quiet_transformers():
            self.processor = _load_step(path, "processor", lambda: transformers.AutoProcessor.from_pretrained(path))
            model, attn = _load_model(transformers, path, getattr(torch, dtype),
                                      self._choose_attention(device, dtype))
        self.model = model.to(device).eval()
        self.device, self.dtype = device, dtype
        self.attention = "flash_attention_2 (text), sdpa (vision)" if isinstance(attn, dict) else attn
        self._setup_tokens(path)

    def _setup_tokens(self, path: str) -> None:
        tok = self.processor.tokenizer
        tok.padding_side = "left"
        gen = self.model.generation_config
        self._end_ids = _as_list(gen.eos_token_id) or _as_list(tok.eos_token_id)
        if not self._end_ids:
            raise EngineLoadError(f"{path}: neither the generation config nor the tokenizer names an end token")
        if tok.pad_token is None:  # left padding needs one; it is never read back
            tok.pad_token = tok.eos_token
        self._pad_id = gen.pad_token_id if gen.pad_token_id is not None else tok.pad_token_id
        self._exempt = [ids[0] for ids in (tok.encode(t, add_special_tokens=False) for t in GUARD_EXEMPT)
                        if len(ids) == 1]
        self._specials = [t for t in (tok.bos_token, tok.eos_token, tok.pad_token) if t]
        image_settings = {k: getattr(self.processor.image_processor, k, None)
                          for k in ("tile_size", "min_patches", "max_patches", "crop_to_patches")}
        self.tiling = Tiling.from_settings({k: v for k, v in image_settings.items() if v is not None})

    def infer(self, pages: Sequence[PageImage]) -> list[PageOutput | Exception]:
        first = self._generate(pages, GUARD)
        outs: list[PageOutput | Exception] = []
        for page, gen in zip(pages, first):
            info: dict[str, Any] = {"crops": self.bucket_key(page)}
            if not gen.ended:
                # A loop the guard did not break, or a page longer than the limit: once more, alone, harder.
                self.retried += 1
                info["retried"] = True
                try:
                    gen = self._generate([page], RETRY_GUARD)[0]
                except Exception as exc:  # noqa: BLE001 - keep the first attempt rather than lose the page
                    info["retry_error"] = _first_line(exc)
            info["tokens"] = len(gen.tokens)
            text = self.processor.tokenizer.decode(gen.tokens, skip_special_tokens=False)
            markdown, figures = to_markdown(text, page.image, page.ref.output, self._specials)
            if figures:
                info["figures"] = len(figures)
            outs.append(PageOutput(markdown=markdown, status=Status.OK if gen.ended else Status.TRUNCATED,
                                   attachments=figures, info=info))
        return outs

    def after_out_of_memory(self) -> None:
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.empty_cache()

    def close(self) -> None:
        was_cuda = self.device.startswith("cuda")
        self.model = None
        self.processor = None
        if was_cuda:
            import torch

            torch.cuda.empty_cache()

    # -- internals -------------------------------------------------------------------------------
    def _generate(self, pages: Sequence[PageImage], guard: tuple[int, int]) -> list[_Generated]:
        import torch
        from transformers import GenerationConfig, LogitsProcessorList

        from .ngram_guard import NgramGuard

        enc = self.processor(images=[_rgb(p.image) for p in pages], text=[self.prompt] * len(pages),
                             return_tensors="pt", padding=True)
        model_dtype = self.model.dtype
        inputs = {k: (v.to(self.device, model_dtype) if k.startswith("pixel_values") else v.to(self.device))
                  if hasattr(v, "to") else v for k, v in enc.items()}
        prompt_len = inputs["input_ids"].shape[1]
        gen_config = GenerationConfig(max_new_tokens=self.options.max_new_tokens, do_sample=False, num_beams=1,
                                      eos_token_id=self._end_ids, pad_token_id=self._pad_id,
                                      bos_token_id=self.model.generation_config.bos_token_id)
        n, window = guard
        processors = LogitsProcessorList([NgramGuard(n, window, prompt_len, self._exempt)])
        with torch.inference_mode():
            out = self.model.generate(**inputs, generation_config=gen_config, logits_processor=processors)
        rows = out[:, prompt_len:].tolist()
        ends = set(self._end_ids)
        results = []
        for row in rows:
            cut = next((i for i, t in enumerate(row) if t in ends), None)
            results.append(_Generated(row if cut is None else row[:cut], cut is not None))
        return results

    def _choose_dtype(self, torch: Any, device: str) -> str:
        if self.options.dtype != "auto":
            return _DTYPES[self.options.dtype.lower()]
        if device.startswith("cuda"):
            return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
        return "float32"

    @staticmethod
    def _choose_attention(device: str, dtype: str) -> str | dict[str, str]:
        """flash-attn for the language model when it is installed, on CUDA, in 16-bit precision; SDPA otherwise,
        and always for the vision towers (transformers has no flash-attn path for their attention)."""
        if (device.startswith("cuda") and dtype != "float32"
                and importlib.util.find_spec("flash_attn") is not None):
            return {"": "sdpa", "vision_config": "sdpa", "text_config": "flash_attention_2"}
        return "sdpa"


# -- model resolution ------------------------------------------------------------------------------

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
                              f"{_first_line(exc)}") from exc


# -- helpers -----------------------------------------------------------------------------------------

def _model_type(path: str) -> str | None:
    try:
        config = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EngineLoadError(f"cannot read {Path(path) / 'config.json'}: {_first_line(exc)}") from exc
    return config.get("model_type") if isinstance(config, dict) else None


def _load_model(transformers: Any, path: str, dtype: Any, attn: str | dict[str, str]) -> tuple[Any, Any]:
    """(model, attention used): flash-attn as asked when it works, else SDPA."""
    try:
        return _load_weights(transformers, path, dtype, attn), attn
    except EngineLoadError:
        raise
    except Exception as exc:  # noqa: BLE001 - flash-attn can fail in many ways; SDPA is the fallback
        if attn == "sdpa":
            raise EngineLoadError(f"cannot load the model from {path}: {_first_line(exc)}") from exc
        log.warning("flash-attn could not be used (%s); using SDPA", _first_line(exc))
    return _load_step(path, "model", lambda: _load_weights(transformers, path, dtype, "sdpa")), "sdpa"


def _load_weights(transformers: Any, path: str, dtype: Any, attn: str | dict[str, str]) -> Any:
    """The model from `path`; a checkpoint that lacks weights is refused rather than run half-random."""
    model, info = transformers.DeepseekOcr2ForConditionalGeneration.from_pretrained(
        path, dtype=dtype, attn_implementation=attn, output_loading_info=True)
    missing = sorted(info.get("missing_keys") or [])
    if missing:
        raise EngineLoadError(f"{path}: the checkpoint lacks {len(missing)} of the model's weights "
                              f"(e.g. {missing[0]}); is it a DeepSeek-OCR-2 checkpoint in transformers format?")
    return model


def _load_step(path: str, what: str, fn: Any) -> Any:
    try:
        return fn()
    except (OSError, ValueError, KeyError) as exc:
        raise EngineLoadError(f"cannot load the {what} from {path}: {_first_line(exc)}") from exc


def _rgb(image: Any) -> Any:
    return image if image.mode == "RGB" else image.convert("RGB")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _as_list(value: Any) -> list[int]:
    if value is None:
        return []
    return [int(v) for v in value] if isinstance(value, (list, tuple)) else [int(value)]


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """No progress bars or advisory warnings from transformers while loading: the run has its own display."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()
