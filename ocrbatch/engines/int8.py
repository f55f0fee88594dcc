"""Static int8 (QDQ) copies of the embedded engine's recognizers, built here from the wheel's models.

Nothing is downloaded: the first run that asks for an int8 recognizer quantizes the wheel's float model with
onnxruntime's `quantize_static`, calibrated on text lines this module draws itself (Pillow's built-in font,
a few sizes and strokes, black on white and grey on grey), and keeps the result in the user's cache folder:

    $XDG_CACHE_HOME/ocrbatch/int8/      (~/.cache/ocrbatch/int8/ without it)
        rec-<source sha256[:16]>-v<RECIPE>.onnx     the quantized model
        rec-<...>.json                              its own sha256, written after it

The name carries the source model's hash and the recipe's version, so a new wheel or a new recipe builds a
new file. A file is used only when the sidecar's hash matches its bytes: a half-written or corrupt file is
rebuilt, never loaded. Builds are whole-or-nothing (a temporary file beside the target, renamed over it) and
serialised by an exclusive lock on `<name>.lock`: a second process that asks while the first builds waits,
then finds the finished file, so both end with the same bytes.

Needs the `onnx` package (onnxruntime's quantization tools import it): `pip install onnx`.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import tempfile
from pathlib import Path
from typing import Callable, Iterator

RECIPE = 1  # bump when the calibration or the quantization settings change: the cache is rebuilt
CALIBRATION_LINES = 48  # lines drawn for calibration
CALIBRATION_SEED = 26  # the same lines every time: two builds of one source give the same file
HASH_CHARS = 16
OPSET = 13  # the opset a model is raised to before quantizing
_WORDS = ("The quick brown fox jumps over the lazy dog 0123456789 invoice total amount due section "
          "figure table results method data analysis (see p. 12) e-mail: name@example.org 3.14% $42.00 "
          "Introduction Chapter Summary ACKNOWLEDGEMENTS Résumé naïve über façade, semicolon; colon: "
          "quotation \"marks\" 'single' [brackets] {braces} <angle> #hash & ampersand * star / slash").split()


class Int8Unavailable(RuntimeError):
    """The int8 model cannot be built here (no `onnx` package, or quantization failed)."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ocrbatch" / "int8"


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def cached_path(source: Path, folder: Path | None = None) -> Path:
    """Where the int8 copy of `source` is kept (whether or not it is built yet)."""
    folder = folder or cache_dir()
    kind = f"{source.parent.parent.name}-{source.parent.name}"  # e.g. tiny-rec
    return folder / f"{kind}-{file_sha256(source)[:HASH_CHARS]}-v{RECIPE}.onnx"


def is_valid(target: Path) -> bool:
    """The file is there, whole, and the one its sidecar names (a half-written or damaged file is not)."""
    sidecar = target.with_suffix(".json")
    try:
        want = json.loads(sidecar.read_text(encoding="utf-8"))["sha256"]
        return isinstance(want, str) and file_sha256(target) == want
    except (OSError, ValueError, KeyError, TypeError):
        return False


def int8_model(source: Path, folder: Path | None = None,
               build: Callable[[Path, Path], None] | None = None) -> tuple[Path, bool]:
    """(the int8 copy of the recognizer `source`, whether this call built it).

    Built at most once per source and recipe: under the lock, a valid file is taken as it is; anything else
    there (half-written, damaged, a sidecar that does not match) is built again. Int8Unavailable when it
    cannot be built."""
    target = cached_path(source, folder)
    target.parent.mkdir(parents=True, exist_ok=True)
    with _locked(target.with_suffix(".lock")):  # checked under the lock: never while another writes it
        if is_valid(target):  # built before, or by another process while this one waited
            return target, False
        _write_atomic(target, lambda tmp: (build or quantize_recognizer)(source, tmp))
        digest = file_sha256(target)
        _write_atomic(target.with_suffix(".json"), lambda tmp: tmp.write_text(
            json.dumps({"sha256": digest, "source": str(source), "recipe": RECIPE}), encoding="utf-8"))
        return target, True


class _locked:
    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> None:
        import fcntl

        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        import fcntl

        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def _write_atomic(target: Path, write: Callable[[Path], object]) -> None:
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


# -- the build -----------------------------------------------------------------------------------

def calibration_lines(count: int = CALIBRATION_LINES, height: int = 48) -> list:
    """Text-line crops (BGR uint8, `height` rows) drawn here: varied sizes, strokes and contrasts."""
    import numpy as np
    from PIL import Image, ImageDraw, ImageFont

    rnd = random.Random(CALIBRATION_SEED)
    out = []
    for n in range(count):
        size = rnd.choice((18, 24, 30, 36))
        font = ImageFont.load_default(size=size)
        text = " ".join(rnd.choice(_WORDS) for _ in range(rnd.randint(2, 9)))
        ink, paper = (0, 255) if n % 3 else (rnd.randint(40, 110), rnd.randint(170, 230))
        box = ImageDraw.Draw(Image.new("L", (1, 1))).textbbox((0, 0), text, font=font)
        im = Image.new("L", (box[2] + 16, max(box[3], size) + 12), paper)
        ImageDraw.Draw(im).text((8, 6), text, fill=ink, font=font, stroke_width=n % 2)
        w = max(8, round(im.width * height / im.height))
        line = np.asarray(im.resize((w, height), Image.BILINEAR))
        out.append(np.ascontiguousarray(np.repeat(line[:, :, None], 3, axis=2)))
    return out


def _batches(lines: list, height: int) -> Iterator[dict]:
    from .ppocr import recognizer_input

    for line in lines:
        yield recognizer_input([line], height=height)


def quantize_recognizer(source: Path, dest: Path) -> None:
    """Static QDQ int8 of a CTC recognizer: weights per channel, activations calibrated on drawn lines."""
    try:
        from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                              quantize_static)
        from onnxruntime.quantization.shape_inference import quant_pre_process
    except ImportError as exc:
        raise Int8Unavailable(f"int8 models need the onnx package (pip install onnx): {exc}") from exc
    import onnxruntime as ort

    from .ppocr import REC_HEIGHT, input_height

    name = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"]).get_inputs()[0].name
    height = input_height(source) or REC_HEIGHT  # calibrated at the model's own input height

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.it = ({name: x} for x in _batches(calibration_lines(height=height), height))

        def get_next(self):
            return next(self.it, None)

    import onnx
    from onnx import version_converter

    with tempfile.TemporaryDirectory(dir=dest.parent) as work:
        # Per-channel weights need opset 13 (DequantizeLinear's axis); the wheel's models are opset 11.
        upgraded = Path(work) / "opset.onnx"
        model = onnx.load(str(source))
        if max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0) < OPSET:
            model = version_converter.convert_version(model, OPSET)
        onnx.save(model, str(upgraded))
        prepared = Path(work) / "prepared.onnx"
        try:
            quant_pre_process(str(upgraded), str(prepared), skip_symbolic_shape=True)
        except Exception:  # noqa: BLE001 - the preprocessing only helps; quantize the model as it is
            prepared = upgraded
        try:
            quantize_static(str(prepared), str(dest), Reader(), quant_format=QuantFormat.QDQ,
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=True,
                            calibrate_method=CalibrationMethod.MinMax,
                            extra_options={"ActivationSymmetric": False, "WeightSymmetric": True})
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own types
            raise Int8Unavailable(f"cannot quantize {source.name}: {exc}") from exc
