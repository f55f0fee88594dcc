"""The server's own options (the engine's are the Converter's): the rows of config.OPTIONS to SERVE_CONFIG, whose
fields ServeConfig gets from them (config.typed_config)."""

from __future__ import annotations

from typing import Mapping

from ..config import MAX_BATCH_START, OPTION, by_code, typed_config, validate
from ..errors import UsageError
from ..pipeline.batcher import window

TOKEN_ENV = OPTION["token"].env


@typed_config
class ServeConfig:
    host: str = OPTION["host"].default
    port: int = OPTION["port"].default
    max_upload_mb: float = OPTION["max_upload_mb"].default  # a larger body is refused with 413
    max_queue: int = OPTION["max_queue"].default  # pages held at once (waiting or running); a request beyond: 503
    # pages of one request in the queue at a time (a long PDF enters as others leave): the one window policy
    # (pipeline/batcher.py) for one caller
    window: int = by_code(window(MAX_BATCH_START))
    token: str | None = OPTION["token"].default  # bearer token for /v1/*; None: open
    drain_s: float = OPTION["drain_s"].default  # after SIGTERM, how long requests in flight may take to finish
    retry_after_s: int = by_code(1)  # the Retry-After of a 503
    max_connections: int = OPTION["max_connections"].default  # beyond: only /healthz, /readyz, /metrics answered
    header_timeout_s: float = OPTION["header_timeout_s"].default  # a request's first byte to its last header line
    body_timeout_s: float = OPTION["body_timeout_s"].default  # the longest pause inside a body; then 408

    def __post_init__(self) -> None:
        validate(self)
        if self.window < 1:
            raise UsageError("the per-request window must be at least 1 page")

    @property
    def max_upload_bytes(self) -> int:
        return int(self.max_upload_mb * 1024 * 1024)


def token_from(given: str | None, environ: Mapping[str, str]) -> str | None:
    """The bearer token as settled from --token and OCRBATCH_TOKEN (`given`). The variable set but empty is
    refused where the table reads the variables (config.env_values: a template not filled in is a mistake, not
    a wish to serve without authentication), so `given` is the token or None."""
    return given
