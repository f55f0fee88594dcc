"""Scheduling by throughput: pure policy and accounting, no device code.

`SlotFigures` counts how well decoding used its rows: `useful` tokens over `slot_steps` (the row cap at every
decoding step). `ThroughputController` decides how many rows (pages) a device runs at once.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class SlotFigures:
    steps: int = 0  # decoding forward passes (prefills not counted)
    slot_steps: int = 0  # rows the device could have decoded: the cap (or the batch) at each step, and the
    # rows of each continuous prefill (it chooses their first token, as generate's first step does)
    row_steps: int = 0  # rows actually computed
    useful: int = 0  # tokens pages kept, end tokens included
    prefills: int = 0
    prefill_s: float = 0.0
    step_s: float = 0.0

    @property
    def efficiency(self) -> float | None:
        return self.useful / self.slot_steps if self.slot_steps else None


AUTO_CEILING = 256  # --max-batch auto: never more rows than this on one device
JOIN_PAGES = 16  # continuous decoding: most pages prefilled together when they join the running rows
JOIN_WAIT_S = 0.02  # continuous decoding: longest a page waits for others to join with (--max-wait-ms caps it)


class ThroughputController:
    """How many pages (rows) one device runs at once. One per device: an error on one GPU says nothing
    about another.

    The cap starts at `start`. Each report (`on_batch_done`: a batch, or a window of decoding steps) says how
    many rows ran, how long it took, the tokens they generated, and where known the device memory the batch
    took beyond the model (`used_bytes`) and the free memory (`free_bytes`, torch.cuda.mem_get_info, which
    leaves other processes' and PyTorch's cache out of "free" rightly). With `grow`, once `patience` reports
    at the full cap have measured its tokens/s, the cap grows by half if that was a gain of at least
    `min_gain` over the cap before, and if the free memory holds the extra rows at the measured bytes per
    page (with `headroom`); without such a gain it goes back to the smaller cap and stays. An out-of-memory error
    halves the cap and lowers the ceiling below the size that failed, for good: the cap never climbs back
    into an error. Device utilization is no input: a decoder is ~100% busy at any batch size.
    """

    def __init__(self, start: int, ceiling: int | None = None, grow: bool = False, patience: int = 3,
                 min_gain: float = 0.05, headroom: float = 0.8) -> None:
        self.cap = max(1, start)
        self.ceiling = max(self.cap, ceiling or self.cap)
        self.grow = grow
        self.patience = patience
        self.min_gain = min_gain
        self.headroom = headroom
        self.ooms = 0
        self.page_bytes: float | None = None  # device memory one page takes, the most measured
        self.rates: dict[int, float] = {}  # tokens/s measured at each cap
        self.settled = not grow
        self._prev: int | None = None  # the cap before the last growth
        self._seen = (0, 0.0, 0.0)  # reports, seconds, tokens at the current cap
        import threading

        self._lock = threading.Lock()

    def on_out_of_memory(self, batch_size: int) -> int:
        with self._lock:
            self.ooms += 1
            self.ceiling = max(1, min(self.ceiling, batch_size - 1))
            self.cap = max(1, min(self.cap, batch_size // 2, self.ceiling))
            self._seen = (0, 0.0, 0.0)
            return self.cap

    def on_batch_done(self, rows: int, seconds: float, tokens: float, used_bytes: float | None = None,
                      free_bytes: float | None = None) -> int:
        with self._lock:
            if used_bytes is not None and rows > 0:
                per_page = used_bytes / rows
                self.page_bytes = per_page if self.page_bytes is None else max(self.page_bytes, per_page)
            if self.settled or rows < self.cap or seconds <= 0:
                return self.cap  # a partial batch says nothing about the cap
            n, s, t = self._seen
            n, s, t = n + 1, s + seconds, t + tokens
            self._seen = (n, s, t)
            if n < self.patience:
                return self.cap
            rate = t / s
            self.rates[self.cap] = rate
            self._seen = (0, 0.0, 0.0)
            before = self.rates.get(self._prev) if self._prev is not None else None
            if before is not None and rate < before * (1 + self.min_gain):
                self.cap = self._prev  # no gain worth the memory: back to the smaller cap, for good
                self.settled = True
                return self.cap
            target = min(self.ceiling, max(self.cap + 1, self.cap * 3 // 2))
            if free_bytes is not None and self.page_bytes:
                target = min(target, self.cap + int(free_bytes * self.headroom / self.page_bytes))
            if target <= self.cap:
                self.settled = True
                return self.cap
            self._prev, self.cap = self.cap, target
            return self.cap
