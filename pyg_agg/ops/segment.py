"""Segment reductions over CSR (sorted, contiguous) input."""
from __future__ import annotations

import torch
from torch import Tensor

from pyg_agg.ops.backend import resolve_backend
from pyg_agg.ops.checks import check_ptr
from pyg_agg.ops.scatter import REDUCTIONS, fill_empty, scatter_unchecked


def ptr_to_index(ptr: Tensor, num_entries: int | None = None) -> Tensor:
    """Expands CSR offsets ``[S + 1]`` into a per-entry segment id ``[E]``."""
    counts = ptr[1:] - ptr[:-1]
    return torch.repeat_interleave(
        torch.arange(counts.numel(), device=ptr.device), counts,
        output_size=num_entries,
    )


def index_to_ptr(index: Tensor, size: int) -> Tensor:
    """CSR offsets ``[size + 1]`` of a *sorted* index."""
    ptr = index.new_zeros(size + 1, dtype=torch.long)
    torch.cumsum(torch.bincount(index, minlength=size)[:size], 0, out=ptr[1:])
    return ptr


def segment(
    src: Tensor,
    ptr: Tensor,
    reduce: str = "sum",
    fill_value: float = 0.0,
) -> Tensor:
    r"""Reduces contiguous row segments of ``src``: segment ``s`` covers rows
    ``ptr[s]:ptr[s+1]``.

    Args:
        src: ``[E, *]`` values sorted by segment.
        ptr: ``[S + 1]`` non-decreasing offsets with ``ptr[0] = 0`` and
            ``ptr[-1] = E``.
        reduce: ``"sum"``, ``"mean"``, ``"min"`` or ``"max"``.
        fill_value: The value of empty segments.

    Returns:
        ``[S, *]``.
    """
    if reduce == "add":
        reduce = "sum"
    if reduce not in REDUCTIONS:
        raise ValueError(f"`reduce` must be one of {REDUCTIONS}, got {reduce!r}")
    num_segments = check_ptr(ptr, src, 0)
    if resolve_backend("segment_" + reduce, src.device.type) == "torch_scatter":
        import torch_scatter

        out = torch_scatter.segment_csr(src, ptr.long(), reduce=reduce)
        if fill_value != 0:
            out = fill_empty(out, ptr[1:] - ptr[:-1], 0, fill_value)
        return out
    # torch.segment_reduce returns NaN for empty mean segments and NaN
    # gradients around them, so the native path goes through scatter.
    index = ptr_to_index(ptr, src.size(0))
    # the index comes from a validated ptr, so it needs no second check
    return scatter_unchecked(src, index, 0, num_segments, reduce, fill_value)
