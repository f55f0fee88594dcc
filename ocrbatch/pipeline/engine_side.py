"""The engine side a run or a Converter uses: a Service (service.py) with its executor chosen here, once: local
(executor.py: the decode intake, the lanes, the devices) or, with `--ray`, the cluster's actors
(ray_driver.py). Nothing after this choice tells a local run from a Ray run.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator

from ..config import ServiceConfig
from .service import Service


def open_service(config: ServiceConfig) -> Service:
    """A Service for `config`; its executor runs pages here, or on the Ray cluster `config.ray` names."""
    if config.ray:
        from .ray_driver import RayExecutor

        return Service(config, remote=RayExecutor)
    return Service(config)


@contextlib.contextmanager
def lent(config: ServiceConfig, given: Callable[[], Service] | None) -> Iterator[Service]:
    """The service a run uses: `given`'s (a Converter's, kept after the run), or one made for this run and
    closed after it (without waiting for the pages in flight when the run failed)."""
    if given is not None:
        yield given()
        return
    service = open_service(config)
    try:
        yield service
    except BaseException:
        service.close(wait=False)
        raise
    service.close()
