"""A pool of reusable host tensor slots, keyed by shape; pinned (page-locked) when CUDA is there.

Slots are tiles (for DeepSeek-OCR-2: a 1024×1024 global view, 768×768 crops). A decode thread takes a
page's slots, writes its preprocessed pixels straight into them (`Slot.numpy()`), and the slots go back
after the page's batch. An infer worker copies them to its device asynchronously (gpu/staging.py): pinned
memory is what lets that copy run on a side stream while the GPU computes, and any GPU can read it, so one
pool serves every worker of a run.

Each shape has a fixed number of slots: when they are all out, `acquire` blocks, which holds the decode
threads back instead of allocating without bound (back-pressure). A page takes all its slots of a shape at
once, so two half-served pages can never starve each other. `allocations` counts tensors created: flat
after warm-up means steady state allocates nothing.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any


@dataclass(eq=False)
class Slot:
    shape: tuple[int, ...]
    host: Any  # torch.Tensor on the CPU, pinned when the pool pins

    def numpy(self):
        """A writable numpy view of the host buffer: preprocessing writes here, no copy."""
        return self.host.numpy()


class PoolExhausted(TimeoutError):
    pass


class PoolClosed(RuntimeError):
    """The pool was closed (the run is aborting) while a caller waited for slots."""


class BufferPool:
    def __init__(self, pin: bool = False, dtype: Any = None, slots_per_shape: int = 16,
                 limits: dict[tuple[int, ...], int] | None = None) -> None:
        """`pin`: page-locked host memory (only where CUDA is available: a CPU-only torch refuses it).
        `limits`: slots of a given shape, overriding `slots_per_shape`."""
        import torch

        self.dtype = dtype or torch.float32
        self.pin = bool(pin)
        self.slots_per_shape = slots_per_shape
        self.limits = {tuple(k): int(v) for k, v in (limits or {}).items()}
        self._free: dict[tuple[int, ...], list[Slot]] = {}
        self._created: dict[tuple[int, ...], int] = {}
        self._cond = threading.Condition()
        self._local = threading.local()
        self._closed = False
        self.allocations = 0  # tensors created
        self.acquired = 0
        self.waits = 0  # times a caller had to wait for a slot (back-pressure)
        self.wait_s = 0.0  # time callers spent waiting, all threads together

    def limit(self, shape: tuple[int, ...]) -> int:
        return self.limits.get(shape, self.slots_per_shape)

    def acquire(self, shape: tuple[int, ...], timeout: float | None = None) -> Slot:
        return self.acquire_many(shape, 1, timeout)[0]

    def acquire_many(self, shape: tuple[int, ...], count: int, timeout: float | None = None) -> list[Slot]:
        """`count` slots of `shape`, all at once: blocks until that many are free (or may be created)."""
        shape = tuple(int(s) for s in shape)
        if count > self.limit(shape):
            raise ValueError(f"{count} slots of {shape} asked for; the pool holds {self.limit(shape)}")
        with self._cond:
            t0 = time.perf_counter()
            waited = False
            while True:
                if self._closed:
                    raise PoolClosed("the buffer pool was closed")
                free = self._free.setdefault(shape, [])
                creatable = self.limit(shape) - self._created.get(shape, 0)
                if len(free) + creatable >= count:
                    break
                if not waited:
                    self.waits += 1
                    waited = True
                remaining = None if timeout is None else timeout - (time.perf_counter() - t0)
                if remaining is not None and remaining <= 0:
                    raise PoolExhausted(f"no {count} free {shape} slot(s) after {timeout} s")
                self._cond.wait(remaining)
            if waited:
                spent = time.perf_counter() - t0
                self.wait_s += spent
                self._local.wait_s = self.waited_s() + spent
            reused = [free.pop() for _ in range(min(count, len(free)))]
            new = count - len(reused)
            self._created[shape] = self._created.get(shape, 0) + new  # reserved; allocated outside the lock
            self.acquired += count
        try:
            return reused + [self._new_slot(shape) for _ in range(new)]
        except BaseException:
            with self._cond:
                self._created[shape] -= new
                self._free[shape].extend(reused)
                self._cond.notify_all()
            raise

    def reserve(self) -> None:
        """Make every slot of the shapes in `limits` now, so that steady state allocates nothing whatever the
        mix of pages (a lazily grown pool keeps allocating each time more pages than ever are in flight)."""
        for shape in self.limits:
            with self._cond:
                new = self.limit(shape) - self._created.get(shape, 0)
                self._created[shape] = self._created.get(shape, 0) + new
            made = [self._new_slot(shape) for _ in range(new)]
            self.release(*made)

    def _new_slot(self, shape: tuple[int, ...]) -> Slot:
        import torch

        host = torch.empty(shape, dtype=self.dtype, pin_memory=self.pin)
        with self._cond:
            self.allocations += 1
        return Slot(shape, host)

    def release(self, *slots: Slot) -> None:
        with self._cond:
            for slot in slots:
                self._free.setdefault(slot.shape, []).append(slot)
            self._cond.notify_all()

    def close(self) -> None:
        """Wake every waiting caller with PoolClosed; later acquires raise it too."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def waited_s(self) -> float:
        """Seconds the calling thread has spent blocked in `acquire` so far (not busy: held back)."""
        return getattr(self._local, "wait_s", 0.0)

    def in_use(self) -> int:
        with self._cond:
            return sum(self._created.values()) - sum(len(v) for v in self._free.values())

    def stats(self) -> dict[str, Any]:
        with self._cond:
            return {"allocations": self.allocations, "acquired": self.acquired, "waits": self.waits,
                    "wait_s": round(self.wait_s, 3), "slots": sum(self._created.values()),
                    "pinned": int(self.pin)}
