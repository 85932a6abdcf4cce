"""Peak memory of one call, on CPU or CUDA (used by the demo and ``benchmarks/``).

Peak memory on CPU is the rise of the process's resident-set high-water mark
(``VmHWM``) over its resident size before the call; the mark is reset between
measurements through ``/proc/self/clear_refs`` (Linux). glibc's mmap threshold
is pinned (:func:`pin_malloc_threshold`) so freed tensors really leave the
resident set instead of being kept in the heap and reused unseen; pin it early,
before the heap fills with freed memory. On CUDA the torch allocator's peak
statistics are used instead.
"""
from __future__ import annotations

import ctypes
import gc
import re
from collections.abc import Callable

import torch

#: Allocations of at least this many bytes are mapped (and unmapped when freed).
MMAP_THRESHOLD = 65536
#: glibc's ``mallopt`` parameter number of the mmap threshold.
M_MMAP_THRESHOLD = -3


def pin_malloc_threshold() -> None:
    """Fixes glibc's mmap threshold in this process, as ``MALLOC_MMAP_THRESHOLD_`` would
    at start-up (allocations above it are mapped, and unmapped when freed; the
    threshold no longer grows). Does nothing where the C library is not glibc."""
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is not None:
        mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        return int(re.search(field + r":\s+(\d+)", f.read()).group(1))


def peak_memory_mib(fn: Callable[[], object], device: torch.device) -> float:
    """Peak extra memory (MiB) used while running ``fn`` once."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated(device) - base) / 2**20
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current VmRSS
    base = _status_kib("VmRSS")
    fn()
    return (_status_kib("VmHWM") - base) / 1024
