"""CUDA kernels of the native ops, in Triton (schemas: :mod:`pyg_agg.ops.native`)."""
from __future__ import annotations

import torch

_registered = False


def register_cuda_kernels() -> None:
    """Registers every Triton kernel as the CUDA implementation of its op.

    Raises:
        ImportError: Triton is not installed.
    """
    global _registered
    from pyg_agg.ops.gpu import dynamic_attention, segment_stats, stack_statistics  # imports triton

    # each launcher is named after its op
    ops = {segment_stats: ("segment_stats", "segment_stats_backward", "segment_stats_backward_gather"),
           stack_statistics: ("stack_statistics", "stack_statistics_backward"),
           dynamic_attention: ("dynamic_attention", "dynamic_attention_backward")}
    if not _registered:
        for kernels, names in ops.items():
            for name in names:
                torch.library.register_kernel(f"pyg_agg::{name}", "cuda", getattr(kernels, name))
        _registered = True
