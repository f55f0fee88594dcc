"""The server's own options (the engine's are the Converter's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..errors import UsageError

TOKEN_ENV = "OCRBATCH_TOKEN"


@dataclass(frozen=True)
class ServeConfig:
    host: str = "127.0.0.1"
    port: int = 8000
    max_upload_mb: float = 50.0  # a larger body is refused with 413
    max_queue: int = 256  # pages the server holds at once (waiting or running); a request beyond: 503
    window: int = 16  # pages of one request in the queue at a time (a long PDF enters as others leave)
    token: str | None = None  # bearer token for /v1/*; None: open
    drain_s: float = 30.0  # after SIGTERM, how long requests in flight may take to finish
    retry_after_s: int = 1  # the Retry-After of a 503
    max_connections: int = 1024  # open connections beyond which only /healthz, /readyz, /metrics are answered
    header_timeout_s: float = 10.0  # from a request's first byte to its last header line; then closed
    body_timeout_s: float = 30.0  # the longest wait for the next part of a body; then 408 and closed

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise UsageError(f"--port {self.port}: choose 0..65535")
        if self.max_upload_mb <= 0:
            raise UsageError("--max-upload-mb must be positive")
        if self.max_queue < 1:
            raise UsageError("--max-queue must be at least 1")
        if self.window < 1:
            raise UsageError("the per-request window must be at least 1 page")
        if self.drain_s < 0:
            raise UsageError("--drain-s cannot be negative")
        if self.token is not None and not self.token.strip():
            raise UsageError("--token is empty: give a token, or leave --token out to serve without one")
        if self.max_connections < 1:
            raise UsageError("--max-connections must be at least 1")
        if self.header_timeout_s <= 0 or self.body_timeout_s <= 0:
            raise UsageError("--header-timeout-s and --body-timeout-s must be positive")

    @property
    def max_upload_bytes(self) -> int:
        return int(self.max_upload_mb * 1024 * 1024)


def token_from(flag: str | None, environ: Mapping[str, str]) -> str | None:
    """The bearer token: --token, else OCRBATCH_TOKEN. Set but empty is a mistake (a template not filled
    in), not a wish to serve without authentication: UsageError, like an empty --token."""
    if flag is not None:
        return flag
    if environ.get(TOKEN_ENV) is not None and not environ[TOKEN_ENV].strip():
        raise UsageError(f"{TOKEN_ENV} is set but empty: give a token, or unset it to serve without one")
    return environ.get(TOKEN_ENV)
