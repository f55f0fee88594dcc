"""Engine names → their front's class (engines/base.py). Modules are imported only when their engine is used.

An engine may run on more than one backend (`--backend`, EngineOptions.backend): the same pages, prompt and
output through another runtime, a front class of its own (whose identity names the backend). The first one
listed is the default."""

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
_BACKENDS = {
    "deepseek-ocr2": {
        "transformers": _BUILTIN["deepseek-ocr2"],
        "vllm": "ocrbatch.engines.deepseek_ocr2_vllm.engine:VllmDeepseekOcr2Engine",
    },
}
_EXTRA: dict[str, type[Front]] = {}


def names() -> list[str]:
    return sorted({*_BUILTIN, *_EXTRA})


def register(name: str, factory: type[Front]) -> None:
    """Add an engine (tests use this for fault-injecting engines)."""
    _EXTRA[name] = factory


def unregister(name: str) -> None:
    _EXTRA.pop(name, None)


def backends(name: str) -> tuple[str, ...]:
    """The backends of engine `name`, the default first."""
    return tuple(_BACKENDS.get(name, {EngineOptions.backend: None}))


def engine_class(name: str, options: EngineOptions | None = None) -> type[Front]:
    """The front class of engine `name` on the backend `options` names (the default without options)."""
    backend = options.backend if options is not None else EngineOptions.backend
    if name not in _EXTRA and name not in _BUILTIN:
        raise UsageError(f"unknown engine {name!r}; choose one of: {', '.join(names())}")
    where = _BACKENDS.get(name, {EngineOptions.backend: _BUILTIN.get(name)}).get(backend)
    if backend not in backends(name):
        having = [n for n in names() if len(backends(n)) > 1]
        raise UsageError(f"--backend {backend}: engine {name} runs on {' or '.join(backends(name))} only "
                         f"(--backend is for {', '.join(having)})")
    if name in _EXTRA:
        return _EXTRA[name]
    module_name, _, cls_name = where.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise EngineLoadError(f"engine {name!r} needs a package that is not installed: {exc}") from exc
    return getattr(module, cls_name)


def capabilities(name: str, options: EngineOptions | None = None) -> Capabilities:
    return engine_class(name, options).capabilities


def create(name: str, options: EngineOptions) -> Front:
    """The engine alone (an Engine: both roles in one object), for scripts and checks."""
    return engine_class(name, options)(options)


def build(name: str, options: EngineOptions, devices: int) -> tuple[Front, list[Runner]]:
    """The engine's front and, made by it, one runner per device."""
    front = engine_class(name, options)(options)
    return front, [front.runner() for _ in range(devices)]
