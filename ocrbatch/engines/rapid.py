"""The embedded engine: PP-OCR through the `rapidocr` package, whose wheel ships its ONNX models.

It finds text lines with boxes; the layout step turns them into Markdown. Runs on a fresh CPU machine
with no download.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

from ..errors import EngineLoadError
from ..layout import lines_to_markdown
from ..records import PageImage, PageOutput, TextLine
from .base import Engine


class RapidOcrEngine(Engine):
    name = "rapidocr"

    def load(self, device: str) -> None:
        try:
            import numpy  # noqa: F401
            from rapidocr import RapidOCR
        except ImportError as exc:
            raise EngineLoadError(f"the rapidocr engine needs the rapidocr and onnxruntime packages: {exc}") from exc
        threads = self.options.threads or max(1, min(os.cpu_count() or 1, 4))
        params: dict[str, Any] = {
            "Global.log_level": "critical",
            "Global.use_cls": False,
            "Rec.rec_batch_num": 6,
            "EngineConfig.onnxruntime.intra_op_num_threads": threads,
            "EngineConfig.onnxruntime.inter_op_num_threads": 1,
        }
        try:
            self._ocr = RapidOCR(params=params)
        except Exception as exc:  # rapidocr raises plain exceptions for missing models
            raise EngineLoadError(f"cannot start rapidocr: {exc}") from exc
        self.device = device

    def infer(self, pages: Sequence[PageImage]) -> list[PageOutput | Exception]:
        import numpy as np

        outs: list[PageOutput | Exception] = []
        for page in pages:
            # BGR numpy, never a path string (rapidocr downloads strings that look like URLs).
            bgr = np.ascontiguousarray(np.asarray(page.image.convert("RGB"))[:, :, ::-1])
            result = self._ocr(bgr)
            lines = _lines(result)
            w, h = page.size
            outs.append(PageOutput(markdown=lines_to_markdown(lines, w, h), info={"lines": len(lines)}))
        return outs

    def describe(self) -> dict[str, Any]:
        return {"engine": self.name, "models": "PP-OCRv6 small (ONNX, CPU)"}


def _lines(result: Any) -> list[TextLine]:
    boxes = getattr(result, "boxes", None)
    if boxes is None:
        return []
    lines = []
    for quad, text, score in zip(boxes, result.txts, result.scores):
        xs = [float(p[0]) for p in quad]
        ys = [float(p[1]) for p in quad]
        lines.append(TextLine(str(text), (min(xs), min(ys), max(xs), max(ys)), float(score)))
    return lines
