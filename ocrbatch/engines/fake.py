"""A deterministic engine for tests and dry runs: describes the page instead of reading it."""

from __future__ import annotations

import hashlib
from typing import Sequence

from ..records import PageImage, PageOutput
from .base import Engine


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
