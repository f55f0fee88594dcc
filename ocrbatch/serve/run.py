"""`ocrbatch serve`: uvicorn in this process, one Converter.

At start, before listening: the open-file limit is raised (guard.py) and the engine is set up without its
weights (`Converter.check`), so that a configuration it cannot use ends the process at once: exit 2
(UsageError: deepseek-ocr2 without --model, a device that does not exist) or 5 (EngineLoadError: a package
missing). Then the weights load in the background, so that /healthz answers at once and /readyz turns 200
when they are loaded; if they cannot load, whatever the error, the server stops with its exit code (5 for
anything but a usage error).

SIGTERM or Ctrl-C: uvicorn stops accepting connections and requests in flight get --drain-s to finish; then
each is ended by the app (a JSON or Markdown answer 503, an NDJSON stream a final error line: answer.py)
and their pages not started are cancelled. uvicorn's own deadline (a few seconds later) is only a backstop.
The Converter then finishes the batch it runs, if it can within --drain-s more (a stuck engine cannot keep
the process), and unloads; the process exits 0.

An engine stuck on every device (no page finished for --stall-timeout: the stall watchdog has failed its
pages) cannot serve again: the watchdog stops the server at once, the requests in flight answered 503, and
it exits 8.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import shutil
import signal
import sys
import threading
from typing import Any, Callable

import uvicorn

from ..config import BatchCap
from ..errors import EngineLoadError, OcrbatchError, StalledError, UsageError, error_line
from .app import create_app
from .config import ServeConfig
from .guard import ConnectionGuard, connection_limit, guarded, raise_open_file_limit
from .limits import PageSlots
from .metrics import ServerMetrics
from .state import ServerState

log = logging.getLogger("ocrbatch")
BACKSTOP_S = 5.0  # after --drain-s, how long uvicorn waits for the app to end its requests before cancelling


class _Server(uvicorn.Server):
    """uvicorn's server, saying where it listens, sharing its connections with the guard, starting the app's
    drain clock when it stops accepting, and ending normally (not re-raising) on SIGTERM/SIGINT."""

    announce: Any = None
    state: ServerState | None = None

    @contextlib.contextmanager
    def capture_signals(self):
        with super().capture_signals():
            yield
            self._captured_signals = [s for s in self._captured_signals
                                      if s not in (signal.SIGTERM, signal.SIGINT)]

    async def startup(self, sockets=None) -> None:
        if self.state is not None:
            self.state.guard.connections = self.server_state.connections
        await super().startup(sockets=sockets)
        if self.started and self.announce is not None:
            host, port = self.servers[0].sockets[0].getsockname()[:2]
            self.announce(host, port)

    async def shutdown(self, sockets=None) -> None:
        if self.state is not None:
            self.state.start_drain()
        await super().shutdown(sockets=sockets)


def serve(converter_options: dict[str, Any], config: ServeConfig, *, verbose: int = 0, quiet: bool = False) -> int:
    from ..converter import Converter
    from ..gpu.nvml import ResourceSampler

    soft, hard = raise_open_file_limit()
    limit = connection_limit(config.max_connections, soft)
    if limit < config.max_connections:
        log.warning("at most %d connections (not --max-connections %d): the open-file limit is %d (ulimit -n; "
                    "hard limit %d)", limit, config.max_connections, soft, hard)
    conv = Converter(**converter_options)
    try:
        conv.check()  # the engine's own checks, before listening: exit 2 or 5 now, not a server never ready
    except BaseException:
        conv.close(wait=False)
        raise
    slots = PageSlots(config.max_queue)
    guard = ConnectionGuard(limit, config.header_timeout_s)
    sampler = ResourceSampler(interval=5.0)
    metrics = ServerMetrics(conv.stats, slots, guard, lambda: state.active, sampler.latest)
    guard.cut = lambda reason: metrics.cut.labels(reason).inc()
    state = ServerState(conv, config, slots, metrics, guard)
    failed: list[OcrbatchError] = []
    server: _Server

    def stop(error: OcrbatchError, why: str) -> None:
        """The engine cannot serve: stop the server; `error` is raised once it has stopped (cli._exit_with says
        it, with its exit code)."""
        failed.append(error)
        state.broken = why
        server.should_exit = True

    def load() -> None:
        try:
            conv.load()
        except OcrbatchError as exc:
            stop(exc, f"the engine could not be loaded: {exc}")
        except Exception as exc:  # noqa: BLE001 - whatever it is, the server cannot serve: it stops
            error = EngineLoadError(f"the engine could not be loaded: {error_line(exc)}")
            error.__cause__ = exc
            stop(error, str(error))

    @contextlib.asynccontextmanager
    async def lifespan(app):
        sampler.start()
        loading = _in_daemon_thread(load, "load")
        watchdog = conv.watchdog  # the Converter's: its devices, its decode threads, and now the server
        stuck = watchdog.watch(_StuckEverywhere(conv.stats, stop, stopping=lambda: server.should_exit))
        try:
            yield
        finally:
            watchdog.unwatch(stuck)
            # The engine's batch in progress may finish, but within a bound: a stuck engine must not keep
            # the process (its threads are daemons: they end with it).
            bound = (0 if state.broken else config.drain_s) + BACKSTOP_S
            await asyncio.wait({loading}, timeout=bound)
            closing = _in_daemon_thread(lambda: conv.close(True), "close")
            done, _ = await asyncio.wait({closing}, timeout=bound)
            if not done:
                log.warning("the engine did not finish its batch within %g s of the drain; stopping without it",
                            bound)
            sampler.stop()
            shutil.rmtree(state.tmp, ignore_errors=True)

    def announce(host: str, port: int) -> None:
        if not quiet:
            sys.stderr.write(f"ocrbatch: serving on http://{host}:{port} (engine {conv.engine}, "
                             f"max batch {BatchCap.parse(conv.config.max_batch).text}, max queue {config.max_queue} "
                             f"pages, max connections {limit}{', token required' if config.token else ''})\n")
            sys.stderr.flush()

    app = create_app(state, lifespan=lifespan)
    level = "info" if verbose else "error" if quiet else "warning"
    uv_config = uvicorn.Config(app, host=config.host, port=config.port, lifespan="on", log_level=level,
                               access_log=verbose > 1, timeout_graceful_shutdown=config.drain_s + BACKSTOP_S,
                               server_header=False, http=guarded(_protocol_base(), guard))
    server = _Server(uv_config)
    server.announce = announce
    server.state = state
    try:
        server.run()
    except SystemExit:  # uvicorn's answer to a port it cannot bind (it has logged why)
        if server.started:
            raise
    if failed:
        raise failed[0]
    if not server.started:
        raise UsageError(f"cannot listen on {config.host}:{config.port} (in use, or not an address of this "
                         "machine)")
    return 0


class _StuckEverywhere:
    """The server as the stall watchdog sees it (pipeline/watchdog.py): a device whose engine is stuck has its pages
    failed by the watchdog (--stall-timeout), but it takes no more; once every device is stuck, the server
    stops (exit 8) so that it can be restarted; unless it is stopping already (a SIGTERM: exit 0)."""

    def __init__(self, stats: Callable[[], dict[str, Any]], stop: Callable[[OcrbatchError, str], None],
                 stopping: Callable[[], bool]) -> None:
        self.stats, self.stop, self.stopping, self.stopped = stats, stop, stopping, False

    def stalled_for(self, now: float) -> float:
        if self.stopped or self.stopping():
            return 0.0
        stats = self.stats()
        everywhere = bool(stats["devices"]) and set(stats["stalled"]) >= set(stats["devices"])
        return math.inf if everywhere else 0.0

    def reason(self, timeout: float) -> str:
        return (f"the engine is stuck on {', '.join(self.stats()['stalled'])} (no page finished for "
                f"--stall-timeout {timeout:g} s)")

    def give_up(self, why: str) -> None:
        self.stopped = True
        self.stop(StalledError(why + "; the server stopped"), why)


def _in_daemon_thread(fn: Callable[[], None], name: str) -> asyncio.Future:
    """Run `fn` (which raises nothing) in a daemon thread; the future is done when it returns."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def run() -> None:
        try:
            fn()
        finally:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(lambda: done.done() or done.set_result(None))

    threading.Thread(target=run, name=f"serve-{name}", daemon=True).start()
    return done


def _protocol_base() -> type:
    """uvicorn's HTTP/1.1 protocol class of choice: httptools where installed, else h11."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    return AutoHTTPProtocol
