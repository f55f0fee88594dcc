"""What keeps the server bounded: the page slots behind --max-queue, and the bearer token.

A request is admitted only if a slot is free at that moment and no admitted request is waiting for one
(`PageSlots.admit`: the check and the take are one step on the event loop, so a burst cannot get past it);
otherwise it is answered 503 at once, before its body is read. Admitted, it holds a `Ticket` with that slot.
Its pages then take slots through the ticket (waiting for one when none is free) and give them back when
they are done. A ticket keeps one slot until its request has no page left to submit, so admitted requests,
and with them the requests waiting for a slot, never outnumber the slots:

    used      slots held (by pages decoding, waiting or running, and by the tickets of requests whose next
              pages are not submitted yet: uploading, or between windows)
    waiting   admitted requests waiting for a slot for their next pages (at most --max-queue)

Used from the event loop only; pure bookkeeping, no I/O.
"""

from __future__ import annotations

import asyncio
import hmac
from collections import deque

from starlette.requests import Request


class PageSlots:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.used = 0
        self._waiters: deque[Ticket] = deque()

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def has_room(self) -> bool:
        return self.used < self.capacity and not self._waiters

    def admit(self) -> "Ticket | None":
        """A ticket holding one slot, or None when none is free now (the caller answers 503)."""
        if not self.has_room():
            return None
        self.used += 1
        return Ticket(self)

    def _release(self, n: int) -> None:
        """`n` slots come back: each goes to the longest-waiting ticket, or is free again."""
        for _ in range(n):
            while self._waiters:
                if self._waiters.popleft()._grant():  # the slot changes hands; `used` stays
                    break
            else:
                self.used -= 1


class Ticket:
    """One admitted request's share of the slots: `held` of them, `busy` of those held by its pages."""

    def __init__(self, slots: PageSlots) -> None:
        self.slots = slots
        self.held, self.busy = 1, 0
        self.closed = False
        self._want: asyncio.Future | None = None  # set while take() waits

    def try_take(self) -> bool:
        """A slot for one more page if one is free now (the ticket's own spare first)."""
        if self.closed:
            return False
        if self.held > self.busy:
            self.busy += 1
            return True
        if self.slots.has_room():
            self.slots.used += 1
            self.held += 1
            self.busy += 1
            return True
        return False

    async def take(self) -> None:
        """A slot for one more page, waiting in turn for one (a page of this request finishing will do)."""
        if self.try_take():
            return
        if self.closed:
            raise RuntimeError("the request's ticket is closed")
        self._want = asyncio.get_running_loop().create_future()
        self.slots._waiters.append(self)
        try:
            await self._want  # whoever satisfies it has counted the slot in held and busy
        except asyncio.CancelledError:
            if self._want.done() and not self._want.cancelled():
                self.give(1)  # granted just as we were cancelled
            elif self in self.slots._waiters:
                self.slots._waiters.remove(self)
            raise
        finally:
            self._want = None

    def _grant(self) -> bool:
        """A freed slot offered to this waiting ticket; False when its wait was cancelled meanwhile (its task
        has not run since): the slot goes to the next one, or is free, never to a wait nobody is in."""
        if self._want is None or self._want.done():
            return False
        self.held += 1
        self.busy += 1
        self._want.set_result(None)
        return True

    def give(self, n: int = 1) -> None:
        """`n` pages of this request are done (or were never submitted): their slots go back, except the one
        the ticket keeps while open, which serves its own next page, now if it is waiting for one."""
        self.busy -= n
        keep = self.busy if self.closed else max(self.busy, 1)
        if self.held > keep:
            extra = self.held - keep
            self.held = keep
            self.slots._release(extra)
        if self._want is not None and not self._want.done() and self.held > self.busy:
            self.slots._waiters.remove(self)  # it waited behind others, but the slot it kept is free
            self.busy += 1
            self._want.set_result(None)

    def close(self) -> None:
        """The request submits no more pages: slots not held by its pages go back now, the rest as they end."""
        if self.closed:
            return
        self.closed = True
        if self._want is not None and not self._want.done():
            self.slots._waiters.remove(self)
            self._want.cancel()
        self.give(0)


def authorized(request: Request, token: str | None) -> bool:
    if token is None:
        return True
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    # Header values arrive as bytes, which Starlette decodes as Latin-1: back to those bytes, and compared with
    # the token's UTF-8 (what curl sends for a non-ASCII --token).
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode("latin-1"),
                                                              token.encode("utf-8"))
