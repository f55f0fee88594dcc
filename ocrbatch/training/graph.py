"""The shipped PP-OCR recognizer as a trainable torch module, and its trained weights written back into the graph.

The module runs the ONNX graph itself, node by node, with torch operators (the recognizer uses fifteen kinds),
so nothing is converted and nothing is lost: the weights (convolutions, the folded biases, BatchNorm's scale
and shift, the two output layers) are parameters; BatchNorm's running statistics and the graph's scalar
constants are buffers, never trained (a short fine-tune with the statistics moving made the model worse on
real pages: ../shared/notes). Export writes the trained tensors back into a copy of the original graph, so the
exported model has exactly the shipped model's operators and dynamic axes, and runs wherever it ran.

Two changes to the graph make it a document model:
- its input height is `height` (32 instead of 48): the one AveragePool that pools the remaining rows gets the
  kernel that still pools them all (height / 16 rows);
- its output layer keeps only the classes of a character set (the Latin head): the last MatMul's weight columns
  and the bias entries of the kept classes, the CTC blank first and the space last, as the dictionary file
  orders them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import helper, numpy_helper

HEIGHT_STRIDE = 16  # input rows per row left before the pooling (two stride-2 convolutions, two stride (2, 1))


def load(path: Path) -> onnx.ModelProto:
    return onnx.load(str(path))


def dictionary(path: Path) -> list[str]:
    """A PP-OCR dictionary file: one character a line; the model's classes are blank, these, then space."""
    return path.read_text(encoding="utf-8").splitlines()


def _last_layer(model: onnx.ModelProto) -> tuple[str, str]:
    """Names of the output layer's weight and bias: the MatMul feeding the Add before the Softmax."""
    nodes = [n for n in model.graph.node if n.op_type != "Identity"]
    matmuls = [n for n in nodes if n.op_type == "MatMul"]
    weight = matmuls[-1].input[1]
    out = matmuls[-1].output[0]
    alias = {n.output[0]: n.input[0] for n in model.graph.node if n.op_type == "Identity"}
    for n in nodes:
        if n.op_type == "Add" and any(alias.get(i, i) == out or i == out for i in n.input):
            bias = [i for i in n.input if alias.get(i, i) != out and i != out][0]
            return weight, bias
    raise ValueError("no output bias found")


def adapt(model: onnx.ModelProto, height: int, keep: Sequence[int] | None) -> onnx.ModelProto:
    """A copy of the recognizer `model` for input `height`, with only the output classes `keep` (indices into
    its classes: 0 the blank, then the dictionary's, the space last), or all of them."""
    if height % HEIGHT_STRIDE:
        raise ValueError(f"the input height must be a multiple of {HEIGHT_STRIDE}, not {height}")
    m = onnx.ModelProto()
    m.CopyFrom(model)
    dims = m.graph.input[0].type.tensor_type.shape.dim
    dims[2].ClearField("dim_param")
    dims[2].dim_value = height
    pools = [n for n in m.graph.node if n.op_type == "AveragePool"]
    if len(pools) != 1:
        raise ValueError(f"expected one AveragePool, found {len(pools)}")
    for a in pools[0].attribute:
        if a.name in ("kernel_shape", "strides"):
            a.ints[0] = height // HEIGHT_STRIDE
    if keep is not None:
        w_name, b_name = _last_layer(m)
        keep_idx = np.asarray(list(keep), np.int64)
        for t in m.graph.initializer:
            if t.name == w_name:
                t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t)[:, keep_idx].copy(), w_name))
            elif t.name == b_name:
                t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t)[keep_idx].copy(), b_name))
        out_dims = m.graph.output[0].type.tensor_type.shape.dim
        out_dims[2].ClearField("dim_param")
        out_dims[2].dim_value = len(keep_idx)
    del m.graph.value_info[:]
    return m


# the last node of each model kind, whose input (the logits) the module returns
HEADS = ("Softmax", "Sigmoid")


