"""A deterministic engine for tests and dry runs: describes the page instead of reading it."""

from __future__ import annotations

import hashlib
from typing import Sequence

from ...records import PageImage, PageOutput
from ..base import Engine


class FakeEngine(Engine):
    name = "fake"

    def load(self, device: str) -> None:
        self.device = device

    def infer(self, pages: Sequence[PageImage]) -> list[PageOutput | Exception]:
        outs: list[PageOutput | Exception] = []
        for p in pages:
            digest = hashlib.sha256(p.image.convert("L").resize((32, 32)).tobytes()).hexdigest()[:16]
            w, h = p.size
            md = (f"# {p.ref.source.path.name}, page {p.ref.page}\n\n"
                  f"Image {w}x{h} px, content digest {digest}.\n")
            outs.append(PageOutput(markdown=md))
        return outs


class TimedFakeEngine(FakeEngine):
    """The fake engine with a GPU-like cost: each batch sleeps a fixed time plus a smaller one per page, so
    batching pays off as it does on a real model. For load tests of `ocrbatch serve` (scripts/loadgen.py).
    Costs from OCRBATCH_FAKE_BATCH_MS (default 100) and OCRBATCH_FAKE_PAGE_MS (default 10)."""

    name = "fake-timed"

    def load(self, device: str) -> None:
        import os

        from ...errors import EngineLoadError

        super().load(device)
        try:
            self.batch_s = float(os.environ.get("OCRBATCH_FAKE_BATCH_MS", "100")) / 1000.0
            self.page_s = float(os.environ.get("OCRBATCH_FAKE_PAGE_MS", "10")) / 1000.0
        except ValueError as exc:
            raise EngineLoadError(f"fake-timed: OCRBATCH_FAKE_BATCH_MS/OCRBATCH_FAKE_PAGE_MS: {exc}") from exc

    def infer(self, pages: Sequence[PageImage]) -> list[PageOutput | Exception]:
        import time

        time.sleep(self.batch_s + self.page_s * len(pages))
        return super().infer(pages)
