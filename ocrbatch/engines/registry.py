"""Engine names → classes. Modules are imported only when their engine is used."""

from __future__ import annotations

import importlib
from typing import Callable

from ..config import EngineOptions
from ..errors import EngineLoadError, UsageError
from .base import Engine, Front, Runner

_BUILTIN = {
    "rapidocr": "ocrbatch.engines.rapid:RapidOcrEngine",
    "deepseek-ocr2": "ocrbatch.engines.deepseek_ocr2.engine:DeepseekOcr2Engine",
    "fake": "ocrbatch.engines.fake:FakeEngine",
    "fake-timed": "ocrbatch.engines.fake:TimedFakeEngine",
}
_EXTRA: dict[str, Callable[[EngineOptions], Engine]] = {}


def names() -> list[str]:
    return sorted({*_BUILTIN, *_EXTRA})


def register(name: str, factory: Callable[[EngineOptions], Engine]) -> None:
    """Add an engine (tests use this for fault-injecting engines)."""
    _EXTRA[name] = factory


def unregister(name: str) -> None:
    _EXTRA.pop(name, None)


def engine_class(name: str) -> Callable[[EngineOptions], Engine]:
    if name in _EXTRA:
        return _EXTRA[name]
    if name not in _BUILTIN:
        raise UsageError(f"unknown engine {name!r}; choose one of: {', '.join(names())}")
    module_name, _, cls_name = _BUILTIN[name].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise EngineLoadError(f"engine {name!r} needs a package that is not installed: {exc}") from exc
    return getattr(module, cls_name)


def create(name: str, options: EngineOptions) -> Engine:
    return engine_class(name)(options)


def build(name: str, options: EngineOptions, devices: int) -> tuple[Front, list[Runner]]:
    """The engine's front and one runner per device. An engine is one class playing both roles: the first
    device's runner is also the front (what it prepares, its own runner frees); the others are new ones."""
    factory = engine_class(name)
    front = factory(options)
    return front, [front] + [factory(options) for _ in range(devices - 1)]
