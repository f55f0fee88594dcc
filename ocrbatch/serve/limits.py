"""What keeps the server bounded: page slots (--max-queue), the body size limit, the bearer token."""

from __future__ import annotations

import asyncio
import hmac
from collections import deque

from starlette.requests import Request


class PageSlots:
    """`capacity` pages may be held by requests at once. A request is admitted only if a slot is free now
    (`has_room`; otherwise 503 at once: requests never queue for admission); each of its pages then `take`s
    a slot, waiting for one if needed, and `give`s it back when done. Used from the event loop only."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.used = 0
        self._waiters: deque[asyncio.Future] = deque()

    def has_room(self) -> bool:
        return self.used < self.capacity and not self._waiters

    def try_take(self) -> bool:
        if self.has_room():
            self.used += 1
            return True
        return False

    async def take(self) -> None:
        if self.used < self.capacity and not self._waiters:
            self.used += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter  # give() hands its slot straight to us
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.give(1)  # handed over just as we were cancelled
            else:
                self._waiters.remove(waiter)
            raise

    def give(self, n: int = 1) -> None:
        for _ in range(n):
            while self._waiters:
                waiter = self._waiters.popleft()
                if not waiter.done():
                    waiter.set_result(None)  # the slot changes hands; `used` stays
                    break
            else:
                self.used -= 1


class TooLarge(Exception):
    pass


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, refusing (TooLarge) one declared or found to be over `limit` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise TooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise TooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def authorized(request: Request, token: str | None) -> bool:
    if token is None:
        return True
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())
