"""Engine names → their front's class (engines/base.py). Modules are imported only when their engine is used.

The engines are their plug-ins (engines/plugin.py), found by engines/catalog.py: the built-ins' folders and the
entry points of engines installed as packages; tests add theirs at run time (`register`). An engine may run on
more than one backend (`--backend`, EngineOptions.backend): the same pages, prompt and output through another
runtime, a front class of its own (whose identity names the backend). An engine that declares no backends runs
on the default one only."""

from __future__ import annotations

import importlib

from ..config import EngineOptions
from ..errors import EngineLoadError, UsageError
from . import catalog
from .base import Capabilities, Front, Runner


def names() -> list[str]:
    return sorted(catalog.names())


def register(name: str, factory: type[Front]) -> None:
    """Add an engine at run time (tests use this for fault-injecting engines)."""
    catalog.register(name, factory)


def unregister(name: str) -> None:
    catalog.unregister(name)


def backends(name: str) -> tuple[str, ...]:
    """The backends of engine `name`, the default first."""
    plugin = catalog.plugins().get(name)
    return tuple(plugin.backends) if plugin is not None and plugin.backends else (EngineOptions.backend,)


def engine_class(name: str, options: EngineOptions | None = None) -> type[Front]:
    """The front class of engine `name` on the backend `options` names (the default without options)."""
    backend = options.backend if options is not None else EngineOptions.backend
    extra, plugin = catalog.registered(name), catalog.plugins().get(name)
    if extra is None and plugin is None:
        raise UsageError(f"unknown engine {name!r}; choose one of: {', '.join(names())}")
    if backend not in backends(name):
        having = [n for n in names() if len(backends(n)) > 1]
        raise UsageError(f"--backend {backend}: engine {name} runs on {' or '.join(backends(name))} only "
                         f"(--backend is for {', '.join(having)})")
    if extra is not None:
        return extra
    module_name, _, cls_name = (plugin.front_for(backend) or plugin.front).partition(":")
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
