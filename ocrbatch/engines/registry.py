"""Engine names → their front's class (engines/base.py). Modules are imported only when their engine is used."""

from __future__ import annotations

import importlib

from ..config import EngineOptions
from ..errors import EngineLoadError, UsageError
from .base import Capabilities, Front, Runner

_BUILTIN = {
    "rapidocr": "ocrbatch.engines.rapid:RapidOcrEngine",
    "deepseek-ocr2": "ocrbatch.engines.deepseek_ocr2.engine:DeepseekOcr2Engine",
    "fake": "ocrbatch.engines.fake:FakeEngine",
    "fake-timed": "ocrbatch.engines.fake:TimedFakeEngine",
}
_EXTRA: dict[str, type[Front]] = {}


def names() -> list[str]:
    return sorted({*_BUILTIN, *_EXTRA})


def register(name: str, factory: type[Front]) -> None:
    """Add an engine (tests use this for fault-injecting engines)."""
    _EXTRA[name] = factory


def unregister(name: str) -> None:
    _EXTRA.pop(name, None)


def engine_class(name: str) -> type[Front]:
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


def capabilities(name: str) -> Capabilities:
    return engine_class(name).capabilities


def create(name: str, options: EngineOptions) -> Front:
    """The engine alone (an Engine: both roles in one object), for scripts and checks."""
    return engine_class(name)(options)


def build(name: str, options: EngineOptions, devices: int) -> tuple[Front, list[Runner]]:
    """The engine's front and, made by it, one runner per device."""
    front = engine_class(name)(options)
    return front, [front.runner() for _ in range(devices)]
