"""Keep the C heap from growing with the page count.

Each page travels as a few buffers of several MB (the rendered bitmap, its RGB copy, the engine's inputs),
made and freed by different threads. glibc's malloc raises its mmap threshold each time such a buffer is
freed, after which they come from the heaps of the threads' arenas, which fragment and rarely shrink: peak
RSS then creeps up with every page. A fixed threshold keeps every large buffer in its own mapping, handed
back to the OS when freed, so memory stays flat however many pages a run has. (The embedded engine's
onnxruntime sessions keep their activations in their own arenas instead, sized by the largest page rather
than the page count, so they do not pay a fresh mapping's page faults on every call: engines/ppocr.py.)
"""

from __future__ import annotations

import ctypes
import os

_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number
LARGE_BUFFER = 1024 * 1024


def return_large_buffers_to_os(threshold: int = LARGE_BUFFER) -> bool:
    """Fix glibc's mmap threshold at `threshold` bytes (unless MALLOC_MMAP_THRESHOLD_ says otherwise);
    False where there is no glibc (macOS, musl, Windows), which is harmless."""
    if "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(_M_MMAP_THRESHOLD, threshold))
