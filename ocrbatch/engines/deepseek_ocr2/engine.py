"""DeepSeek-OCR-2 through transformers' own model class: batched greedy generation, loops caught.

Every page of a batch goes through one `generate` call, left-padded, whatever its size (pages with more
crops simply have longer prompts). The image preprocessing runs on the decode threads, straight into
pooled host tiles; the infer worker copies a batch's tiles to the device while the batch before it computes
(inputs.py, gpu/staging.py). Greedy decoding with left padding gives each page the tokens it would
get alone. A windowed no-repeat-n-gram guard (ngram_guard.py) breaks most repetition loops; a page that
still ends without the end token is run again alone with a stronger guard, and if it loops again it is
written as it stands with status `truncated`: no page is dropped.

Heavy imports (torch, transformers) happen in `load()`; constructing the engine and `bucket_key` need
neither, so the batcher can group pages by crop count before the model is loaded.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import threading
from pathlib import Path
from typing import Any, Hashable, Sequence

from ...config import EngineOptions, check
from ...errors import EngineLoadError, error_line
from ...records import PageImage, PageOutput
from ..base import Capabilities, Decoder, Engine, RunnerStats
from .common import (GUARD, GUARD_EXEMPT, PROMPTS, RETRY_GUARD, Generated, check_options, choose_dtype, page_output,
                     prompt_tag, resolve_model, resolve_prompt, rgb)
from .inputs import Tiling
from .loading import load_model, load_step, quantization, quiet_transformers

log = logging.getLogger("ocrbatch")

DEFAULT_BUFFER_PAGES = 32  # pages in pool slots at once, when the run does not say (EngineOptions.buffer_pages)

class _Shared:
    """What a front and the runners it makes share: the checked checkpoint, and the preprocessor whose pool the
    front prepares pages into and the runners free them from (and report on)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.path: str | None = None  # the checked checkpoint folder
        self.prep: Any = None  # inputs.Preprocessor, made by the first prepare()


