"""rapidocr, the embedded engine (PP-OCR on onnxruntime or OpenVINO, on the CPU): what it brings to ocrbatch
(engines/plugin.py). Light to import: its front class and checks are named, imported when used."""

from __future__ import annotations

from ..plugin import ENGINE_FLAG, ENGINE_OPTIONS, EnginePlugin, Option

OPTIONS = (
    Option("model_size", "text", "auto", "rapidocr: auto (the document recognizer reads every line, the small one "
           "again those it is unsure of: small's accuracy, faster), small (PP-OCRv6 small models throughout) or tiny "
           "(tiny detector too: fastest, fewer words read right).", ENGINE_FLAG, choices=("auto", "tiny", "small"),
           to=ENGINE_OPTIONS),
    Option("reread_below", "float", 0.987, "rapidocr --model-size auto or tiny: a line the first recognizer is "
           "less sure of than this (0-1; its weakest characters' probability) is read again with the small one, "
           "and the small one's reading kept (0: none, 1: every line).", ENGINE_FLAG, metavar="SCORE", least=0.0,
           most=1.0, to=ENGINE_OPTIONS),
    Option("int8", "switch", False, "rapidocr: read lines with static int8 copies of the recognizers, built from the "
           "wheel's models at first use (needs the onnx package; cached under ~/.cache/ocrbatch/int8). Opt-in: "
           "faster on CPUs with VNNI, but reads fewer words right (ocrbatch doctor says which runs).", ENGINE_FLAG,
           to=ENGINE_OPTIONS),
    Option("runtime", "text", "auto", "rapidocr: what runs its recognizers: auto (OpenVINO in bfloat16 on CPUs "
           "with AMX, where it is 2-3x faster; onnxruntime elsewhere), openvino or onnxruntime (ocrbatch doctor says "
           "which runs).", ENGINE_FLAG, choices=("auto", "openvino", "onnxruntime"),
           to=ENGINE_OPTIONS),
    Option("script", "text", "auto", "rapidocr: which scripts its recognizers read: auto (the document "
           "recognizer, Latin only, reads first; its unsure lines and lines of other scripts the small recognizer's "
           "full head reads again), latin (Latin heads throughout: faster, other scripts are lost) or all (the "
           "wheel's full heads throughout; ocrbatch doctor says which run).",
           ENGINE_FLAG, choices=("auto", "latin", "all"), to=ENGINE_OPTIONS),
)

ENGINES = (
    EnginePlugin("rapidocr", "ocrbatch.engines.rapid:RapidOcrEngine", about="embedded, CPU",
                 title="Embedded engine (rapidocr)", options=OPTIONS,
                 doctor="ocrbatch.engines.rapidocr.doctor:checks"),
)
