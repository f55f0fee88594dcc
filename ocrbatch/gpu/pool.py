"""A pool of reusable tensor slots: a host buffer (pinned when CUDA is there) and its device twin.

Slots are keyed by shape (for DeepSeek-OCR-2: a 1024×1024 global view, a 768×768 crop). A page takes
slots, its pixels are written straight into the host buffer, the worker copies them to the device with
`non_blocking=True` on a side stream, and the slots go back to the pool after the batch. Each shape has a
fixed number of slots: when they are all out, `acquire` blocks, which holds the decode threads back
instead of allocating without bound. `allocations` counts tensors created, so a test (or `ocrbatch
bench`) can check that steady state allocates nothing.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any


@dataclass(eq=False)
class Slot:
    shape: tuple[int, ...]
    host: Any  # torch.Tensor on the CPU, pinned when the device is CUDA
    device: Any  # torch.Tensor on the device (the same tensor as `host` on a CPU device)

    def numpy(self):
        """A writable numpy view of the host buffer: preprocessing writes here, no copy."""
        return self.host.numpy()

    def to_device(self, stream: Any = None) -> Any:
        """Start the host → device copy (asynchronous on CUDA when the host buffer is pinned)."""
        if self.device is self.host:
            return self.device
        if stream is None:
            self.device.copy_(self.host, non_blocking=True)
        else:
            import torch

            with torch.cuda.stream(stream):
                self.device.copy_(self.host, non_blocking=True)
        return self.device


class PoolExhausted(TimeoutError):
    pass


class BufferPool:
    def __init__(self, device: str = "cpu", dtype: Any = None, slots_per_shape: int = 16) -> None:
        import torch

        self.device = torch.device(device)
        self.dtype = dtype or torch.float32
        self.slots_per_shape = slots_per_shape
        self.pin = self.device.type == "cuda" and torch.cuda.is_available()
        self._free: dict[tuple[int, ...], list[Slot]] = {}
        self._created: dict[tuple[int, ...], int] = {}
        self._cond = threading.Condition()
        self.allocations = 0  # tensors created (host and device counted apart)
        self.acquired = 0
        self.waits = 0  # times a caller had to wait for a slot (back-pressure)

    def _new_slot(self, shape: tuple[int, ...]) -> Slot:
        import torch

        host = torch.empty(shape, dtype=self.dtype, pin_memory=self.pin)
        self.allocations += 1
        if self.device.type == "cpu":
            device = host
        else:
            device = torch.empty(shape, dtype=self.dtype, device=self.device)
            self.allocations += 1
        return Slot(shape, host, device)

    def acquire(self, shape: tuple[int, ...], timeout: float | None = None) -> Slot:
        shape = tuple(int(s) for s in shape)
        with self._cond:
            waited = False
            while True:
                free = self._free.setdefault(shape, [])
                if free:
                    self.acquired += 1
                    return free.pop()
                if self._created.get(shape, 0) < self.slots_per_shape:
                    self._created[shape] = self._created.get(shape, 0) + 1
                    self.acquired += 1
                    return self._new_slot(shape)
                if not waited:
                    self.waits += 1
                    waited = True
                if not self._cond.wait(timeout):
                    raise PoolExhausted(f"no free {shape} slot after {timeout} s")

    def release(self, *slots: Slot) -> None:
        with self._cond:
            for slot in slots:
                self._free.setdefault(slot.shape, []).append(slot)
            self._cond.notify_all()

    def in_use(self) -> int:
        with self._cond:
            return sum(self._created.values()) - sum(len(v) for v in self._free.values())

    def stats(self) -> dict[str, int]:
        return {"allocations": self.allocations, "acquired": self.acquired, "waits": self.waits,
                "slots": sum(self._created.values()), "pinned": int(self.pin)}
