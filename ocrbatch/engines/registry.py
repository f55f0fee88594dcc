"""Engine names → classes. Modules are imported only when their engine is used.

An engine may have several backends (`--backend`, EngineOptions.backend): the same pages, prompt and output
through another runtime; its identity names the backend. The first one listed is the default."""

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
_BACKENDS = {
    "deepseek-ocr2": {
        "transformers": _BUILTIN["deepseek-ocr2"],
        "vllm": "ocrbatch.engines.deepseek_ocr2_vllm.engine:VllmDeepseekOcr2Engine",
    },
}
DEFAULT_BACKEND = "transformers"
_EXTRA: dict[str, Callable[[EngineOptions], Engine]] = {}


def names() -> list[str]:
    return sorted({*_BUILTIN, *_EXTRA})


def register(name: str, factory: Callable[[EngineOptions], Engine]) -> None:
    """Add an engine (tests use this for fault-injecting engines)."""
    _EXTRA[name] = factory


def unregister(name: str) -> None:
    _EXTRA.pop(name, None)


def backends(name: str) -> tuple[str, ...]:
    """The backends of engine `name` (the default first)."""
    return tuple(_BACKENDS.get(name, {DEFAULT_BACKEND: None}))


def engine_class(name: str, options: EngineOptions | None = None) -> Callable[[EngineOptions], Engine]:
    """The class of engine `name` on the backend `options` names."""
    backend = options.backend if options is not None else DEFAULT_BACKEND
    if name in _EXTRA:
        where = None
    elif name not in _BUILTIN:
        raise UsageError(f"unknown engine {name!r}; choose one of: {', '.join(names())}")
    else:
        where = _BACKENDS.get(name, {DEFAULT_BACKEND: _BUILTIN[name]}).get(backend)
    if backend != DEFAULT_BACKEND and where is None:
        having = [n for n in names() if len(backends(n)) > 1]
        raise UsageError(f"--backend {backend}: engine {name} has no such backend (--backend is for "
                         f"{', '.join(having)}: {' or '.join(sorted({b for n in having for b in backends(n)}))})")
    if name in _EXTRA:
        return _EXTRA[name]
    module_name, _, cls_name = where.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise EngineLoadError(f"engine {name!r} needs a package that is not installed: {exc}") from exc
    return getattr(module, cls_name)


def create(name: str, options: EngineOptions) -> Engine:
    return engine_class(name, options)(options)


def build(name: str, options: EngineOptions, devices: int) -> tuple[Front, list[Runner]]:
    """The engine's front and one runner per device. An engine is one class playing both roles: the first
    device's runner is also the front (what it prepares, its own runner frees); the others are new ones."""
    factory = engine_class(name, options)
    front = factory(options)
    return front, [front] + [factory(options) for _ in range(devices - 1)]
