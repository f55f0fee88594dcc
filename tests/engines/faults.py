"""Fault injection (in the manner of OCRmyPDF's test plugins): any engine, made to raise at a chosen call.

    fault = Fault.from_seed(seed, POINTS_CONTINUOUS)        # where, which call, what, once or from then on
    cls = faulty(DeepseekOcr2Engine, fault)                  # an engine class that trips there
    registry.register(cls.name, cls)

The points are the engine's calls the pipeline makes: `load`, `prepare` (decode threads), `stage`, `infer`
(whole batches), `release`, `output` (a page's tokens to Markdown), and inside continuous decoding the
decoder's `prefill`, `join` and `step` (one token for every row). The faults: an out-of-memory error as
torch raises it, a CUDA-style RuntimeError, a plain exception, or a hang (the call never returns until the
test lets it go: only the stall watchdog ends such a run).

The n-th call to the point (counted across every instance of the class, in this process) trips; a `sticky`
fault trips on every call from then on. Every injected error says "injected", so a test can tell the pages
the fault touched.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from typing import Any

KINDS = ("oom", "cuda", "plain")
POINTS_STATIC = ("load", "prepare", "stage", "infer", "release", "output")
POINTS_CONTINUOUS = ("load", "prepare", "stage", "prefill", "join", "step", "release", "output")
POINTS_PLAIN = ("load", "prepare", "stage", "infer", "release")  # an engine without tokens (fake, rapidocr)


class OutOfMemoryError(RuntimeError):
    """Named as torch.OutOfMemoryError is (the pipeline tells an out-of-memory error by its name)."""


class Hang(Exception):
    """A hung call that was let go (the test released it): the call fails once it returns."""


@dataclass(frozen=True)
class Fault:
    at: str  # the point
    nth: int  # the call (1-based) that trips
    kind: str  # oom | cuda | plain | hang
    sticky: bool = False  # every call from the nth on trips

    @classmethod
    def from_seed(cls, seed: int, points: tuple[str, ...], hangs: bool = False, most_nth: int = 4) -> "Fault":
        """Seed n's fault: at point n mod len(points) (so any len(points) seeds in a row cover every point),
        the rest drawn from the seed."""
        rng = random.Random(seed)
        kinds = KINDS + (("hang",) if hangs else ())
        at = points[seed % len(points)]
        kind = rng.choice(kinds)
        if kind == "hang" and at in ("load", "release", "stage"):
            kind = "plain"  # a hang there is the same as one in the call after it; keep hangs where pages wait
        return cls(at=at, nth=1 if at == "load" else rng.randint(1, most_nth), kind=kind,
                   sticky=rng.random() < 0.3)

    def error(self) -> BaseException:
        what = f"injected at {self.at} call {self.nth}"
        if self.kind == "oom":
            return OutOfMemoryError(f"CUDA out of memory. Tried to allocate 2.00 GiB ({what})")
        if self.kind == "cuda":
            return RuntimeError(f"CUDA error: an illegal memory access was encountered ({what})")
        return ValueError(f"{what}: a plain exception")


class Tripwire:
    """Counts a fault's point's calls and trips on the chosen one(s). `release_hangs` lets hung calls go."""

    def __init__(self, fault: Fault) -> None:
        self.fault = fault
        self.calls: dict[str, int] = {}
        self.tripped = 0
        self._lock = threading.Lock()
        self._let_go = threading.Event()

    def __getstate__(self) -> dict:  # sent to a Ray worker: its own counts, lock and event there
        return {"fault": self.fault}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["fault"])

    def check(self, point: str) -> None:
        f = self.fault
        with self._lock:
            n = self.calls[point] = self.calls.get(point, 0) + 1
            trip = point == f.at and (n == f.nth or (f.sticky and n > f.nth))
            self.tripped += trip
        if not trip:
            return
        if f.kind == "hang":
            self._let_go.wait(600)
            raise Hang(f"injected hang at {point}, let go")
        raise f.error()

    def release_hangs(self) -> None:
        self._let_go.set()


def faulty(base: type, fault: Fault, name: str | None = None) -> type:
    """A subclass of engine class `base` that trips `fault` (its Tripwire: the class's `tripwire`)."""
    wire = Tripwire(fault)

    def load(self, device: str) -> None:
        wire.check("load")
        base.load(self, device)

    def prepare(self, page):
        wire.check("prepare")
        return base.prepare(self, page)

    def stage(self, pages) -> None:
        wire.check("stage")
        base.stage(self, pages)

    def infer(self, pages):
        wire.check("infer")
        return base.infer(self, pages)

    def release(self, pages) -> None:
        wire.check("release")
        base.release(self, pages)

    def output(self, page, gen, info):
        wire.check("output")
        return base.output(self, page, gen, info)

    def decoder(self) -> Any:
        dec = base.decoder(self)
        if dec is not None:
            for point, method in (("prefill", "_prefill"), ("join", "_join"), ("step", "_decode")):
                setattr(dec, method, _tripping(wire, point, getattr(dec, method)))
        return dec

    body: dict[str, Any] = {"name": name or f"faulty-{fault.at}-{fault.kind}", "tripwire": wire, "load": load,
                            "prepare": prepare, "stage": stage, "infer": infer, "release": release,
                            "__module__": __name__}
    if base.capabilities.streams:  # only a streaming engine turns generated pages into outputs
        body["output"] = output
    if base.capabilities.streams:  # only an engine that decodes continuously
        body["decoder"] = decoder
    return type(f"Faulty{base.__name__}", (base,), body)


def _tripping(wire: Tripwire, point: str, method: Any) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        wire.check(point)
        return method(*args, **kwargs)
    return call
