"""The connection to a Ray cluster (`--ray`), made by the service and closed with it (the ray_*.py modules use it).

Ray is imported only here and in the ray_*.py modules, and only when `--ray` is given (`pip install "ocrbatch[ray]"`).
"""

from __future__ import annotations

import logging
from typing import Any

from ..errors import EngineLoadError, error_line

# A private instance's workers run at the driver's priority. Ray starts worker processes at niceness 15 (the
# driver at 0): on a machine with other work, that starved the actors holding the engine (2 busy processes:
# an actor's start took 45-97 s instead of 8, its pages stalled past --stall-timeout), where a run without Ray
# computes at the user's priority. Tests that start their own instance use it too.
LOCAL_SYSTEM_CONFIG = {"worker_niceness": 0}


def connect(address: str) -> None:
    """Join the cluster at `address`: auto (RAY_ADDRESS, or the cluster this machine is part of),
    local (a private Ray instance on this machine, for this run) or a head's address."""
    try:
        import ray
    except ImportError as exc:
        raise EngineLoadError('--ray needs Ray: pip install "ocrbatch[ray]"') from exc
    if ray.is_initialized():
        return
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.ERROR}
    try:
        if address == "local":
            ray.init(**kwargs, _system_config=LOCAL_SYSTEM_CONFIG)
        else:
            ray.init(address=address, **kwargs)
    except ConnectionError as exc:
        raise EngineLoadError(f"cannot reach the Ray cluster at {address}: {error_line(exc)}") from exc


def shutdown() -> None:
    import ray

    ray.shutdown()
