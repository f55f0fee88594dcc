"""What the routes (app.py) and the answers (answer.py) share about the server: one `ServerState`."""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import ServeConfig
from .guard import ConnectionGuard
from .limits import PageSlots
from .metrics import ServerMetrics


@dataclass
class ServerState:
    """What the routes share: the converter, the limits, the metrics, the engine's load outcome, the drain."""

    conv: Any  # ocrbatch.Converter
    config: ServeConfig
    slots: PageSlots
    metrics: ServerMetrics
    guard: ConnectionGuard
    tmp: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="ocrbatch-serve-")))
    broken: str | None = None  # why the engine cannot serve (it could not load, or it is stuck): the server stops
    active: int = 0  # conversions admitted and not yet answered to the end
    draining: bool = False  # SIGTERM came: no new conversions
    drained: asyncio.Event = field(default_factory=asyncio.Event)  # --drain-s has passed since

    def start_drain(self) -> None:
        """From the event loop, when the server stops accepting: requests in flight get --drain-s (none when the
        engine is broken: they could not finish)."""
        if not self.draining:
            self.draining = True
            asyncio.get_running_loop().call_later(0 if self.broken else self.config.drain_s, self.drained.set)

    def drain_message(self) -> str:
        if self.broken is not None:
            return f"the server is stopping: {self.broken}; retry on another instance"
        return (f"the server is shutting down and --drain-s {self.config.drain_s:g} s passed before this request "
                f"was finished; retry")
