"""A bounded, closable queue: `put` blocks when full, `get` wakes up when it is closed and empty.

A queue can have several producers; it closes when the last one calls `close()`. Consumers stop when
`get` raises `Closed`. No sentinels travel through it.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Callable, Generic, TypeVar

T = TypeVar("T")


class Closed(Exception):
    """The queue is closed and empty: nothing more will come."""


class ClosableQueue(Generic[T]):
    def __init__(self, maxsize: int, producers: int = 1, name: str = "") -> None:
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        self.name = name
        self.maxsize = maxsize
        self._items: collections.deque[T] = collections.deque()
        self._open_producers = producers
        self._cond = threading.Condition()

    def put(self, item: T) -> None:
        with self._cond:
            while True:
                if self._open_producers <= 0:
                    raise Closed(self.name)  # aborted: the consumer is gone
                if len(self._items) < self.maxsize:
                    break
                self._cond.wait()
            self._items.append(item)
            self._cond.notify_all()

    def get(self, timeout: float | None = None) -> T | None:
        """One item; None when `timeout` passes first; raises Closed when closed and drained."""
        with self._cond:
            deadline = None if timeout is None else time.monotonic() + timeout
            while not self._items:
                if self._open_producers <= 0:
                    raise Closed(self.name)
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                self._cond.wait(remaining)
            item = self._items.popleft()
            self._cond.notify_all()
            return item

    def close(self) -> None:
        """One producer is done; the queue closes when all are."""
        with self._cond:
            self._open_producers -= 1
            self._cond.notify_all()

    def abort(self) -> None:
        """Close at once for everyone and drop what is queued (used on interrupt)."""
        with self._cond:
            self._open_producers = 0
            self._items.clear()
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        with self._cond:
            return self._open_producers <= 0

    def __len__(self) -> int:
        with self._cond:
            return len(self._items)


def stage_thread(name: str, body: Callable[[], None], on_error: Callable[[BaseException], None]) -> threading.Thread:
    """A daemon thread running one stage: it ends quietly when its queues are aborted (Closed) and hands any
    other exception to `on_error` (the orchestrator, which stops the run and raises it on its own thread)."""

    def target() -> None:
        try:
            body()
        except Closed:
            pass  # stopped elsewhere
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            on_error(exc)

    return threading.Thread(target=target, name=name, daemon=True)