class DeepseekOcr2Engine(Engine):
    name = "deepseek-ocr2"
    capabilities = Capabilities(uses_gpu=True, stages=True, streams=True)

    def __init__(self, options: EngineOptions) -> None:
        super().__init__(options)
        check_options(options)
        check({"max_new_tokens": options.max_new_tokens, "quantize": options.quantize})
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
        self._shared = _Shared()
        self._staging: Any = None  # gpu.staging.DeviceStaging, made by load()
        # Called on every row's scores before the greedy choice, with the rows' pages and their tokens so far:
        # (pages, steps, scores) -> scores. Benchmarks end pages at drawn lengths with it (LengthHook); tests too.
        self.row_hook: Any = None
        from ...gpu.throughput import SlotFigures

        self.slots = SlotFigures()  # the static path's slot use (the continuous decoder keeps its own)

    # -- the interface ---------------------------------------------------------------------------
    def runner(self) -> "DeepseekOcr2Engine":
        """A runner for one more device, sharing this front's checkpoint check and preprocessor (it frees the
        pages the front prepared, and reports on their pool)."""
        twin = super().runner()
        twin._shared = self._shared
        return twin

    @property
    def _prep(self) -> Any:
        return self._shared.prep

    @_prep.setter
    def _prep(self, prep: Any) -> None:
        self._shared.prep = prep

    def identity(self) -> str:
        model = str(self._local) if self._local else self.options.model
        prompt = prompt_tag(self.options.prompt, self.prompt)
        quantize = f" quantize={self.options.quantize}" if self.options.quantize != "none" else ""
        return f"{self.name} model={model} prompt={prompt} max_new_tokens={self.options.max_new_tokens}{quantize}"

    def describe(self) -> dict[str, Any]:
        return {"engine": self.name, "model": self.options.model,
                "prompt": self.options.prompt if self.options.prompt in PROMPTS else "custom",
                "max_new_tokens": self.options.max_new_tokens, "quantize": self.options.quantize,
                "schedule": self.options.schedule}

    def device_facts(self) -> dict[str, Any]:
        facts: dict[str, Any] = {"device": self.device, "dtype": self.dtype, "attention": self.attention}
        if self.tf32:
            facts["matmul"] = "tf32"
        facts["pages_retried"] = self.retried
        return facts

    def bucket_key(self, page: PageImage) -> Hashable:
        """The processor's crop count: pages with equal counts have prompts of equal length."""
        w, h = page.size
        return self.tiling.crops(w, h)

    def _checkpoint(self) -> str:
        """The checkpoint folder, once checked: torch and transformers 5 there, a DeepSeek-OCR-2 in
        transformers format (the same one-line errors whichever thread asks first)."""
        with self._shared.lock:
            if self._shared.path is None:
                self._shared.path = self._check_checkpoint()
            return self._shared.path

    def _check_checkpoint(self) -> str:
        missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
        if missing:
            raise EngineLoadError(f"the deepseek-ocr2 engine needs {' and '.join(missing)}: "
                                  f"pip install 'ocrbatch[gpu]' (install torch for your platform first)")
        from . import checkpoint

        # The official layout (deepseek-ai's) is read through a view in transformers' layout (checkpoint.py).
        path = checkpoint.view(resolve_model(self.options.model or ""), checkpoint.TRANSFORMERS)
        import transformers

        if not hasattr(transformers, "DeepseekOcr2ForConditionalGeneration"):
            raise EngineLoadError(f"transformers {transformers.__version__} has no DeepSeek-OCR-2 model; "
                                  f"the deepseek-ocr2 engine needs transformers 5 or newer")
        return path

    def load(self, device: str) -> None:
        path = self._checkpoint()
        import torch
        import transformers

        from ...gpu.staging import DeviceStaging

        if device.startswith("cuda") and not torch.cuda.is_available():
            raise EngineLoadError(f"device {device} requested but torch sees no CUDA GPU "
                                  f"(torch {torch.__version__})")
        if device.startswith("cuda"):
            torch.cuda.set_device(device)  # this infer thread's current device: kernels and caches land there
        dtype = choose_dtype(self.options.dtype, device)
        if device.startswith("cuda"):
            torch.set_float32_matmul_precision("high")  # TF32 for float32 matmuls (cuDNN convs default to it)
            self.tf32 = True
        if self.options.threads and device == "cpu":
            torch.set_num_threads(self.options.threads)
        quantized = quantization(transformers, torch, self.options.quantize, getattr(torch, dtype), device)
        with quiet_transformers():
            self.processor = load_step(path, "processor", lambda: transformers.AutoProcessor.from_pretrained(path))
            model, attn = load_model(transformers, path, getattr(torch, dtype),
                                      self._choose_attention(device, dtype), quantized)
        self.model = (model if quantized else model.to(device)).eval()  # quantized weights are placed by loading
        self.device, self.dtype = device, dtype
        self.attention = "flash_attention_2 (text), sdpa (vision)" if isinstance(attn, dict) else attn
        self._setup_tokens(path)
        most = self.options.batch_pages
        if self.options.page_lengths:
            self.row_hook = LengthHook(dict(self.options.page_lengths), self._end_ids[0])
        self._staging = DeviceStaging(device, reserve={"global": most, "crops": most * self.tiling.max_crops}
                                      if most else None)

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
        self._prompt_pad_id = tok.pad_token_id  # what the processor pads prompts with
        self._exempt = [ids[0] for ids in (tok.encode(t, add_special_tokens=False) for t in GUARD_EXEMPT)
                        if len(ids) == 1]
        self._specials = [t for t in (tok.bos_token, tok.eos_token, tok.pad_token) if t]
        image_settings = {k: getattr(self.processor.image_processor, k, None)
                          for k in ("tile_size", "min_patches", "max_patches", "crop_to_patches")}
        self.tiling = Tiling.from_settings({k: v for k, v in image_settings.items() if v is not None})

    # -- a page's way through: prepare (decode thread) → stage → infer → release (infer thread) ---------------
    def prepare(self, page: PageImage) -> PageImage:
        """Preprocess `page` into pool slots; blocks while the pool's slots are all out (back-pressure)."""
        prep = self._preprocessor()
        waited = prep.pool.waited_s()
        prepared = prep.prepare(rgb(page.image))
        return dataclasses.replace(page, prepared=prepared, held_s=prep.pool.waited_s() - waited)

    def warm(self) -> None:
        """torch and transformers imported, the checkpoint checked, the processor loaded (the first prepare's
        work: tens of seconds in a fresh process on a loaded machine)."""
        self._preprocessor()

    def stage(self, pages: Sequence[PageImage]) -> None:
        """Start copying the prepared pages' tiles into this device's buffers (on CUDA: a side stream)."""
        from .inputs import stage

        stage(self._staging, [p.prepared for p in pages if p.prepared is not None])

    def release(self, pages: Sequence[PageImage]) -> None:
        from .inputs import release

        release([p.prepared for p in pages if p.prepared is not None])

    def abort(self) -> None:
        if self._prep is not None:
            self._prep.pool.close()

    def stats(self) -> RunnerStats:
        pool = self._prep.stats() if self._prep is not None else {}
        staging = self._staging.stats() if self._staging is not None else {}
        return RunnerStats(allocations=pool.get("allocations", 0) + staging.get("allocations", 0),
                           copy_s=staging.get("copy_s", 0.0), slots=pool.get("slots", 0),
                           filled=pool.get("waits", 0) > 0, pinned=bool(pool.get("pinned")))

    def infer(self, pages: Sequence[PageImage]) -> list[PageOutput | Exception]:
        """Pages that did not come through the pipeline (no `prepare`) are prepared here, and freed after. Pages
        staged here (not by the worker beforehand) leave the device buffers when done, whatever happened, so
        that the halves of a failed batch always find a free buffer set."""
        from .inputs import unstage

        own: list[PageImage] = []
        ready: list[PageImage] = []
        try:
            for page in pages:
                if page.prepared is None:
                    page = self.prepare(page)
                    own.append(page)
                ready.append(page)
            mine = [p.prepared for p in ready if p.prepared.staged is None]
            try:
                self.stage(ready)
                return self._infer(ready)
            finally:
                unstage(mine)
        finally:
            self.release(own)

    def _infer(self, pages: Sequence[PageImage]) -> list[PageOutput | Exception]:
        first = self._generate(pages, GUARD)
        # A benchmark (fixed or drawn lengths) runs into the limit on purpose: not a loop to retry.
        no_retry = self.options.min_new_tokens >= self.options.max_new_tokens or bool(self.options.page_lengths)
        outs: list[PageOutput | Exception] = []
        for page, gen in zip(pages, first):
            info: dict[str, Any] = {}
            if not gen.ended and not no_retry:
                # A loop the guard did not break, or a page longer than the limit: once more, alone, harder.
                info["retried"] = True
                try:
                    gen = self._generate([page], RETRY_GUARD)[0]
                except Exception as exc:  # noqa: BLE001 - keep the first attempt rather than lose the page
                    info["retry_error"] = error_line(exc, named=False)
            outs.append(self.output(page, gen, info))
        return outs

    def output(self, page: PageImage, gen: Generated, info: dict[str, Any]) -> PageOutput:
        """A page's result from its generated tokens: Markdown, cropped figures, status and facts."""
        info = {"crops": page.prepared.crops, **info, "tokens": len(gen.tokens)}
        if info.get("retried"):
            self.retried += 1
        text = self.processor.tokenizer.decode(gen.tokens, skip_special_tokens=False)
        return page_output(text, gen, page, info, self._specials)

    def decoder(self) -> "Decoder | None":
        """The continuous decoder (continuous.py) when the run schedules that way; None: static
        batches through `infer`."""
        if self.options.schedule != "continuous" or self.model is None:
            return None
        from .continuous import ContinuousDecoder

        return ContinuousDecoder(self)

    def after_out_of_memory(self) -> None:
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.empty_cache()

    def close(self) -> None:
        was_cuda = self.device.startswith("cuda")
        self.model = None
        self.processor = None
        if self._staging is not None:
            self._staging.close()
        if was_cuda:
            import torch

            torch.cuda.empty_cache()

    # -- internals -------------------------------------------------------------------------------
    def _preprocessor(self) -> Any:
        """Made by the first decode thread that asks, with its own processor (tokenizers are not shared
        between threads); pinned slots for a GPU (EngineOptions.pin_memory)."""
        with self._shared.lock:
            if self._shared.prep is None:
                path = self._checkpoint()
                import torch
                import transformers

                from .inputs import Preprocessor

                with quiet_transformers():
                    processor = load_step(path, "processor",
                                           lambda: transformers.AutoProcessor.from_pretrained(path))
                ip = processor.image_processor
                tiling = Tiling.from_settings({k: getattr(ip, k) for k in ("tile_size", "min_patches", "max_patches",
                                                                          "crop_to_patches") if hasattr(ip, k)})
                self._shared.prep = Preprocessor(
                    processor, self.prompt, tiling, self.options.buffer_pages or DEFAULT_BUFFER_PAGES,
                    pin=torch.cuda.is_available() and self.options.pin_memory is not False,
                    reserve=self.options.reserve_buffers)
            return self._prep

    def _generate(self, pages: Sequence[PageImage], guard: tuple[int, int]) -> list[Generated]:
        import torch
        from transformers import GenerationConfig, LogitsProcessorList

        from .inputs import batch_inputs
        from .ngram_guard import NgramGuard

        inputs = batch_inputs([p.prepared for p in pages], self._prompt_pad_id, self.device, self.model.dtype)
        prompt_len = inputs["input_ids"].shape[1]
        fixed = {"min_new_tokens": self.options.min_new_tokens} if self.options.min_new_tokens else {}
        gen_config = GenerationConfig(max_new_tokens=self.options.max_new_tokens, do_sample=False, num_beams=1,
                                      eos_token_id=self._end_ids, pad_token_id=self._pad_id,
                                      bos_token_id=self.model.generation_config.bos_token_id, **fixed)
        n, window = guard
        hook = _RowHookProcessor(self.row_hook, list(pages), prompt_len) if self.row_hook is not None else None
        scored = _TokenScores(NgramGuard(n, window, prompt_len, self._exempt), hook)
        with torch.inference_mode():
            out = self.model.generate(**inputs, generation_config=gen_config,
                                      logits_processor=LogitsProcessorList([scored]))
        rows = out[:, prompt_len:].tolist()
        ends = set(self._end_ids)
        cuts = [next((i for i, t in enumerate(row) if t in ends), None) for row in rows]
        results = []
        for row, cut, (logprobs, fired) in zip(rows, cuts, scored.rows([len(r) if c is None else c + 1
                                                                         for r, c in zip(rows, cuts)])):
            results.append(Generated(row if cut is None else row[:cut], cut is not None,
                                      logprobs[:len(row) if cut is None else cut], fired))
        steps = len(rows[0]) if rows else 0
        self.slots.steps += steps
        self.slots.slot_steps += steps * len(rows)
        self.slots.row_steps += steps * len(rows)
        self.slots.useful += sum(min(steps, len(g.tokens) + g.ended) for g in results)
        return results

    @staticmethod
    def _choose_attention(device: str, dtype: str) -> str | dict[str, str]:
        """flash-attn for the language model when it is installed, on a CUDA GPU it supports (compute capability
        8.0 or later: it refuses older ones at the first forward), in 16-bit precision; SDPA otherwise, and
        always for the vision towers (transformers has no flash-attn path for their attention)."""
        if (device.startswith("cuda") and dtype != "float32"
                and importlib.util.find_spec("flash_attn") is not None):
            import torch

            from ...gpu.device import cuda_caps

            if cuda_caps(torch, device)[1] >= (8, 0):
                return {"": "sdpa", "vision_config": "sdpa", "text_config": "flash_attention_2"}
        return "sdpa"


