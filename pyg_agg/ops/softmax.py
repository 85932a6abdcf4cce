"""Numerically stable softmax within each index group."""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from pyg_agg.ops.checks import check_index, normalize_dim
from pyg_agg.ops.scatter import scatter_unchecked


def scatter_softmax(
    src: Tensor,
    index: Tensor,
    dim_size: Optional[int] = None,
    dim: int = 0,
) -> Tensor:
    r"""Softmax of ``src`` over the entries that share an index.

    .. math::
        \mathrm{out}_j = \frac{\exp(s_j - m_{i})}{\sum_{k:\,\mathrm{index}_k=i}
        \exp(s_k - m_{i})},\quad i = \mathrm{index}_j,\;
        m_i = \max_{k:\,\mathrm{index}_k = i} s_k

    Subtracting the per-group maximum keeps ``exp`` finite for any finite
    input, and the denominator is then >= 1. A group whose scores are all
    ``-inf`` (every entry masked out) gets zeros, with zero gradients, rather
    than the NaN of ``0 / 0``.

    Args:
        src: ``[E, *]`` scores (``E`` at ``dim``).
        index: ``[E]`` group of each score.
        dim_size: Number of groups (``index.max() + 1`` if None).
        dim: The dimension holding ``E``.

    Returns:
        Same shape as ``src``.
    """
    dim = normalize_dim(src, dim)
    n = check_index(index, src, dim, dim_size)
    finfo = torch.finfo(src.dtype)
    # an all -inf group has max -inf; a finite shift makes its exp 0, not NaN
    group_max = scatter_unchecked(src.detach(), index, dim, n, "max").clamp(min=finfo.min)
    shifted = (src - group_max.index_select(dim, index)).exp()
    denom = scatter_unchecked(shifted, index, dim, n, "sum").clamp(min=finfo.tiny)
    return shifted / denom.index_select(dim, index)
