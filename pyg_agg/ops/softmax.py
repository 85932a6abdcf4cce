"""Numerically stable softmax within each index group."""
from __future__ import annotations

from typing import Optional

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

    Subtracting the per-group maximum keeps ``exp`` finite for any input;
    every group has at least one entry, so the denominator is >= 1.

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
    group_max = scatter_unchecked(src.detach(), index, dim, n, "max")
    shifted = (src - group_max.index_select(dim, index)).exp()
    denom = scatter_unchecked(shifted, index, dim, n, "sum")
    return shifted / denom.index_select(dim, index)