class _TokenScores:
    """`generate`'s logits processors: the guard, then the row hook (benchmarks, tests). At every step it keeps
    the log-probability of the token greedy decoding then chooses (under the scores as they came, before the
    guard) and whether the guard changed the model's choice."""

    def __init__(self, guard: Any, hook: Any = None) -> None:
        self.guard, self.hook = guard, hook
        self.logprobs: list[Any] = []  # per step: (rows,) on the device
        self.changed: list[Any] = []

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        logp = scores.float().log_softmax(-1)
        best = scores.argmax(-1)
        out = self.guard(input_ids, scores)
        self.changed.append(out.argmax(-1) != best)
        if self.hook is not None:
            out = self.hook(input_ids, out)
        self.logprobs.append(logp.gather(-1, out.argmax(-1)[:, None])[:, 0])
        return out

    def rows(self, lengths: Sequence[int]) -> list[tuple[list[float], bool]]:
        """Each row's log-probabilities over its first `length` steps, and whether the guard fired there."""
        import torch

        if not self.logprobs:
            return [([], False) for _ in lengths]
        lp = torch.stack(self.logprobs, 1).tolist()
        changed = torch.stack(self.changed, 1).tolist()
        return [(lp[i][:n], any(changed[i][:n])) for i, n in enumerate(lengths)]


