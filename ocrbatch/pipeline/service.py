"""The engine side of the pipeline, built once and shared by every run of a converter: the engine's front,
the priority lanes, and the engine on its devices (batch → infer). With `--ray` the engines live on the
cluster's actors instead, and only the front (naming the output) is kept here.

    front ── prepare (decode threads) ──▶ lanes (interactive | bulk) ──▶ Devices: one runner per device
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Callable, Iterator

from ..config import EngineOptions, ServiceConfig
from ..engines import registry
from ..engines.base import Front
from ..gpu.adaptive import BatchSizeController
from ..gpu.device import load_reader, resolve_devices
from ..gpu.nvml import ResourceSampler
from .batcher import Batcher
from .infer import Devices
from .lanes import Lanes

ROOM = 1  # interactive pages a batch may hold beyond --max-batch (batcher.py)


class Service:
    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        engine_class = registry.engine_class(config.engine)
        self.sampler = ResourceSampler()
        self.controller = BatchSizeController(config.max_batch)
        self.devices: Devices | None = None
        self.lanes: Lanes | None = None
        self.cut_short = False  # a run stopped at once: pages in flight may never finish (a stuck engine)
        if config.ray:  # the cluster's actors hold the engines; this one only names the engine's output
            from . import remote

            remote.connect(config.ray)
            self.front: Front = engine_class(config.engine_options)
            self.device_names: tuple[str, ...] = ("ray",)
        else:
            self.device_names = resolve_devices(config.devices, getattr(engine_class, "uses_gpu", False))
            self.front, runners = registry.build(config.engine, _sized(config, self.device_names),
                                                 len(self.device_names))
            batcher = Batcher(config.max_batch, config.max_wait_s, key=self.front.bucket_key,
                              starve_s=config.starve_s, room=ROOM)
            self.lanes = Lanes(batcher, limit=config.max_batch * (len(self.device_names) + 2) + config.workers,
                               cap=lambda: self.controller.cap)
            self.devices = Devices(runners, self.device_names, self.lanes, self.controller,
                                   lambda d: load_reader(d, self.sampler.latest), room=ROOM)
        self.sampler.start()

    def close(self, wait: bool = True) -> None:
        """Finish what waits (with `wait`, unless a run was cut short) and unload the engine."""
        try:
            if self.devices is not None:
                if wait and not self.cut_short:
                    self.devices.close()
                else:  # stopping early: wake decode threads held back by the engine's buffers, wait for nothing
                    self.front.abort()
                    self.lanes.close()
            elif self.config.ray == "local":
                from . import remote

                remote.shutdown()
        finally:
            self.sampler.stop()


def _sized(config: ServiceConfig, devices: tuple[str, ...]) -> EngineOptions:
    options = config.engine_options
    if not options.buffer_pages:  # how far decoding may run ahead of the devices (the pool's back-pressure)
        # Per device a batch computing and the next one staged; two batches' worth forming in the lanes'
        # buckets; a page in each decode thread.
        options = dataclasses.replace(
            options, buffer_pages=config.max_batch * (2 * len(devices) + 2) + config.workers)
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
