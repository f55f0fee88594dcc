"""Device-facing code: the host buffer pool (pool.py) and its device side (staging.py), device choice and NVML
lookups (device.py), the batch-size policy (adaptive.py), the NVML resource sampler (nvml.py)."""
