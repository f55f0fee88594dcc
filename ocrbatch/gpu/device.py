"""Which devices the infer workers run on. `--devices` takes `auto`, `cpu`, GPU indexes (`0,1`) or
torch device names (`cuda:1`); a device may be named twice (`cpu,cpu`: two workers)."""

from __future__ import annotations

from ..errors import EngineLoadError, UsageError


def cuda_device_count() -> int:
    try:
        import torch
    except ImportError:
        return 0
    try:
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - a broken driver means no GPU, not a crash
        return 0


def resolve_devices(spec: str, wants_gpu: bool) -> tuple[str, ...]:
    """The device of each infer worker. `auto`: every visible GPU for a GPU engine, else one CPU."""
    spec = (spec or "auto").strip().lower()
    if spec == "auto":
        n = cuda_device_count() if wants_gpu else 0
        return tuple(f"cuda:{i}" for i in range(n)) or ("cpu",)
    devices = []
    for part in (p.strip() for p in spec.split(",")):
        if part == "cpu":
            devices.append("cpu")
        elif part.isdigit():
            devices.append(f"cuda:{part}")
        elif part.startswith("cuda:") and part[5:].isdigit():
            devices.append(part)
        elif part == "cuda":
            devices.append("cuda:0")
        else:
            raise UsageError(f"--devices: cannot read {part!r} (use auto, cpu, 0,1 or cuda:0)")
    gpus = [d for d in devices if d.startswith("cuda:")]
    if gpus:
        n = cuda_device_count()
        missing = [d for d in gpus if int(d[5:]) >= n]
        if missing:
            raise EngineLoadError(f"--devices {spec}: {', '.join(missing)} not available "
                                  f"({n} CUDA device{'s' if n != 1 else ''} visible)")
    return tuple(devices)
