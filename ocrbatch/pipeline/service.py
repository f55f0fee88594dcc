"""The engine side of the pipeline, built once and shared by every run of a converter: the engine's front,
the priority lanes, and the engine on its devices (batch → infer). With `--ray` the engines live on the
cluster's actors instead, and only the front (naming the output) is kept here: each actor builds this same
Service, local, for its one device (remote.py: DeviceHost).

    front ── prepare (decode threads) ──▶ lanes (interactive | bulk) ──▶ Devices: one runner per device
                                     watchdog: what of it (and of each run) is stuck
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable, Iterable, Iterator

from ..config import EngineOptions, ServiceConfig
from ..engines import registry
from ..engines.base import Capabilities, Front
from ..gpu.device import MemoryProbe, resolve_devices
from ..gpu.throughput import AUTO_CEILING, JOIN_PAGES, JOIN_WAIT_S, ThroughputController
from ..gpu.nvml import ResourceSampler
from .batcher import Batcher
from .infer import Devices
from .lanes import Lanes
from .watchdog import Watchdog

ROOM = 1  # interactive pages a batch may hold beyond --max-batch (batcher.py)


class Service:
    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        engine_class = registry.engine_class(config.engine, config.engine_options)
        caps = engine_class.capabilities
        self.sampler = ResourceSampler()
        self.devices: Devices | None = None
        self.lanes: Lanes | None = None
        self.cut_short = False  # a run stopped at once: pages in flight may never finish (a stuck engine)
        # The one stall watchdog: its devices, a Converter's decode threads, each run, a server (watchdog.py)
        self.watchdog = Watchdog(config.stall_timeout)
        if config.ray:  # the cluster's actors hold the engines; this one only names the engine's output
            from . import cluster

            cluster.connect(config.ray)
            self.front: Front = engine_class(config.engine_options)
            self.device_names: tuple[str, ...] = ("ray",)
        else:
            self.device_names = resolve_devices(config.devices, caps.uses_gpu)
            streams = continuous(config, caps)
            self.front, runners = registry.build(config.engine, _sized(config, self.device_names, streams),
                                                 len(self.device_names))
            # One cap per device: an out-of-memory error on one GPU says nothing about another.
            grow = config.max_batch_auto and caps.uses_gpu  # CPU engines: a fixed cap
            self.controllers = [ThroughputController(config.max_batch, AUTO_CEILING if grow else None, grow=grow)
                                for _ in self.device_names]
            # Continuous decoding: pages join the running rows in groups, without waiting long for company.
            wait = min(config.max_wait_s, JOIN_WAIT_S) if streams else config.max_wait_s

            def cap() -> int:
                most = max(c.cap for c in self.controllers)
                return min(most, JOIN_PAGES) if streams else most

            batcher = Batcher(cap(), wait, key=self.front.bucket_key, starve_s=config.starve_s, room=ROOM)
            self.lanes = Lanes(batcher, limit=config.max_batch * (len(self.device_names) + 2) + config.workers,
                               cap=cap)
            self.devices = Devices(runners, self.device_names, self.lanes, self.controllers, MemoryProbe, room=ROOM,
                                   ahead=caps.stages, watchdog=self.watchdog)
        self.sampler.start()

    def describe(self) -> dict[str, Any]:
        """The engine's facts for the summary: its front's, and those of every loaded device's runner."""
        facts = self.front.describe()
        if self.devices is not None:
            facts.update(merge_facts(r.device_facts() for r, up in zip(self.devices.runners, self.devices.loaded)
                                     if up))
        return facts

    def close(self, wait: bool = True) -> None:
        """Finish what waits (with `wait`, unless a run was cut short) and unload the engine."""
        try:
            if self.devices is not None:
                if wait and not self.cut_short:
                    self.devices.close()
                else:  # stopping early: wake decode threads held back by the engine's buffers, wait for nothing
                    self.watchdog.close()
                    self.front.abort()
                    self.lanes.close()
            elif self.config.ray == "local":
                from . import cluster

                cluster.shutdown()
        finally:
            self.watchdog.close()
            self.sampler.stop()


def continuous(config: ServiceConfig, caps: Capabilities) -> bool:
    """Pages stream into a running decode loop (the engine has one and the run asked for it)."""
    return config.engine_options.schedule == "continuous" and caps.streams


def merge_facts(per_device: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The devices' facts as one: a value they share once; numbers that differ added (counts), texts that differ
    joined ("cuda:0, cuda:1")."""
    seen: dict[str, list[Any]] = {}
    for facts in per_device:
        for key, value in facts.items():
            seen.setdefault(key, []).append(value)
    merged: dict[str, Any] = {}
    for key, values in seen.items():
        distinct = list(dict.fromkeys(values))
        if len(distinct) == 1:
            merged[key] = distinct[0]
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            merged[key] = sum(values)
        else:
            merged[key] = ", ".join(map(str, distinct))
    return merged


def _sized(config: ServiceConfig, devices: tuple[str, ...], streams: bool) -> EngineOptions:
    """How many pages' inputs may wait in buffers (the pool's back-pressure: how far decoding runs ahead of
    the devices) and how many one batch holds (device buffers are sized for it)."""
    options = config.engine_options
    n = len(devices)
    cap = AUTO_CEILING if config.max_batch_auto else config.max_batch
    if streams:
        # Per device its rows (a page holds its inputs until it ends: a retry prefills it again) and a group
        # waiting to join; two groups forming in the lanes' buckets; a page in each decode thread.
        group = min(cap, JOIN_PAGES)
        pages, batch = n * (cap + group) + 2 * group + config.workers, group
    else:
        # Per device a batch computing and the next one staged; two batches forming; one per decode thread.
        pages, batch = cap * (2 * n + 2) + config.workers, config.max_batch
    options = dataclasses.replace(options, buffer_pages=options.buffer_pages or pages,
                                  batch_pages=options.batch_pages or batch,
                                  reserve_buffers=options.reserve_buffers and not config.max_batch_auto)
    if options.pin_memory is None:  # pinned buffers only feed GPUs; a CPU run leaves CUDA alone
        options = dataclasses.replace(options, pin_memory=any(d.startswith("cuda") for d in devices))
    return options


@contextlib.contextmanager
def lent(config: ServiceConfig, given: Callable[[], Service] | None) -> Iterator[Service]:
    """The service a run uses: `given`'s (a Converter's, kept after the run), or one made for this run and
    closed after it (without waiting for the pages in flight when the run failed)."""
    if given is not None:
        yield given()
        return
    service = Service(config)
    try:
        yield service
    except BaseException:
        service.close(wait=False)
        raise
    service.close()
