"""Which devices the infer workers run on. `--devices` takes `auto`, `cpu`, GPU indexes (`0,1`) or
torch device names (`cuda:1`); a device may be named twice (`cpu,cpu`: two workers)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ..errors import EngineLoadError, UsageError

if TYPE_CHECKING:
    from .nvml import GpuReading, ResourceSample


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


def cuda_uuid(device: str) -> str:
    """The UUID of a torch CUDA device ("" when unknown), to find its NVML reading."""
    try:
        import torch

        return str(torch.cuda.get_device_properties(device).uuid)
    except Exception:  # noqa: BLE001 - no UUID: fall back to the position
        return ""


def reading_for(device: str, sample: ResourceSample | None, uuid: str = "") -> GpuReading | None:
    """The NVML reading of `device` ("cuda:1"): matched by UUID, else by position among the visible GPUs
    (the sampler lists them in CUDA_VISIBLE_DEVICES order)."""
    if sample is None or not device.startswith("cuda:"):
        return None
    if uuid:
        want = uuid.lower().removeprefix("gpu-")
        for gpu in sample.gpus:
            if gpu.uuid and gpu.uuid.lower().removeprefix("gpu-") == want:
                return gpu
    index = int(device[5:])
    return sample.gpus[index] if index < len(sample.gpus) else None


def load_reader(device: str, latest: Callable[[], ResourceSample | None]
                ) -> Callable[[], tuple[float | None, float | None]] | None:
    """(utilization %, memory used fraction) of `device`, read from a sampler's `latest`: what the batch-size
    controller grows on. None off GPU (the cap then never grows back)."""
    if not device.startswith("cuda:"):
        return None
    uuid: list[str] = []

    def load() -> tuple[float | None, float | None]:
        if not uuid:  # asked on the worker's thread, after its engine loaded torch
            uuid.append(cuda_uuid(device))
        gpu = reading_for(device, latest(), uuid[0])
        if gpu is None:
            return None, None
        return gpu.util_pct, (gpu.mem_used / gpu.mem_total if gpu.mem_total else None)
    return load


class MemoryProbe:
    """Device memory around a batch, for the throughput controller: what the batch took beyond what was
    allocated before it (torch's peak), and what is free now: the driver's free memory
    (`torch.cuda.mem_get_info`, which other processes' use lowers) plus what PyTorch's cache holds unused (NVML's
    "used" counts that cache as taken). On a CPU both are None."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.cuda = device.startswith("cuda")
        self._base = 0

    def begin(self, keep_base: bool = False) -> None:
        """Start measuring; `keep_base`: against the same baseline as before (continuous decoding measures
        windows of steps against the memory taken before any page ran)."""
        if self.cuda:
            import torch

            torch.cuda.reset_peak_memory_stats(self.device)
            if not keep_base:
                self._base = torch.cuda.memory_allocated(self.device)

    def end(self) -> tuple[float | None, float | None]:
        """(bytes the batch took at its peak, free bytes now)."""
        if not self.cuda:
            return None, None
        import torch

        used = torch.cuda.max_memory_allocated(self.device) - self._base
        free, _total = torch.cuda.mem_get_info(self.device)
        reserved_idle = torch.cuda.memory_reserved(self.device) - torch.cuda.memory_allocated(self.device)
        return float(max(0, used)), float(free + reserved_idle)  # PyTorch's idle cache is free to it


def cuda_caps(torch: object, device: str) -> tuple[bool, tuple[int, int]]:
    """(native bf16, compute capability) of a CUDA device: bf16 without emulation (T4 and V100 emulate it
    slowly, and `is_bf16_supported()` counts that), and the capability flash-attn 2 needs (8.0)."""
    cuda = torch.cuda  # type: ignore[attr-defined]
    try:
        bf16 = bool(cuda.is_bf16_supported(including_emulation=False))
    except TypeError:  # an older torch without the argument
        bf16 = bool(cuda.is_bf16_supported())
    return bf16 and cuda.get_device_capability(device)[0] >= 8, tuple(cuda.get_device_capability(device))
