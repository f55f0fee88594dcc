"""The device side of the buffer pool: one `DeviceStaging` per infer worker.

A batch's host slots (gpu/pool.py) are copied into contiguous device buffers, one per tile shape, so the
model reads the batch as a view: no stacking, no allocation once the buffers exist. There are two sets of
buffers: the worker copies batch N+1 into one while batch N computes from the other.

On CUDA the copy runs on a side stream with `non_blocking=True` (the host slots are pinned, so it really is
asynchronous); an event recorded after it orders the compute after the copy (`Staged.wait()`), and another,
recorded when the batch is done, keeps the next copy into those buffers from starting before the compute
that reads them has finished. On a CPU the same code copies synchronously, with no streams or events.

    staged = staging.stage({"global": [slot.host, ...], "crops": [...]})  # the copy starts
    ...                                # the previous batch computes meanwhile
    staged.wait()                      # compute stream: after the copy
    model(staged.tensors["global"][:n], ...)
    staged.done()                      # buffers free for the batch after next
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Hashable

Key = Hashable  # a group of same-shaped tiles, e.g. "global" or "crops"


@dataclass(eq=False)
class _BufferSet:
    tensors: dict[Key, Any] = field(default_factory=dict)  # key -> device tensor (capacity, *tile shape)
    busy: bool = False
    start: Any = None  # CUDA events, made once per set
    ready: Any = None
    free: Any = None
    freed_once: bool = False
    grown: bool = False  # a buffer was (re)made since the last copy: made on the compute stream


class DeviceStaging:
    def __init__(self, device: str, sets: int = 2, reserve: dict[Key, int] | None = None) -> None:
        """`reserve`: tiles per group that each set's buffer holds from the first (the largest batch the run
        can form), so that batches of every composition fit without growing it after warm-up."""
        import torch

        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.stream = torch.cuda.Stream(device=self.device) if self.cuda else None  # raises on CPU-only torch
        self._sets = [_BufferSet() for _ in range(sets)]
        self.reserve = dict(reserve or {})
        self.allocations = 0  # device buffers created (or grown)
        self.copy_s = 0.0  # time the copies took (on CUDA: measured on the side stream, overlapped)
        self.copied_bytes = 0

    def stage(self, groups: dict[Key, list[Any]]) -> "Staged":
        """Start copying each group's host tensors (all of one shape), in order, into its device buffer."""
        buffers = next((b for b in self._sets if not b.busy), None)
        if buffers is None:
            raise RuntimeError("every buffer set holds a batch: call done() on one before staging another")
        buffers.busy = True
        try:
            return self._copy(buffers, groups)
        except BaseException:  # e.g. out of memory growing a buffer: the set stays usable
            buffers.busy = False
            raise

    def _copy(self, buffers: _BufferSet, groups: dict[Key, list[Any]]) -> "Staged":
        import torch

        views = {key: self._buffer(buffers, key, hosts)[:len(hosts)] for key, hosts in groups.items() if hosts}
        pairs = [(views[key][i], src) for key, hosts in groups.items() for i, src in enumerate(hosts)]
        self.copied_bytes += sum(src.numel() * src.element_size() for _, src in pairs)
        if not self.cuda:
            t0 = time.perf_counter()
            for dst, src in pairs:
                dst.copy_(src)
            self.copy_s += time.perf_counter() - t0
            return Staged(self, buffers, views)
        if buffers.start is None:
            buffers.start = torch.cuda.Event(enable_timing=True)
            buffers.ready = torch.cuda.Event(enable_timing=True)
            buffers.free = torch.cuda.Event()
        if buffers.grown:  # made on the compute stream: the side stream must not write it before it exists
            self.stream.wait_stream(torch.cuda.current_stream(self.device))
            buffers.grown = False
        with torch.cuda.stream(self.stream):
            if buffers.freed_once:
                self.stream.wait_event(buffers.free)  # the compute that last read these buffers is over
            buffers.start.record(self.stream)
            for dst, src in pairs:
                dst.copy_(src, non_blocking=True)
            buffers.ready.record(self.stream)
        return Staged(self, buffers, views)

    def _buffer(self, buffers: _BufferSet, key: Key, hosts: list[Any]) -> Any:
        """The set's device buffer for `key`, grown (to a power of two) when this batch needs more."""
        import torch

        tile, dtype = tuple(hosts[0].shape), hosts[0].dtype
        have = buffers.tensors.get(key)
        if have is not None and have.shape[0] >= len(hosts) and tuple(have.shape[1:]) == tile \
                and have.dtype == dtype:
            return have
        capacity = max(1 << max(0, len(hosts) - 1).bit_length(), self.reserve.get(key, 0))
        have = buffers.tensors.pop(key, None)
        del have  # free the smaller buffer before making the larger one (the set is not in use)
        buffers.tensors[key] = torch.empty((capacity, *tile), dtype=dtype, device=self.device)
        buffers.grown = True
        self.allocations += 1
        return buffers.tensors[key]

    def stats(self) -> dict[str, Any]:
        return {"allocations": self.allocations, "copy_s": self.copy_s, "copied_bytes": self.copied_bytes}

    def close(self) -> None:
        """Free the device buffers (the counters stay readable)."""
        if self.stream is not None:
            self.stream.synchronize()
        self._sets = [_BufferSet() for _ in self._sets]


class Staged:
    """One batch's tiles on the device: `tensors[key]` is a (count, *tile shape) view."""

    def __init__(self, staging: DeviceStaging, buffers: _BufferSet, tensors: dict[Key, Any]) -> None:
        self.staging = staging
        self._buffers = buffers
        self.tensors = tensors
        self._done = False

    def wait(self) -> None:
        """Order the current (compute) stream after the copy; nothing to do on a CPU."""
        if self.staging.cuda:
            import torch

            torch.cuda.current_stream(self.staging.device).wait_event(self._buffers.ready)

    def done(self) -> None:
        """The batch no longer needs these buffers (call after its compute was issued; idempotent)."""
        if self._done:
            return
        self._done = True
        b = self._buffers
        if self.staging.cuda:
            import torch

            b.ready.synchronize()  # the copy is over: its host slots may be reused
            self.staging.copy_s += b.start.elapsed_time(b.ready) / 1000.0
            b.free.record(torch.cuda.current_stream(self.staging.device))
            b.freed_once = True
        b.busy = False
