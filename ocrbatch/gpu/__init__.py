"""Device-facing code: the host buffer pool (pool.py) and its device side (staging.py), device choice and NVML
lookups (device.py), the throughput controller and slot figures (throughput.py, pure policy), the NVML resource
sampler (nvml.py). Nothing here imports pipeline/ (the continuous-decoding driver is pipeline/streaming.py)."""
