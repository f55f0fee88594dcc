"""The engines there are: each one's plug-in (engines/plugin.py), found once, and those registered at run time.

Built-in engines are the subpackages of ocrbatch.engines with a `plugin.py` (looked for on disk, so a source tree
whose installed metadata is stale still finds them all); engines installed as packages of their own come through
the entry-point group `ocrbatch.engines`. A plug-in that cannot be loaded, or clashes with one found before it,
is left out and kept in `problems()` (doctor shows them); it never stops a command.

This module imports no engine and nothing of the option table: the table (table.py) asks it for the engines'
rows and the choices of --engine and --backend, the registry (registry.py) for their front classes.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import pkgutil
from pathlib import Path
from typing import Any, Iterable

from ..rows import ENGINE_FLAG, ENGINE_OPTIONS, Option
from .plugin import GROUP, EnginePlugin

log = logging.getLogger("ocrbatch")
_PACKAGE = __name__.rpartition(".")[0]  # ocrbatch.engines
_found: dict[str, EnginePlugin] | None = None
_problems: list[tuple[str, str]] = []  # (where, why) for each plug-in left out
_extra: dict[str, Any] = {}  # engines registered at run time (tests' fault engines): name → front class


def plugins() -> dict[str, EnginePlugin]:
    """Every engine's plug-in, by name: the built-ins (in their folders' order), then the entry points'."""
    global _found
    if _found is None:
        found: dict[str, EnginePlugin] = {}
        for where, load in [*_builtin(), *_entry_points()]:
            try:
                declared = load()
                for plugin in _as_plugins(declared):
                    _add(found, plugin, where)
            except Exception as exc:  # noqa: BLE001 - a broken plug-in is a finding, not a crash
                _problems.append((where, f"{type(exc).__name__}: {exc}"))
        _found = found
    return _found


def _builtin() -> Iterable[tuple[str, Any]]:
    folder = Path(__file__).resolve().parent
    for info in sorted(pkgutil.iter_modules([str(folder)]), key=lambda i: i.name):
        if info.ispkg and (folder / info.name / "plugin.py").is_file():
            module = f"{_PACKAGE}.{info.name}.plugin"
            yield module, lambda module=module: importlib.import_module(module).ENGINES


def _entry_points() -> Iterable[tuple[str, Any]]:
    try:
        points = importlib.metadata.entry_points(group=GROUP)
    except Exception as exc:  # noqa: BLE001 - broken metadata elsewhere must not stop ocrbatch
        _problems.append((f"entry points {GROUP}", str(exc)))
        return []
    return [(f"entry point {p.name} = {p.value}", p.load) for p in sorted(points, key=lambda p: p.name)]


def _as_plugins(declared: Any) -> list[EnginePlugin]:
    plugins = [declared] if isinstance(declared, EnginePlugin) else list(declared)
    for plugin in plugins:
        if not isinstance(plugin, EnginePlugin):
            raise TypeError(f"{plugin!r} is not an EnginePlugin")
    return plugins


def _add(found: dict[str, EnginePlugin], plugin: EnginePlugin, where: str) -> None:
    """`plugin` into `found`, unless its name or a row of its own is taken already (then it is a problem)."""
    if plugin.name in found:
        raise ValueError(f"engine {plugin.name!r} is registered already")
    taken = {o.name for p in found.values() for o in p.options}
    for o in plugin.options:
        if o.to != ENGINE_OPTIONS or not o.scope <= ENGINE_FLAG:
            raise ValueError(f"{plugin.name}'s option {o.name!r}: an engine's rows go to EngineOptions "
                             "(to=ENGINE_OPTIONS), in scopes run, serve and engine")
        if o.name in taken:
            raise ValueError(f"{plugin.name}'s option {o.name!r} is another engine's already")
    found[plugin.name] = plugin


def problems() -> list[tuple[str, str]]:
    """The plug-ins left out, and why."""
    plugins()
    return list(_problems)


def option_rows(core: Iterable[Option]) -> tuple[Option, ...]:
    """The engines' own rows, less any whose name a row of `core` (the table's own) has."""
    names = {o.name for o in core}
    rows = []
    for plugin in plugins().values():
        clash = [o.name for o in plugin.options if o.name in names]
        if clash:
            _problems.append((plugin.name, f"its option(s) {', '.join(clash)} are ocrbatch's own; left out"))
        rows += [o for o in plugin.options if o.name not in names]
    return tuple(rows)


def owner(row: str) -> EnginePlugin | None:
    """The engine whose own option `row` is, or None (one of ocrbatch's own)."""
    return next((p for p in plugins().values() if any(o.name == row for o in p.options)), None)


def names() -> tuple[str, ...]:
    """Every engine's name: the plug-ins', then those registered at run time."""
    return tuple(dict.fromkeys([*plugins(), *sorted(_extra)]))


def backend_names() -> tuple[str, ...]:
    """Every backend some engine runs on (--backend's choices), in the order the engines list them."""
    return tuple(dict.fromkeys(b for p in plugins().values() for b in p.backends))


def describe(first: str = "") -> str:
    """The engines for --engine's help, `first` (the default) first: "rapidocr (embedded, CPU), deepseek-ocr2
    (GPU, needs --model), ..."."""
    ordered = sorted(plugins().values(), key=lambda p: p.name != first)
    return ", ".join(f"{p.name} ({p.about})" if p.about else p.name for p in ordered)


def register(name: str, front: Any) -> None:
    """Add an engine by its front class at run time (tests' fault-injecting engines)."""
    _extra[name] = front


def unregister(name: str) -> None:
    _extra.pop(name, None)


def registered(name: str) -> Any | None:
    """The front class registered at run time under `name`, or None."""
    return _extra.get(name)