class _RowHookProcessor:
    """`generate`'s view of a row hook: every row is at the same step."""

    def __init__(self, hook: Any, pages: list[PageImage], prompt_len: int) -> None:
        self.hook, self.pages, self.prompt_len = hook, pages, prompt_len

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        step = input_ids.shape[1] - self.prompt_len
        return self.hook(self.pages, [step] * len(self.pages), scores)


class LengthHook:
    """Benchmarks: each page ends after the number of tokens drawn for it (`lengths`, by file name), or runs
    into the limit when it has none; its end token is taken nowhere else."""

    def __init__(self, lengths: dict[str, int], end_id: int) -> None:
        self.lengths, self.end_id = lengths, end_id

    def __call__(self, pages: Sequence[PageImage], steps: Sequence[int], scores: Any) -> Any:
        scores[:, self.end_id] = float("-inf")
        for i, (page, step) in enumerate(zip(pages, steps)):
            if self.lengths.get(page.ref.source.path.name) == step:
                scores[i] = float("-inf")
                scores[i, self.end_id] = 0.0
        return scores


# -- helpers -----------------------------------------------------------------------------------------


def _as_list(value: Any) -> list[int]:
    if value is None:
        return []
    return [int(v) for v in value] if isinstance(value, (list, tuple)) else [int(value)]
