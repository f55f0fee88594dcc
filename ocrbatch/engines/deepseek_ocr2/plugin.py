"""deepseek-ocr2, DeepSeek-OCR-2 on a GPU: what it brings to ocrbatch (engines/plugin.py). Light to import: its
front classes and checks are named, imported when used."""

from __future__ import annotations

from .. import catalog
from ..plugin import ENGINE_FLAG, ENGINE_OPTIONS, EnginePlugin, Option

# The runtimes it runs on (--backend), each its front class; the first is the default.
BACKENDS = {
    "transformers": "ocrbatch.engines.deepseek_ocr2.engine:DeepseekOcr2Engine",
    "vllm": "ocrbatch.engines.deepseek_ocr2_vllm.engine:VllmDeepseekOcr2Engine",
}

OPTIONS = (
    Option("model", "text", None, "deepseek-ocr2 weights: a local folder or a Hugging Face id.", ENGINE_FLAG,
           short=("-m",), to=ENGINE_OPTIONS),
    Option("dtype", "text", "auto", "auto, bfloat16, float16 or float32 (deepseek-ocr2).", ENGINE_FLAG,
           to=ENGINE_OPTIONS),
    Option("prompt", "text", "markdown", "markdown, free, or your own text containing <image> (deepseek-ocr2).",
           ENGINE_FLAG, to=ENGINE_OPTIONS),
    Option("max_new_tokens", "int", 8192, "Most tokens per page (deepseek-ocr2).", ENGINE_FLAG, least=1,
           to=ENGINE_OPTIONS),
    Option("schedule", "text", "continuous", "deepseek-ocr2: continuous (pages leave and join the running batch "
           "between decoding steps) or static (whole batches).", ENGINE_FLAG, choices=("continuous", "static"),
           to=ENGINE_OPTIONS),
    Option("quantize", "text", "none", "deepseek-ocr2 weights: none, int8 or nf4 (4-bit), through bitsandbytes.",
           ENGINE_FLAG, choices=("none", "int8", "nf4"), to=ENGINE_OPTIONS),
    Option("backend", "text", next(iter(BACKENDS)), "deepseek-ocr2's runtime: transformers, or vllm (vLLM's "
           "engine and scheduler; pip install 'ocrbatch[vllm]').", ENGINE_FLAG, choices_of=catalog.backend_names,
           to=ENGINE_OPTIONS),
)

ENGINES = (
    EnginePlugin("deepseek-ocr2", BACKENDS["transformers"], about="GPU, needs --model", title="DeepSeek-OCR-2",
                 backends=BACKENDS, options=OPTIONS, doctor="ocrbatch.engines.deepseek_ocr2.doctor:checks"),
)
