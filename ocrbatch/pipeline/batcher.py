"""Dynamic batching policy: pure Python, no engine code, no threads, a clock passed in.

`max_batch` may change between calls (the device's throughput controller moves it: gpu/throughput.py).
Pages wait in buckets (the engine says which pages pad well together, e.g. same size and aspect).
A bucket becomes a batch when it holds `max_batch` pages, or when its oldest page has waited
`max_wait_s`. `flush()` empties every bucket when no more pages will come.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Generic, Hashable, TypeVar

T = TypeVar("T")


@dataclass
class _Bucket(Generic[T]):
    items: list[T] = field(default_factory=list)
    oldest: float = 0.0


class Batcher(Generic[T]):
    def __init__(self, max_batch: int, max_wait_s: float, key: Callable[[T], Hashable]) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self._key = key
        self._buckets: dict[Hashable, _Bucket[T]] = {}

    def add(self, item: T, now: float) -> list[tuple[Hashable, list[T]]]:
        """Queue `item`; returns the batch it completed, if any."""
        k = self._key(item)
        bucket = self._buckets.get(k)
        if bucket is None:
            bucket = self._buckets[k] = _Bucket(oldest=now)
        bucket.items.append(item)
        if len(bucket.items) >= self.max_batch:
            del self._buckets[k]
            return self._chunks(k, bucket.items)
        return []

    def _chunks(self, k: Hashable, items: list[T]) -> list[tuple[Hashable, list[T]]]:
        """`max_batch` may have dropped while pages waited (an out-of-memory error): keep to it."""
        n = max(1, self.max_batch)
        return [(k, items[i:i + n]) for i in range(0, len(items), n)]

    def due(self, now: float) -> list[tuple[Hashable, list[T]]]:
        """Batches whose oldest page has waited its window, oldest first."""
        ready = [(b.oldest, k) for k, b in self._buckets.items() if now - b.oldest >= self.max_wait_s]
        out = []
        for _, k in sorted(ready, key=lambda t: t[0]):
            out += self._chunks(k, self._buckets.pop(k).items)
        return out

    def next_deadline(self) -> float | None:
        """When the next window ends (None when nothing waits)."""
        if not self._buckets:
            return None
        return min(b.oldest for b in self._buckets.values()) + self.max_wait_s

    def flush(self) -> list[tuple[Hashable, list[T]]]:
        out = []
        for k, b in sorted(self._buckets.items(), key=lambda kv: kv[1].oldest):
            out += self._chunks(k, b.items)
        self._buckets.clear()
        return out

    def __len__(self) -> int:
        return sum(len(b.items) for b in self._buckets.values())
