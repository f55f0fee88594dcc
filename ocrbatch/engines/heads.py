"""Recognizers derived from the wheel's: a Latin output head, and another input height. Built here, at first use.

A CTC recognizer's last layer (a MatMul and its bias, then the Softmax over the classes) scores every class of its
dictionary: 18,710 for PP-OCRv6 small, 6,906 for tiny, nearly all of them CJK ideographs. A *head* keeps only the
classes of a named character set (charsets/<name>.txt; `latin`: see that file's header and
scripts/latin_charset.py), by slicing that MatMul's weight columns and the bias to them; the Softmax after it
stays, so the probabilities are over the kept classes. CTC's blank (class 0) and the space (the last) are always
kept. Where the model's best class was kept, the argmax is the same.

The *input height* of the wheel's recognizers is fixed at 48 in the graph. A copy at another height sets the
input's dimension 2 to it and the one AveragePool that pools the backbone's remaining rows to as many rows as are
left at that height (shape inference says how many: 3 at 48 or 40, 2 at 32; none: HeadUnavailable). The copy's input states its height,
so ppocr.input_height reads it from the file like any fixed-height model's.

Cached like the int8 copies (engines/int8.py, whose lock and atomic write this uses):

    $XDG_CACHE_HOME/ocrbatch/heads/      (~/.cache/ocrbatch/heads/ without it)
        <kind>-<source sha256[:16]>-<charset sha256[:8] or all>-h<height or model>-v<RECIPE>.onnx
        ... .json                         its own sha256, written after it

A new wheel, a new character set or a new recipe names a new file; a file whose sidecar does not match its bytes
(half-written, damaged) is built again, never loaded. Needs the `onnx` package.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from .int8 import HASH_CHARS, _locked, _write_atomic, file_sha256, is_valid

if TYPE_CHECKING:
    from .ppocr import RecSpec

RECIPE = 1  # bump when the derivation changes: the cache is rebuilt
CHARSETS = Path(__file__).resolve().parent / "charsets"  # <name>.txt: a head's kept characters


class HeadUnavailable(RuntimeError):
    """The derived recognizer cannot be built here (no `onnx` package, or a graph this module does not know)."""


def can_derive() -> bool:
    """Whether derived recognizers can be built here: they need the onnx package."""
    import importlib.util

    return importlib.util.find_spec("onnx") is not None


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ocrbatch" / "heads"


def charset_path(name: str) -> Path:
    return CHARSETS / f"{name}.txt"


def read_charset(name: str) -> frozenset[str]:
    """The characters of charsets/<name>.txt: every line of exactly one character (longer lines are comments)."""
    lines = charset_path(name).read_text(encoding="utf-8").splitlines()
    return frozenset(line for line in lines if len(line) == 1)


def kept_classes(dictionary: Sequence[str], keep: frozenset[str]) -> list[int]:
    """The CTC classes a head keeps, in order: the blank (0), each dictionary entry in `keep` (1 + its line), and
    the space (the class after the dictionary's)."""
    return [0, *(k + 1 for k, ch in enumerate(dictionary) if ch in keep), len(dictionary) + 1]


def cached_path(source: Path, charset: str | None, height: int | None, folder: Path | None = None) -> Path:
    folder = folder or cache_dir()
    kind = f"{source.parent.parent.name}-{source.parent.name}"  # e.g. tiny-rec
    head = hashlib.sha256(charset_path(charset).read_bytes()).hexdigest()[:8] if charset else "all"
    return folder / f"{kind}-{file_sha256(source)[:HASH_CHARS]}-{head}-h{height or 'model'}-v{RECIPE}.onnx"


def derived_model(source: Path, dictionary: Sequence[str], charset: str | None, height: int | None,
                  folder: Path | None = None,
                  build: Callable[[Path, Path], None] | None = None) -> tuple[Path, bool]:
    """(the copy of the recognizer `source` with the `charset` head and the input `height`, whether this call built
    it). None for either leaves that as it is. Built at most once per source, charset and recipe, under a lock;
    anything there that is not whole is built again. HeadUnavailable when it cannot be built."""
    target = cached_path(source, charset, height, folder)
    target.parent.mkdir(parents=True, exist_ok=True)
    with _locked(target.with_suffix(".lock")):
        if is_valid(target):
            return target, False
        classes = kept_classes(dictionary, read_charset(charset)) if charset else None
        _write_atomic(target, lambda tmp: (build or derive)(source, tmp, classes, height))
        digest = file_sha256(target)
        _write_atomic(target.with_suffix(".json"), lambda tmp: tmp.write_text(json.dumps(
            {"sha256": digest, "source": str(source), "charset": charset, "height": height, "recipe": RECIPE}),
            encoding="utf-8"))
        return target, True


def derive(source: Path, dest: Path, classes: list[int] | None, height: int | None) -> None:
    """Write to `dest` the recognizer `source` with only `classes` in its output layer and its input `height`."""
    try:
        import numpy as np
        import onnx
        from onnx import numpy_helper, shape_inference
    except ImportError as exc:
        raise HeadUnavailable(f"a derived recognizer needs the onnx package (pip install onnx): {exc}") from exc
    model = onnx.load(str(source))
    graph = model.graph
    if classes is not None:
        _slice_head(graph, classes, np, numpy_helper)
    if height is not None:
        _set_height(model, height, shape_inference)
    onnx.save(model, str(dest))


def _slice_head(graph, classes: list[int], np, numpy_helper) -> None:
    """Keep `classes` in the MatMul (+ Add of a bias) that feeds the graph's last Softmax."""
    producers = {out: n for n in graph.node for out in n.output}
    softmax = [n for n in graph.node if n.op_type == "Softmax"]
    if not softmax:
        raise HeadUnavailable("no Softmax: not a CTC recognizer")
    node, bias_node = producers.get(softmax[-1].input[0]), None
    while node is not None and node.op_type in ("Identity", "Add"):
        if node.op_type == "Add":
            bias_node = node
        node = producers.get(node.input[0])
    if node is None or node.op_type not in ("MatMul", "Gemm"):
        raise HeadUnavailable("the output layer is not a MatMul or Gemm")
    inits = {i.name: i for i in graph.initializer}
    names = [node.input[1]] + ([x for x in bias_node.input if x in inits] if bias_node is not None else [])
    if node.op_type == "Gemm" and len(node.input) > 2:
        names.append(node.input[2])
    keep = np.asarray(classes)
    for name in names:
        if name not in inits:
            raise HeadUnavailable(f"the output layer's {name} is not a constant")
        array = numpy_helper.to_array(inits[name])
        trans = node.op_type == "Gemm" and name == node.input[1] and any(
            a.name == "transB" and a.i for a in node.attribute)
        array = array[keep] if (array.ndim == 1 or trans) else array[:, keep]
        inits[name].CopyFrom(numpy_helper.from_array(np.ascontiguousarray(array), name))
    del graph.value_info[:]
    for out in graph.output:
        dims = out.type.tensor_type.shape.dim
        if dims and dims[-1].HasField("dim_value"):
            dims[-1].dim_value = len(classes)


def _set_height(model, height: int, shape_inference) -> None:
    """Fix the input's rows at `height` and make the AveragePool over the backbone's last rows pool all of them."""
    graph = model.graph
    dims = graph.input[0].type.tensor_type.shape.dim
    dims[2].Clear()
    dims[2].dim_value = height
    del graph.value_info[:]
    pools = [n for n in graph.node if n.op_type == "AveragePool"]
    if len(pools) != 1:
        raise HeadUnavailable(f"expected one AveragePool, found {len(pools)}: the height cannot be changed")
    pool = pools[0]
    inferred = {v.name: v for v in shape_inference.infer_shapes(model).graph.value_info}
    shape = inferred.get(pool.input[0])
    rows = shape.type.tensor_type.shape.dim[2].dim_value if shape is not None else 0
    if not rows:
        raise HeadUnavailable("cannot tell the rows the AveragePool sees at that height")
    for attr in pool.attribute:
        if attr.name in ("kernel_shape", "strides"):
            attr.ints[0] = rows


def resolve(spec: "RecSpec", models: Path | None = None,
            folder: Path | None = None) -> tuple[Path, list[str], int]:
    """(the model file to load, its CTC classes: blank, characters, space; its input height) for `spec`, the
    derived copy (engines/heads.py) built at first use where the head or the height asks for one."""
    from .ppocr import input_height, model_dir

    models = models or model_dir()
    source, dictionary = models / spec.model, models / spec.dictionary
    chars = dictionary.read_text(encoding="utf-8").splitlines()
    fixed = input_height(source)
    height = spec.height or fixed
    if height is None:
        raise ValueError(f"{source}: the model's input height is free: its RecSpec must give one")
    change = spec.height if spec.height is not None and fixed is not None and spec.height != fixed else None
    path = source
    if spec.head is not None or change is not None:
        path, _ = derived_model(source, chars, spec.head, change, folder)
    classes = ["<blank>", *chars, " "]
    if spec.head is not None:
        classes = [classes[k] for k in kept_classes(chars, read_charset(spec.head))]
    return path, classes, height
