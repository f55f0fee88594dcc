"""The server's own options (the engine's are the Converter's); their defaults and checks are rows of
config.OPTIONS (scope serve)."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import MAX_BATCH_START, OPTION, check
from ..errors import UsageError


@dataclass(frozen=True)
class ServeConfig:
    host: str = OPTION["host"].default
    port: int = OPTION["port"].default
    max_upload_mb: float = OPTION["max_upload_mb"].default  # a larger body is refused with 413
    max_queue: int = OPTION["max_queue"].default  # pages held at once (waiting or running); a request beyond: 503
    window: int = 2 * MAX_BATCH_START  # pages of one request in the queue at a time (a long PDF enters as others leave)
    token: str | None = OPTION["token"].default  # bearer token for /v1/*; None: open
    drain_s: float = OPTION["drain_s"].default  # after SIGTERM, how long requests in flight may take to finish
    retry_after_s: int = 1  # the Retry-After of a 503

    def __post_init__(self) -> None:
        check({"host": self.host, "port": self.port, "max_upload_mb": self.max_upload_mb,
               "max_queue": self.max_queue, "token": self.token, "drain_s": self.drain_s})
        if self.window < 1:
            raise UsageError("the per-request window must be at least 1 page")

    @property
    def max_upload_bytes(self) -> int:
        return int(self.max_upload_mb * 1024 * 1024)
