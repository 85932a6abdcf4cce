"""Several statistics of the same messages in as few passes as possible."""
from __future__ import annotations

import math
from typing import Iterable, Optional

import torch
from torch import Tensor

from pyg_agg.ops.checks import check_index
from pyg_agg.ops.scatter import fill_empty, scatter, segment_counts

STATISTICS = ("count", "sum", "mean", "sumsq", "var", "std", "min", "max")
STD_MODES = ("pyg", "eps")


def multi_aggregate(
    src: Tensor,
    index: Tensor,
    dim_size: Optional[int] = None,
    stats: Iterable[str] = ("sum", "mean", "std", "min", "max"),
    fill_value: float = 0.0,
    std_mode: str = "pyg",
    eps: float = 1e-5,
) -> dict[str, Tensor]:
    r"""Computes several per-segment statistics of ``src`` at once.

    Passes over the ``E x F`` messages: one ``index_add_`` over
    ``[x, x**2]`` yields sum and sum of squares together (and so mean, var,
    std); one ``amax`` over ``[x, -x]`` yields max and min together. Counts
    come from ``bincount`` over the index alone.

    .. math::
        \mu_i = \tfrac{1}{d_i}\textstyle\sum_j x_j,\quad
        \sigma^2_i = \tfrac{1}{d_i}\textstyle\sum_j x_j^2 - \mu_i^2

    ``std`` follows ``std_mode``:

    * ``"pyg"`` (PyG's :class:`StdAggregation`):
      :math:`\sqrt{\max(\sigma^2, \epsilon)}`, set to 0 where that is
      :math:`\le\sqrt{\epsilon}`, so constant neighbourhoods give 0 with a
      zero gradient.
    * ``"eps"`` (the PNA paper): :math:`\sqrt{\mathrm{relu}(\sigma^2) + \epsilon}`.

    Args:
        src: ``[E, F]`` (or ``[E, *]``) messages.
        index: ``[E]`` target segment of each message, any order.
        dim_size: Number of segments ``N``.
        stats: Any of ``count, sum, mean, sumsq, var, std, min, max``.
        fill_value: Value of every statistic but ``count`` on empty segments.
        std_mode: ``"pyg"`` or ``"eps"`` (see above).
        eps: The :math:`\epsilon` of ``std``.

    Returns:
        A dict from statistic name to ``[N, *]`` (``count``: ``[N]``, int64).
    """
    wanted = tuple(stats)
    unknown = [s for s in wanted if s not in STATISTICS]
    if unknown:
        raise ValueError(f"Unknown statistics {unknown}: expected some of {STATISTICS}")
    if std_mode not in STD_MODES:
        raise ValueError(f"`std_mode` must be one of {STD_MODES}, got {std_mode!r}")
    n = check_index(index, src, 0, dim_size)
    counts = segment_counts(index, n)
    feat = src.shape[1:]
    out: dict[str, Tensor] = {}
    if "count" in wanted:
        out["count"] = counts

    need_sq = any(s in wanted for s in ("sumsq", "var", "std"))
    need_sum = need_sq or any(s in wanted for s in ("sum", "mean"))
    if need_sum:
        moments = torch.cat([src, src * src], dim=-1) if need_sq else src
        total = src.new_zeros((n,) + moments.shape[1:]).index_add_(0, index, moments)
        if need_sq:
            total, total_sq = total.split(feat[-1], dim=-1)
        denom = counts.clamp(min=1).to(src.dtype).view((n,) + (1,) * len(feat))
        mean = total / denom
        if "sum" in wanted:
            out["sum"] = total
        if "mean" in wanted:
            out["mean"] = mean
        if need_sq:
            if "sumsq" in wanted:
                out["sumsq"] = total_sq
            var = total_sq / denom - mean * mean
            if "var" in wanted:
                out["var"] = var
            if "std" in wanted:
                if std_mode == "pyg":
                    std = var.clamp(min=eps).sqrt()
                    std = std.masked_fill(std <= math.sqrt(eps), 0.0)
                else:
                    std = (var.relu() + eps).sqrt()
                out["std"] = std

    if "min" in wanted or "max" in wanted:
        both = torch.cat([src, -src], dim=-1) if "min" in wanted else src
        extreme = scatter(both, index, 0, n, reduce="max")
        if "min" in wanted:
            hi, neg_lo = extreme.split(feat[-1], dim=-1)
            out["min"] = -neg_lo
        else:
            hi = extreme
        if "max" in wanted:
            out["max"] = hi

    for name in out:
        if name != "count" and (fill_value != 0 or name == "std"):
            out[name] = fill_empty(out[name], counts, 0, fill_value)
    return out
