"""`ocrbatch serve`: uvicorn in this process, one Converter, the engine loaded once (in the background, so
/healthz answers at once and /readyz turns 200 when it is loaded).

SIGTERM or Ctrl-C: uvicorn stops accepting connections, lets requests in flight finish (up to --drain-s,
then cancels them, which cancels their pages), then the Converter finishes what it runs and unloads; the
process exits 0. An engine that cannot load stops the server with exit code 5 (EngineLoadError).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import signal
import sys
from typing import Any

import uvicorn

from ..errors import EngineLoadError
from .app import ServerState, create_app
from .config import ServeConfig
from .limits import PageSlots
from .metrics import ServerMetrics

log = logging.getLogger("ocrbatch")


class _Server(uvicorn.Server):
    """uvicorn's server, saying where it listens, and ending normally (not re-raising) on SIGTERM/SIGINT."""

    announce: Any = None

    @contextlib.contextmanager
    def capture_signals(self):
        with super().capture_signals():
            yield
            self._captured_signals = [s for s in self._captured_signals
                                      if s not in (signal.SIGTERM, signal.SIGINT)]

    async def startup(self, sockets=None) -> None:
        await super().startup(sockets=sockets)
        if self.started and self.announce is not None:
            host, port = self.servers[0].sockets[0].getsockname()[:2]
            self.announce(host, port)


def serve(converter_options: dict[str, Any], config: ServeConfig, *, verbose: int = 0, quiet: bool = False) -> int:
    from ..converter import Converter
    from ..gpu.nvml import ResourceSampler

    conv = Converter(**converter_options)
    slots = PageSlots(config.max_queue)
    sampler = ResourceSampler(interval=5.0)
    metrics = ServerMetrics(conv.stats, lambda: (slots.used, slots.capacity), sampler.latest)
    state = ServerState(conv, config, slots, metrics)
    server: _Server

    def load() -> None:
        try:
            conv.load()
        except EngineLoadError as exc:
            state.load_error = str(exc)
            log.error("%s", exc)
            server.should_exit = True

    @contextlib.asynccontextmanager
    async def lifespan(app):
        sampler.start()
        loading = asyncio.ensure_future(asyncio.to_thread(load))
        try:
            yield
        finally:
            await asyncio.gather(loading, return_exceptions=True)
            await asyncio.to_thread(conv.close, True)
            sampler.stop()
            shutil.rmtree(state.tmp, ignore_errors=True)

    def announce(host: str, port: int) -> None:
        if not quiet:
            sys.stderr.write(f"ocrbatch: serving on http://{host}:{port} (engine {conv.engine}, "
                             f"max batch {converter_options['max_batch']}, max queue {config.max_queue} "
                             f"pages{', token required' if config.token else ''})\n")
            sys.stderr.flush()

    app = create_app(state, lifespan=lifespan)
    level = "info" if verbose else "error" if quiet else "warning"
    uv_config = uvicorn.Config(app, host=config.host, port=config.port, lifespan="on", log_level=level,
                               access_log=verbose > 1, timeout_graceful_shutdown=config.drain_s,
                               server_header=False)
    server = _Server(uv_config)
    server.announce = announce
    try:
        server.run()
    except SystemExit:  # uvicorn's answer to a port it cannot bind (it has logged why)
        if server.started:
            raise
    if state.load_error is not None:
        raise EngineLoadError(state.load_error)
    if not server.started:
        from ..errors import UsageError

        raise UsageError(f"cannot listen on {config.host}:{config.port} (in use, or not an address of this "
                         "machine)")
    return 0
