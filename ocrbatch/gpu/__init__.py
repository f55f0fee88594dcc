"""Device-facing code: the NVML resource sampler (and, later, the buffer pool and device choice)."""