class GraphModule(torch.nn.Module):
    """Runs an ONNX graph (a PP-OCR recognizer or detector) with torch operators; returns the logits: the input
    of the recognizer's Softmax (per frame, per class) or of the detector's Sigmoid (per pixel)."""

    def __init__(self, model: onnx.ModelProto) -> None:
        super().__init__()
        g = model.graph
        self._nodes = []
        self._alias: dict[str, str] = {}
        stats = set()  # tensors that are not weights: BatchNorm's statistics, Resize's scales
        for n in g.node:
            if n.op_type == "BatchNormalization":
                stats.update(n.input[3:5])
            elif n.op_type == "Resize":
                stats.update(n.input[1:])
        self._names: dict[str, str] = {}  # initializer name -> attribute name
        for i, t in enumerate(g.initializer):
            arr = numpy_helper.to_array(t).copy()
            attr = f"t{i}"
            self._names[t.name] = attr
            tensor = torch.from_numpy(arr)
            if arr.dtype == np.float32 and arr.ndim >= 1 and t.name not in stats:
                self.register_parameter(attr, torch.nn.Parameter(tensor))
            else:
                self.register_buffer(attr, tensor)
        for n in g.node:
            if n.op_type == "Identity":
                self._alias[n.output[0]] = self._resolve(n.input[0])
                continue
            attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
            self._nodes.append((n.op_type, [self._resolve(i) for i in n.input], n.output[0], attrs))
        self._input = g.input[0].name
        self._output = self._resolve(g.output[0].name)
        # each node's inputs that no later node reads: forward lets go of them once it has run (an activation held
        # to the end of the graph is memory a wide batch cannot spare; autograd keeps what backward needs itself)
        last = {}
        for k, (_, ins, _, _) in enumerate(self._nodes):
            for name in ins:
                last[name] = k
        self._done_with: list[list[str]] = [[] for _ in self._nodes]
        for name, k in last.items():
            self._done_with[k].append(name)
        last = self._nodes[-1]  # the graph's own last node: the output's Softmax or Sigmoid
        if last[0] not in HEADS or last[2] != self._output:
            raise ValueError(f"the graph does not end in one of {HEADS}")
        self._logits = last[1][0]

    def _resolve(self, name: str) -> str:
        while name in self._alias:
            name = self._alias[name]
        return name

    def _get(self, env: dict, name: str) -> torch.Tensor:
        if name in env:
            return env[name]
        return getattr(self, self._names[name])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        env = {self._input: x}
        for (op, ins, out, a), done in zip(self._nodes[:-1], self._done_with):
            v = [self._get(env, i) for i in ins if i]
            env[out] = _OPS[op](v, a)
            for name in done:
                env.pop(name, None)
        return env[self._logits]

    def weights(self) -> dict[str, np.ndarray]:
        """The trained tensors by their names in the graph."""
        return {name: getattr(self, attr).detach().cpu().numpy() for name, attr in self._names.items()}


def _conv(v, a):
    pads = a.get("pads", [0, 0, 0, 0])
    x = v[0]
    if a.get("auto_pad", b"NOTSET") in (b"SAME_UPPER", "SAME_UPPER"):  # stride 1: the padding at the end
        k = a["kernel_shape"]
        x, pads = F.pad(x, (0, k[1] - 1, 0, k[0] - 1)), [0, 0, 0, 0]
    if pads[0] != pads[2] or pads[1] != pads[3]:
        x = F.pad(x, (pads[1], pads[3], pads[0], pads[2]))
        pads = [0, 0, 0, 0]
    return F.conv2d(x, v[1], v[2] if len(v) > 2 else None, stride=a.get("strides", [1, 1]),
                    padding=(pads[0], pads[1]), dilation=a.get("dilations", [1, 1]), groups=a.get("group", 1))


def _bn(v, a):
    x, scale, bias, mean, var = v
    return F.batch_norm(x, mean, var, scale, bias, training=False, eps=a.get("epsilon", 1e-5))


def _pool(v, a):
    x = v[0]
    kh = x.shape[2]  # pools every remaining row, whatever the input height
    kw = a["kernel_shape"][1]
    return F.avg_pool2d(x, (kh, kw), (kh, a["strides"][1]))


def _max_pool(v, a):
    k, s = a["kernel_shape"], a.get("strides", [1, 1])
    x = v[0]
    if a.get("auto_pad", b"NOTSET") in (b"SAME_UPPER", "SAME_UPPER"):  # the padding at the end (stride 1 here)
        x = F.pad(x, (0, k[1] - 1, 0, k[0] - 1), value=float("-inf"))
    elif any(a.get("pads", [0])):
        p = a["pads"]
        x = F.pad(x, (p[1], p[3], p[0], p[2]), value=float("-inf"))
    return F.max_pool2d(x, k, s)


