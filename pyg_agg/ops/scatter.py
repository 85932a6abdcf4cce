"""Scatter reductions over an unsorted index: the hot path of every layer."""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from pyg_agg.ops.backend import resolve_backend
from pyg_agg.ops.checks import check_index, normalize_dim

REDUCTIONS = ("sum", "mean", "min", "max", "mul")


def broadcast_index(index: Tensor, src: Tensor, dim: int) -> Tensor:
    """Views a 1-D ``index`` so it broadcasts against ``src`` along ``dim``."""
    shape = [1] * src.dim()
    shape[dim] = -1
    return index.view(shape).expand_as(src)


def segment_counts(index: Tensor, dim_size: int) -> Tensor:
    """Number of entries per output slot (``[dim_size]``, int64)."""
    if torch.compiler.is_compiling():  # bincount's length depends on the data
        return index.new_zeros(dim_size, dtype=torch.long).index_add_(
            0, index, torch.ones_like(index, dtype=torch.long))
    return torch.bincount(index, minlength=dim_size)[:dim_size]


def fill_empty(out: Tensor, counts: Tensor, dim: int, fill_value: float) -> Tensor:
    """Sets the output slots with no incoming entry to ``fill_value``."""
    shape = [1] * out.dim()
    shape[dim] = -1
    empty = (counts == 0).view(shape)
    return out.masked_fill(empty, fill_value)


def scatter(
    src: Tensor,
    index: Tensor,
    dim: int = 0,
    dim_size: Optional[int] = None,
    reduce: str = "sum",
    fill_value: float = 0.0,
) -> Tensor:
    r"""Reduces the slices of ``src`` that share an index along ``dim``.

    .. math::
        \mathrm{out}_i = \bigoplus_{j:\,\mathrm{index}_j = i} \mathrm{src}_j

    Args:
        src: The values, any shape ``[..., E, ...]`` with ``E`` at ``dim``.
        index: ``[E]`` integer tensor of output slots, in any order.
        dim: The dimension of ``src`` to reduce along.
        dim_size: Number of output slots ``N``; ``index.max() + 1`` if None.
        reduce: ``"sum"``, ``"mean"``, ``"min"``, ``"max"`` or ``"mul"``.
        fill_value: The value of slots that receive no entry (never ±inf).

    Returns:
        ``src`` with ``dim`` resized to ``N``.

    Gradients of ``min``/``max`` with the ``"torch"`` backend are split evenly
    among tied entries; ``"torch_scatter"`` sends them all to one entry.
    """
    if reduce == "add":
        reduce = "sum"
    if reduce not in REDUCTIONS:
        raise ValueError(f"`reduce` must be one of {REDUCTIONS}, got {reduce!r}")
    if not isinstance(src, Tensor) or src.dim() == 0:
        raise ValueError("`src` must be a tensor with at least one dimension (the one "
                         "`index` runs along), got "
                         + (f"{type(src).__name__}" if not isinstance(src, Tensor) else "a 0-D tensor"))
    dim = normalize_dim(src, dim)
    n = check_index(index, src, dim, dim_size)
    return scatter_unchecked(src, index, dim, n, reduce, fill_value)


def scatter_unchecked(src: Tensor, index: Tensor, dim: int, dim_size: int, reduce: str,
                      fill_value: float = 0.0) -> Tensor:
    """:func:`scatter` for callers that already validated ``index`` against ``src``.

    Skips the min/max pass over the index (and its device sync), so composite
    kernels (softmax, several statistics, segments) validate once, not per
    reduction. ``dim`` must be non-negative and ``reduce`` one of
    :data:`REDUCTIONS`.
    """
    n = dim_size
    size = list(src.shape)
    size[dim] = n
    if reduce == "mul":  # one backend: scatter_reduce_'s product has a gradient
        out = src.new_ones(size).scatter_reduce_(dim, broadcast_index(index, src, dim), src, "prod")
        return out if fill_value == 1 else fill_empty(out, segment_counts(index, n), dim, fill_value)
    backend = resolve_backend(reduce, src.device.type)

    if backend == "torch_scatter":
        import torch_scatter

        out = torch_scatter.scatter(src, index.long(), dim, dim_size=n, reduce=reduce)
        if fill_value != 0:
            out = fill_empty(out, segment_counts(index, n), dim, fill_value)
        return out

    if reduce in ("sum", "mean"):
        out = src.new_zeros(size).index_add_(dim, index, src)
        if reduce == "mean" or fill_value != 0:
            counts = segment_counts(index, n)
        if reduce == "mean":
            shape = [1] * out.dim()
            shape[dim] = -1
            out = out / counts.clamp(min=1).view(shape).to(out.dtype)
        if fill_value != 0:
            out = fill_empty(out, counts, dim, fill_value)
        return out

    return ScatterExtreme.apply(src, index.long(), dim, n, reduce, fill_value)


class ScatterExtreme(torch.autograd.Function):
    """Scatter min/max with a correct gradient.

    ``scatter_reduce_(include_self=False)`` in torch <= 2.13 still compares
    the initial ``self`` values against the result in backward, so when a
    segment's extreme equals the fill value (e.g. a max over ReLU outputs of
    0) half the gradient is silently dropped. Here ties are counted among the
    segment's own entries only, and the gradient is split evenly among them.
    """

    @staticmethod
    def forward(ctx, src, index, dim, dim_size, reduce, fill_value):  # type: ignore[override]
        size = list(src.shape)
        size[dim] = dim_size
        index_b = broadcast_index(index, src, dim)
        out = src.new_full(size, fill_value).scatter_reduce_(
            dim, index_b, src, reduce="a" + reduce, include_self=False
        )
        ctx.dim = dim
        ctx.save_for_backward(src, index, out)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):  # type: ignore[override]
        src, index, out = ctx.saved_tensors
        index_b = broadcast_index(index, src, ctx.dim)
        is_extreme = (src == out.gather(ctx.dim, index_b)).to(src.dtype)
        ties = torch.zeros_like(out).scatter_add_(ctx.dim, index_b, is_extreme)
        share = is_extreme / ties.clamp(min=1).gather(ctx.dim, index_b)
        return grad_out.gather(ctx.dim, index_b) * share, None, None, None, None, None
