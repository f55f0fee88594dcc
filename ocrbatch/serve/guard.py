"""The connections: how many may be open, how long a client may take over its request's headers, and the
open-file limit they need.

    ConnectionGuard          --max-connections and --header-timeout-s; counts the connections it cuts
    guarded(base, guard)     uvicorn's HTTP protocol (h11 or httptools) with the guard mixed in
    raise_open_file_limit()  the soft RLIMIT_NOFILE raised to the hard one

uvicorn closes a connection idle between requests (its keep-alive timeout) but waits forever for the
headers of a request begun and never finished, and for a connection that sends nothing at all. The guard
gives every request --header-timeout-s from its first byte (or from the connection's start) to its last
header line, then closes the connection. Past --max-connections open connections, a request for anything but
/healthz, /readyz and /metrics is answered 503 (app.py). Past HEALTH_ROOM more, each new connection takes
the place of the oldest one still waiting for its headers (a slow client's, most likely), else of the oldest
one idle between requests or still sending a body (`_yielding`), or is closed at once when every connection
has a whole request in progress (at most --max-queue of them hold slots): the process never runs out of file
descriptors, and neither half-open connections nor clients holding partial bodies can keep a health check
out. The body's own idle limit (--body-timeout-s) is the app's (upload.py),
which answers 408.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Callable, Collection

ABORT = "ocrbatch.abort"  # the scope's extension: drop this request's connection now (answer.py: a stalled client)
HEALTH_ROOM = 16  # connections beyond --max-connections still accepted, so that health checks get through
FD_RESERVE = 128  # file descriptors kept for everything else: the engine's files, uploads, logs, threads


@dataclass
class ConnectionGuard:
    limit: int  # open connections beyond which only health and metrics are answered
    header_timeout_s: float
    cut: Callable[[str], None] = lambda reason: None  # a connection closed by the guard, and why
    connections: Collection[Any] = ()  # uvicorn's set of open connections, once it serves
    waiting: dict[Any, None] = field(default_factory=dict)  # connections waiting for headers, oldest first

    @property
    def open(self) -> int:
        return len(self.connections)

    def over(self) -> bool:
        return self.open > self.limit


def raise_open_file_limit() -> tuple[int, int]:
    """Raise the soft open-file limit to the hard one (a common soft limit of 1,024 would otherwise cap the
    connections); returns (soft, hard) as they are after. (-1, -1) where there is no such limit."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return -1, -1
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 16)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):  # pragma: no cover - a kernel cap below the hard limit
            pass
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def connection_limit(wanted: int, soft_nofile: int) -> int:
    """--max-connections, lowered to what the open-file limit leaves room for."""
    if soft_nofile < 0:
        return wanted
    return max(1, min(wanted, soft_nofile - FD_RESERVE - HEALTH_ROOM))


def _yielding(connections: Collection[Any], new: Any) -> Any:
    """The connection that gives way when the room is full and none waits for its headers: the oldest one idle
    between requests or still sending its request's body (its request ends as a client gone: 499, its slot
    freed); never one whose request is whole (being converted or answered). None when there is none."""
    def gives_way(c: Any) -> bool:
        cycle = getattr(c, "cycle", None)
        if c is new or c.transport is None or c.transport.is_closing():
            return False
        return cycle is None or cycle.response_complete or (cycle.more_body and not cycle.response_started)

    return min((c for c in connections if gives_way(c)), key=lambda c: c._since, default=None)


def guarded(base: type[asyncio.Protocol], guard: ConnectionGuard) -> type[asyncio.Protocol]:
    """A subclass of uvicorn's protocol class `base` (H11Protocol or HttpToolsProtocol: both keep the request
    in progress in `cycle`, its end in `cycle.response_complete`, the open connections in `connections`)."""

    class Guarded(base):  # type: ignore[valid-type, misc]
        _header_timer: asyncio.TimerHandle | None = None
        _since = 0.0

        def connection_made(self, transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._since = self.loop.time()
            if len(self.connections) > guard.limit + HEALTH_ROOM:
                guard.cut("connection_limit")
                victim = next(iter(guard.waiting), None) or _yielding(self.connections, self)
                if victim is None:
                    transport.close()
                    return
                victim._disarm()
                victim.transport.close()  # the longest still without its headers (or its body) makes room
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.cycle is not None and not self.cycle.response_complete:
                self._disarm()  # its headers are in: the request is the app's now
                # Closing waits for the bytes buffered to be sent: a client that takes none would keep the
                # connection (and its descriptor) for good. The app may drop it instead.
                extensions = self.cycle.scope.get("extensions") or {}
                extensions[ABORT] = self.transport.abort
                self.cycle.scope["extensions"] = extensions
            elif self._header_timer is None and not self.transport.is_closing():
                self._arm()  # the first bytes of the next request on a kept-alive connection

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._header_timer = self.loop.call_later(guard.header_timeout_s, self._headers_late)
            guard.waiting[self] = None

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None
                guard.waiting.pop(self, None)

        def _headers_late(self) -> None:
            self._header_timer = None
            guard.waiting.pop(self, None)
            if self.transport.is_closing() or (self.cycle is not None and not self.cycle.response_complete):
                return
            guard.cut("header_timeout")
            self.transport.close()

    Guarded.__name__ = Guarded.__qualname__ = f"Guarded{base.__name__}"
    return Guarded