def _resize(v, a):
    if a.get("mode", b"nearest") not in (b"nearest", "nearest"):
        raise ValueError("only nearest-neighbour Resize is supported")
    scales = [float(f) for f in v[2].tolist()]
    return F.interpolate(v[0], scale_factor=(scales[2], scales[3]), mode="nearest")


def _conv_transpose(v, a):
    p = a.get("pads", [0, 0, 0, 0])
    if p[0] != p[2] or p[1] != p[3]:
        raise ValueError("asymmetric ConvTranspose padding is not supported")
    return F.conv_transpose2d(v[0], v[1], v[2] if len(v) > 2 else None, stride=a.get("strides", [1, 1]),
                              padding=(p[0], p[1]), dilation=a.get("dilations", [1, 1]), groups=a.get("group", 1))


def _slice(v, a):
    x = v[0]
    starts, ends = v[1].tolist(), v[2].tolist()
    axes = v[3].tolist() if len(v) > 3 else list(range(len(starts)))
    steps = v[4].tolist() if len(v) > 4 else [1] * len(starts)
    index = [slice(None)] * x.dim()
    for s, e, ax, st in zip(starts, ends, axes, steps):
        n = x.shape[ax]
        index[ax] = slice(max(-n, min(s, n)), max(-n - 1, min(e, n)), st)
    return x[tuple(index)]


def _reshape(v, a):
    shape = [int(d) for d in v[1].tolist()]
    shape = [v[0].shape[i] if d == 0 and not a.get("allowzero", 0) else d for i, d in enumerate(shape)]
    return v[0].reshape(shape)


_OPS = {
    "Conv": _conv,
    "BatchNormalization": _bn,
    "Add": lambda v, a: v[0] + v[1],
    "Mul": lambda v, a: v[0] * v[1],
    "Div": lambda v, a: v[0] / v[1],
    "Erf": lambda v, a: torch.erf(v[0]),
    "Relu": lambda v, a: torch.relu(v[0]),
    "HardSigmoid": lambda v, a: torch.clamp(v[0] * a.get("alpha", 0.2) + a.get("beta", 0.5), 0, 1),
    "ReduceMean": lambda v, a: v[0].mean(dim=tuple(a["axes"]), keepdim=bool(a.get("keepdims", 1))),
    "AveragePool": _pool,
    "Squeeze": lambda v, a: v[0].squeeze(a["axes"][0]),
    "Unsqueeze": lambda v, a: v[0].unsqueeze(a["axes"][0]),
    "Transpose": lambda v, a: v[0].permute(*a["perm"]),
    "MatMul": lambda v, a: v[0] @ v[1],
    # the small recognizer's (attention, LayerNorm), the detector's
    "Softmax": lambda v, a: torch.softmax(v[0], dim=a.get("axis", -1)),
    "Sigmoid": lambda v, a: torch.sigmoid(v[0]),
    "Sub": lambda v, a: v[0] - v[1],
    "Pow": lambda v, a: v[0] ** v[1],
    "Sqrt": lambda v, a: torch.sqrt(v[0]),
    "Shape": lambda v, a: torch.tensor(list(v[0].shape), dtype=torch.int64),
    "Slice": _slice,
    "Reshape": _reshape,
    "MaxPool": _max_pool,
    "Concat": lambda v, a: torch.cat(v, dim=a["axis"]),
    "GlobalAveragePool": lambda v, a: v[0].mean(dim=(2, 3), keepdim=True),
    "Resize": _resize,
    "ConvTranspose": _conv_transpose,
}


def export(module: GraphModule, template: onnx.ModelProto, path: Path) -> None:
    """Write the module's trained tensors into a copy of `template` (the adapted graph it was made from) at
    `path`, atomically."""
    m = onnx.ModelProto()
    m.CopyFrom(template)
    trained = module.weights()
    for t in m.graph.initializer:
        arr = trained[t.name]
        t.CopyFrom(numpy_helper.from_array(arr.astype(numpy_helper.to_array(t).dtype), t.name))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    onnx.save(m, str(tmp))
    tmp.replace(path)
