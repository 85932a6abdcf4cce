"""CUDA kernels of the native ops, in Triton (schemas: :mod:`pyg_agg.ops.native`)."""
from __future__ import annotations

import torch

_OPS = ("segment_stats", "segment_stats_backward", "segment_stats_backward_gather")
_registered = False


def register_cuda_kernels() -> None:
    """Registers every Triton kernel as the CUDA implementation of its op.

    Raises:
        ImportError: Triton is not installed.
    """
    global _registered
    from pyg_agg.ops.gpu import segment_stats as kernels  # imports triton

    if not _registered:
        for name in _OPS:
            torch.library.register_kernel(f"pyg_agg::{name}", "cuda", getattr(kernels, name))
        _registered = True
