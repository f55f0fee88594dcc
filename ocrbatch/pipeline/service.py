"""The engine side of the pipeline, built once and shared by every run of a converter: the engine's front and
its executor (executor.py), where pages run. Here: the decode intake, the priority lanes and the engine on its
devices (batch → infer). With `--ray` the engines live on the cluster's actors instead (ray_driver.py), and only
the front (naming the output) is kept here: each actor builds this same Service, local, for its one device
(ray_actor.py: DeviceHost). Choosing the executor is the only place a local run and a Ray run differ.

    Job ─▶ Intake (decode threads) ──▶ lanes (interactive | bulk) ──▶ Devices: one runner per device
                                     watchdog: what of it (and of each run) is stuck
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from ..config import EngineOptions, ServiceConfig
from ..engines import registry
from ..engines.base import Capabilities, Front
from ..gpu.device import MemoryProbe, resolve_devices
from ..gpu.throughput import AUTO_CEILING, JOIN_PAGES, JOIN_WAIT_S, ThroughputController
from ..gpu.nvml import ResourceSampler
from .batcher import Batcher, window
from .decode import DecodeSettings
from .executor import Executor, LocalExecutor, merge_facts  # noqa: F401 - merge_facts: as it was
from .infer import Devices
from .lanes import Lanes
from .watchdog import Watchdog

ROOM = 1  # interactive pages a batch may hold beyond --max-batch (batcher.py)


class Service:
    def __init__(self, config: ServiceConfig, remote: Callable[[ServiceConfig, bool], Executor] | None = None) -> None:
        """`remote` makes the executor of a `--ray` service (engine_side.py gives ray_driver.RayExecutor)."""
        self.config = config
        engine_class = registry.engine_class(config.engine, config.engine_options)
        caps = engine_class.capabilities
        self.sampler = ResourceSampler()
        self.streams = continuous(config, caps)  # pages join running rows: a wider window
        self.cut_short = False  # a run stopped at once: pages in flight may never finish (a stuck engine)
        # The one stall watchdog: its devices, a Converter's decode threads, each run, a server (watchdog.py)
        self.watchdog = Watchdog(config.stall_timeout)
        if config.ray:  # the cluster's actors hold the engines; this one only names the engine's output
            from . import cluster

            if remote is None:
                raise ValueError("a --ray service needs its executor (engine_side.open_service)")
            cluster.connect(config.ray)
            self.front: Front = engine_class(config.engine_options)
            self.device_names: tuple[str, ...] = ("ray",)
            self.executor: Executor = remote(config, caps.uses_gpu)
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
            lanes = Lanes(batcher, limit=config.max_batch * (len(self.device_names) + 2) + config.workers, cap=cap)
            devices = Devices(runners, self.device_names, lanes, self.controllers, MemoryProbe, room=ROOM,
                              ahead=caps.stages, watchdog=self.watchdog)
            self.executor = LocalExecutor(self.front, lanes, devices, DecodeSettings.of(config), config.workers,
                                          self.watchdog)
        self.sampler.start()

    def window(self) -> int:
        """Pages one caller that feeds every device (`Converter.stream`) keeps submitted and unfinished (the
        executor started first: how many Ray workers there are is known once they are)."""
        self.executor.start()
        return window(self.config.max_batch, self.executor.width, self.streams)

    def describe(self) -> dict[str, Any]:
        """The engine's facts for the summary: its front's, and its executor's (every loaded device's, or the Ray
        workers'; not asked of them once a run was cut short: they may be stuck)."""
        return {**self.front.describe(), **self.executor.describe(quick=self.cut_short)}

    def close(self, wait: bool = True) -> None:
        """Finish what waits (with `wait`, unless a run was cut short) and unload the engine."""
        try:
            if not (wait and not self.cut_short):  # stopping early: nothing stuck is waited for
                self.watchdog.close()
            self.executor.close(wait=wait and not self.cut_short)
            if self.config.ray == "local":
                from . import cluster

                cluster.shutdown()
        finally:
            self.watchdog.close()
            self.sampler.stop()


def continuous(config: ServiceConfig, caps: Capabilities) -> bool:
    """Pages stream into a running decode loop (the engine has one and the run asked for it)."""
    return config.engine_options.schedule == "continuous" and caps.streams


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
