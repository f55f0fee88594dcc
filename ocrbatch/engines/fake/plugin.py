"""The fake engines, for tests, dry runs and load tests: what they bring to ocrbatch (engines/plugin.py)."""

from __future__ import annotations

from typing import Mapping

from ..plugin import EnginePlugin, Finding


def checks(found: Mapping[str, Finding]) -> list[Finding]:
    return [Finding("fake", True, "built in, for tests and dry runs (describes pages, reads no text)")]


ENGINES = (
    EnginePlugin("fake", "ocrbatch.engines.fake:FakeEngine", about="describes pages",
                 doctor="ocrbatch.engines.fake.plugin:checks"),
    EnginePlugin("fake-timed", "ocrbatch.engines.fake:TimedFakeEngine", about="load tests"),
)
