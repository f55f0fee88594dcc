"""Dynamic batching policy with priority lanes: pure Python, no engine code, no threads, a clock passed in.

Pages wait in buckets (the engine says which pages pad well together, e.g. same size and aspect); inside a
bucket each page waits in its lane, `interactive` (someone is waiting for it) or `bulk` (a batch job).
A device that is free asks `next(now)` for the batch to run; the policy answers:

1. a bulk page that has waited `starve_s` goes first, whatever else waits, its batch filled with bulk pages
   first (bulk cannot starve);
2. interactive pages go before any bulk work: their bucket is taken as soon as it is full or its oldest
   page has waited `max_wait_s`, or at once if the device would otherwise run a bulk batch (so an
   interactive page never waits more than `max_wait_s` behind bulk work);
3. bulk buckets are taken when full or when their oldest page has waited `max_wait_s`, oldest first.

A batch is filled from one bucket, interactive pages first, then topped up with bulk pages of the same
shape. Up to `room` interactive pages ride on top of `max_batch` (a batch of 8 bulk pages and one
interactive page holds 9): an interactive page costs its own compute, and pushes no bulk page out of its
batch; a batch of interactive pages alone keeps to `max_batch`. `max_batch` may change between calls (the device's throughput controller moves it, lower after an out-of-memory
error): pages beyond it stay for the next batch.
`expire(now)` makes every waiting page due at once (no more pages will come to fill its bucket).

`window` is the one batching-window policy: how many pages a caller keeps submitted and unfinished, in batches
per device. A server's request, `Converter.stream` and the Ray driver (tasks per actor) all take it from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Generic, Hashable, TypeVar

T = TypeVar("T")

LANES = ("interactive", "bulk")
WINDOW_BATCHES = 2  # batches a caller keeps in flight per device: one computing, the next one forming


def window(max_batch: int, devices: int = 1, streams: bool = False) -> int:
    """Pages a caller keeps submitted and unfinished: WINDOW_BATCHES batches per device, twice that with continuous
    decoding (rows join as others end). A server's request counts one device (requests share the devices),
    `Converter.stream` every device; the Ray driver keeps window(1, 1, streams) tasks (a task is a batch) per actor."""
    return WINDOW_BATCHES * max(1, int(max_batch)) * max(1, devices) * (2 if streams else 1)


@dataclass
class _Bucket(Generic[T]):
    lanes: dict[str, list[tuple[float, T]]] = field(default_factory=lambda: {lane: [] for lane in LANES})

    def oldest(self, lane: str) -> float | None:
        items = self.lanes[lane]
        return items[0][0] if items else None

    def first(self) -> float:
        return min(t for t in (self.oldest(lane) for lane in LANES) if t is not None)

    def __len__(self) -> int:
        return sum(len(items) for items in self.lanes.values())


class Batcher(Generic[T]):
    def __init__(self, max_batch: int, max_wait_s: float, key: Callable[[T], Hashable],
                 starve_s: float = 5.0, room: int = 0) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self.max_batch = max_batch
        self.room = room
        self.max_wait_s = max_wait_s
        self.starve_s = max(starve_s, max_wait_s)
        self._key = key
        self._buckets: dict[Hashable, _Bucket[T]] = {}

    def add(self, item: T, now: float, lane: str = "bulk") -> None:
        if lane not in LANES:
            raise ValueError(f"lane {lane!r}: choose interactive or bulk")
        self._buckets.setdefault(self._key(item), _Bucket()).lanes[lane].append((now, item))

    def next(self, now: float) -> tuple[Hashable, list[T]] | None:
        """The batch a free device should run now, or None when every bucket should keep waiting."""
        buckets = self._buckets
        starving = [(t, k) for k, b in buckets.items()
                    if (t := b.oldest("bulk")) is not None and now - t >= self.starve_s]
        if starving:
            return self._take(min(starving, key=_first)[1], first="bulk")
        ready = {k for k, b in buckets.items() if len(b) >= self.max_batch or now - b.first() >= self.max_wait_s}
        waiting = [(t, k) for k, b in buckets.items() if (t := b.oldest("interactive")) is not None]
        if waiting:
            due = [(t, k) for t, k in waiting if k in ready]
            if due:
                return self._take(min(due, key=_first)[1])
            return self._take(min(waiting, key=_first)[1]) if ready else None
        if ready:
            return self._take(min(((buckets[k].first(), k) for k in ready), key=_first)[1])
        return None

    def _take(self, k: Hashable, first: str = "interactive") -> tuple[Hashable, list[T]]:
        bucket = self._buckets[k]
        most = max(1, self.max_batch)
        inter, bulk = len(bucket.lanes["interactive"]), len(bucket.lanes["bulk"])
        # Interactive pages ride on top of bulk ones (up to `room` beyond max_batch), never on their own:
        # a batch with no bulk page keeps to max_batch.
        if first == "interactive":
            n = {"interactive": min(inter, most)}
            n["bulk"] = min(bulk, most - n["interactive"] + min(self.room, n["interactive"]))
        else:
            n = {"bulk": min(bulk, most)}
            n["interactive"] = min(inter, most - n["bulk"] + (min(self.room, inter) if n["bulk"] else 0))
        items: list[T] = []
        for lane in sorted(LANES, key=lambda lane: lane != first):
            taken, bucket.lanes[lane] = bucket.lanes[lane][:n[lane]], bucket.lanes[lane][n[lane]:]
            items += [item for _, item in taken]
        if not len(bucket):
            del self._buckets[k]
        return k, items

    def next_deadline(self) -> float | None:
        """When the next window ends (None when nothing waits)."""
        if not self._buckets:
            return None
        return min(b.first() for b in self._buckets.values()) + self.max_wait_s

    def expire(self, now: float) -> None:
        """No more pages will come to fill these buckets: every waiting page is due now."""
        for bucket in self._buckets.values():
            for lane, items in bucket.lanes.items():
                bucket.lanes[lane] = [(min(t, now - self.max_wait_s), item) for t, item in items]

    def remove(self, drop: Callable[[T], bool]) -> list[T]:
        """Take out the waiting items `drop` says no one wants any more; returns them."""
        gone: list[T] = []
        for k in list(self._buckets):
            bucket = self._buckets[k]
            for lane, items in bucket.lanes.items():
                gone += [item for _, item in items if drop(item)]
                bucket.lanes[lane] = [(t, item) for t, item in items if not drop(item)]
            if not len(bucket):
                del self._buckets[k]
        return gone

    def depth(self) -> dict[str, int]:
        """Pages waiting, per lane."""
        return {lane: sum(len(b.lanes[lane]) for b in self._buckets.values()) for lane in LANES}

    def __len__(self) -> int:
        return sum(len(b) for b in self._buckets.values())


def _first(pair: tuple[float, Hashable]) -> float:
    return pair[0]
