"""Several statistics of the same messages in as few passes as possible."""
from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Optional

import torch
from torch import Tensor

from pyg_agg.ops.checks import check_index
from pyg_agg.ops.scatter import fill_empty, scatter_unchecked, segment_counts

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
    concat: Optional[bool] = None,
) -> dict[str, Tensor]:
    r"""Computes several per-segment statistics of ``src`` at once.

    Counts come from one ``bincount`` over the index, shared by every
    statistic; mean, var and std are derived from the sum and the sum of
    squares rather than reduced again, so at most four reductions touch the
    ``E x F`` messages (sum, sum of squares, min, max). With ``concat=True``
    they become two: one ``index_add_`` over ``[x, x**2]`` and one ``amax``
    over ``[x, -x]``. That halves kernel launches (the default on CUDA) but
    materialises ``E x 2F`` copies, which on CPU cost more time and memory
    than they save (``benchmarks/bench_ops.py``), so CPU defaults to
    separate passes.

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
        concat: Reduce concatenated ``[x, x**2]`` / ``[x, -x]`` in one pass
            each; ``None`` picks ``True`` on CUDA, ``False`` elsewhere.

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

    if concat is None:
        concat = src.is_cuda
    concat = concat and src.dim() > 1  # 1-D input has no feature axis to widen
    width = feat[-1] if feat else 1

    need_sq = any(s in wanted for s in ("sumsq", "var", "std"))
    need_sum = need_sq or any(s in wanted for s in ("sum", "mean"))
    if need_sum:
        if need_sq and concat:
            total, total_sq = _index_add(torch.cat([src, src * src], -1), index, n).split(width, -1)
        else:
            total = _index_add(src, index, n)
            total_sq = _index_add(src * src, index, n) if need_sq else None
        denom = counts.clamp(min=1).to(src.dtype).view((n,) + (1,) * len(feat))
        mean = total / denom
        if "sum" in wanted:
            out["sum"] = total
        if "mean" in wanted:
            out["mean"] = mean
        if total_sq is not None:
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

    if "min" in wanted and "max" in wanted and concat:
        hi, neg_lo = scatter_unchecked(torch.cat([src, -src], -1), index, 0, n, "max").split(width, -1)
        out["max"], out["min"] = hi, -neg_lo
    else:
        for reduce in ("min", "max"):
            if reduce in wanted:
                out[reduce] = scatter_unchecked(src, index, 0, n, reduce)

    for name in out:
        if name != "count" and (fill_value != 0 or name == "std"):
            out[name] = fill_empty(out[name], counts, 0, fill_value)
    return out


def _index_add(src: Tensor, index: Tensor, n: int) -> Tensor:
    return src.new_zeros((n,) + src.shape[1:]).index_add_(0, index, src)
