"""`ocrbatch doctor`: what this install can run, and why not. Local checks only: no network, no download.

The system's checks are here (Python, torch, GPUs, Ray); each engine brings its own (its plug-in's `doctor`,
engines/NAME/doctor.py), run in turn, the default engine's first. Exit 0 when the default engine (the embedded
rapidocr) converts a test page, 5 (ExitCode.ENGINE_LOAD) when it does not. torch and transformers are imported
by the checks, inside the command, never by `ocrbatch --help`.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import platform
import sys
from typing import Any, Callable, Mapping

from . import __version__
from .errors import ExitCode, error_line
from .findings import Finding, version as _version


def embedded() -> str:
    """The default engine (the `engine` row's default): the one whose test page decides the exit code."""
    from .table import OPTION

    return OPTION["engine"].default


# -- system -------------------------------------------------------------------------------------------

def check_python() -> Finding:
    v = platform.python_version()
    return Finding("python", None, f"{v} ({platform.python_implementation()}) on {platform.platform(terse=True)} "
                                   f"{platform.machine()}, {os.cpu_count() or '?'} CPUs",
                   {"version": v, "executable": sys.executable})


def check_torch() -> Finding:
    if importlib.util.find_spec("torch") is None:
        return Finding("torch", None, "not installed (only deepseek-ocr2 needs it: pip install 'ocrbatch[gpu]')",
                       {"installed": False})
    try:
        import torch

        cuda = torch.cuda.is_available()
        devices = [{"index": i, "name": torch.cuda.get_device_name(i),
                    "capability": ".".join(map(str, torch.cuda.get_device_capability(i)))}
                   for i in range(torch.cuda.device_count())] if cuda else []
    except Exception as exc:  # noqa: BLE001 - a broken install is a finding
        return Finding("torch", False, f"installed but fails: {error_line(exc)}", {"installed": True})
    built = torch.version.cuda
    detail = f"{torch.__version__}, built for CUDA {built}" if built else f"{torch.__version__}, CPU-only build"
    if cuda:
        detail += "; sees " + ", ".join(f"cuda:{d['index']} {d['name']} (sm {d['capability']})" for d in devices)
    elif built:
        detail += "; sees no CUDA device"
    return Finding("torch", None, detail, {"installed": True, "version": torch.__version__, "cuda": built,
                                           "cuda_available": cuda, "devices": devices})


def check_gpus() -> Finding:
    from .gpu.nvml import Nvml, NvmlUnavailable

    try:
        nvml = Nvml()
    except NvmlUnavailable as exc:
        return Finding("gpus", None, f"none found ({exc})", {"devices": []})
    try:
        driver = nvml.driver_version()
        rows = nvml.read()
    except NvmlUnavailable as exc:
        return Finding("gpus", False, f"NVML answers but fails: {exc}", {"devices": []})
    finally:
        nvml.close()
    devices = [{"index": i, "name": name, "memory_total_mib": total // 2**20, "memory_used_mib": used // 2**20}
               for i, name, _util, used, total in rows]
    listed = "; ".join(f"{d['index']}: {d['name']}, {d['memory_total_mib'] / 1024:.1f} GiB "
                       f"({d['memory_used_mib'] / 1024:.1f} GiB in use)" for d in devices) or "no visible device"
    return Finding("gpus", None, f"driver {driver}; {listed}", {"driver": driver, "devices": devices})


def check_ray() -> Finding:
    if importlib.util.find_spec("ray") is None:
        return Finding("ray", None, "not installed (only --ray needs it: pip install 'ocrbatch[ray]')",
                       {"installed": False})
    v = _version("ray")
    return Finding("ray", None, f"installed ({v or 'version unknown'}; for --ray)", {"installed": True, "version": v})


# -- engines ------------------------------------------------------------------------------------------

def check_engines(found: Mapping[str, Finding]) -> list[Finding]:
    """Each engine's own checks (its plug-in's `doctor`), the default engine's first; an engine without checks,
    or registered at run time, is constructed; a plug-in that could not be loaded is a failed finding."""
    from .engines import catalog

    first = embedded()
    out: list[Finding] = []
    for name in sorted(catalog.names(), key=lambda n: n != first):
        plugin = catalog.plugins().get(name)
        if plugin is not None and plugin.doctor:
            out += _run_checks(name, plugin.doctor, found)
        else:
            out.append(_constructs(name, "plug-in" if plugin is not None else "registered at run time"))
    out += [Finding(where, False, f"left out: {why}") for where, why in catalog.problems()]
    return out


def _run_checks(name: str, where: str, found: Mapping[str, Finding]) -> list[Finding]:
    module, _, function = where.partition(":")
    try:
        checks: Callable[[Mapping[str, Finding]], list[Finding]] = getattr(importlib.import_module(module), function)
        return list(checks(found))
    except Exception as exc:  # noqa: BLE001 - an engine's broken checks are its finding
        return [Finding(name, False, f"its doctor checks fail: {error_line(exc)}")]


def _constructs(name: str, how: str) -> Finding:
    from .config import EngineOptions
    from .engines import registry

    try:
        registry.create(name, EngineOptions())
        return Finding(name, True, f"{how}; constructs")
    except Exception as exc:  # noqa: BLE001
        return Finding(name, False, f"{how}; fails: {error_line(exc)}")


# -- the command --------------------------------------------------------------------------------------

def findings() -> list[Finding]:
    found = [check_python(), Finding("ocrbatch", None, __version__, {"version": __version__}), check_torch(),
             check_gpus(), check_ray()]
    return found + check_engines({f.name: f for f in found})


def render(found: list[Finding], console: Any) -> None:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    marks = {True: Text("ok", style="green"), False: Text("no", style="red"), None: Text("·", style="dim")}
    table = Table(box=box.SIMPLE, show_header=False, title="ocrbatch doctor", title_justify="left",
                  title_style="bold", pad_edge=False)
    table.add_column(no_wrap=True)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for f in found:
        table.add_row(marks[f.ok], f.name, Text(f.detail))
    console.print(table)


def main(*, as_json: bool = False) -> int:
    found = findings()
    ready = any(f.name == embedded() and f.ok for f in found)
    if as_json:
        doc = {"ok": ready, "checks": [{"name": f.name, "ok": f.ok, "detail": f.detail, **f.data} for f in found]}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        from rich.console import Console

        console = Console()
        render(found, console)
        console.print("ready: the embedded engine works" if ready else
                      f"[red]not ready[/]: the embedded {embedded()} engine does not work (see above)")
    return int(ExitCode.OK if ready else ExitCode.ENGINE_LOAD)
