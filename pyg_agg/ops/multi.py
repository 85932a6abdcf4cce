"""Several statistics of the same messages in one pass."""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any, Optional, Union

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from pyg_agg.ops import native
from pyg_agg.ops.backend import resolve_backend
from pyg_agg.ops.checks import check_index, check_permutation, check_ptr
from pyg_agg.ops.graph import index_segments
from pyg_agg.ops.scatter import fill_empty, scatter_unchecked, segment_counts
from pyg_agg.ops.segment import ptr_to_index

STATISTICS = ("count", "sum", "mean", "sumsq", "var", "std", "min", "max")
# What stacked_statistics stacks; a statistic's position is its code in the native op.
STACKABLE = ("sum", "mean", "min", "max", "var", "std")
STD_MODES = ("pyg", "eps")
_MOMENT_STATS = ("sumsq", "var", "std")


def multi_aggregate(
    src: Tensor,
    index: Tensor,
    dim_size: Optional[int] = None,
    stats: Union[str, Iterable[str]] = ("sum", "mean", "std", "min", "max"),
    fill_value: float = 0.0,
    std_mode: str = "pyg",
    eps: float = 1e-5,
) -> dict[str, Tensor]:
    r"""Computes several per-segment statistics of ``src`` at once.

    Every statistic derives from five per-segment primitives computed in one
    pass (the ``"native"`` backend) or one pass each (the ``"torch"``
    reference): the count :math:`d_i`, the sum, the sum of squared deviations
    :math:`M_i = \sum_j (x_j - \mu_i)^2`, the min and the max.

    .. math::
        \mu_i = \tfrac{1}{d_i}\textstyle\sum_j x_j,\quad
        \sigma^2_i = M_i / d_i,\quad
        \textstyle\sum_j x_j^2 = M_i + d_i \mu_i^2

    :math:`M_i` is never :math:`\sum x^2 - d\mu^2`, which cancels
    catastrophically in float32 (the std of ``[3000, 3001, 3002]`` would come
    out 0; PyG's ``StdAggregation`` has that flaw): the native kernel shifts
    each row by its first value, the reference subtracts the mean in a second
    pass. The backward is one pass over the messages, keeping only the
    messages and the per-segment results (no ``x**2`` or mask tensors).
    The gradient of a tied min/max is split evenly among the ties, as in
    PyG's :class:`MinAggregation`/:class:`MaxAggregation`.

    ``std`` follows ``std_mode``:

    * ``"pyg"`` (PyG's :class:`StdAggregation`):
      :math:`\sqrt{\max(\sigma^2, \epsilon)}`, set to 0 where that is
      :math:`\le\sqrt{\epsilon}`, so constant neighbourhoods give 0 with a
      zero gradient.
    * ``"eps"`` (the PNA paper): :math:`\sqrt{\mathrm{relu}(\sigma^2) + \epsilon}`.

    Args:
        src: ``[E, *]`` floating-point messages.
        index: ``[E]`` target segment of each message, any order.
        dim_size: Number of segments ``N``.
        stats: Any of ``count, sum, mean, sumsq, var, std, min, max``, or one
            of them as a string.
        fill_value: Value of every statistic but ``count`` on empty segments.
        std_mode: ``"pyg"`` or ``"eps"`` (see above).
        eps: The :math:`\epsilon` of ``std``, ``>= 0``.

    Returns:
        A dict from statistic name to ``[N, *]`` (``count``: ``[N]``, int64).
    """
    names = _check_arguments(src, stats, std_mode, eps)
    n = check_index(index, src, 0, dim_size)
    counts, (total, m2, low, high), use_native = _index_primitives(src, index, n, names)
    out = derive_statistics(names, counts, total, m2, low, high, fill_value, std_mode, eps,
                            native_std=use_native)
    return {k: v if k == "count" else v.view(n, *src.shape[1:]) for k, v in out.items()}


def stacked_multi_aggregate(
    src: Tensor,
    index: Tensor,
    dim_size: Optional[int] = None,
    stats: Iterable[str] = ("mean", "min", "max", "std"),
    std_mode: str = "pyg",
    eps: float = 1e-5,
    scaler: Optional[Callable[[Tensor], Tensor]] = None,
) -> tuple[Tensor, Tensor]:
    r""":func:`multi_aggregate`'s statistics stacked in the order of ``stats``,
    as one ``[N, A, *]`` tensor: what :func:`stacked_statistics` is to CSR
    rows, for an unsorted ``index``. With the native backend the statistics
    are derived and stacked by one op each way (no per-statistic tensors, no
    stack copy). Empty segments give 0 in every slot.

    With a ``scaler`` (a function of the counts, e.g. PNA's degree scalers),
    the result is every statistic times every factor,

    .. math::
        \mathrm{out}_{i, s, a} = \mathrm{scaler}(d)_{i, s}\; a(\{x_j\})_i,

    ``[N, S, A, *]``. With the native backend the same op writes the scaled
    copies: no unscaled ``[N, A, *]`` intermediate and no product pass, and
    its backward sums the gradient over the factors as it reads it.

    Args:
        src, index, dim_size, std_mode, eps: As in :func:`multi_aggregate`.
        stats: Some of ``sum, mean, min, max, var, std``, in the order wanted
            (repeats allowed).
        scaler: Maps the counts (``[N]`` int64) to ``[N, S]`` floating-point
            factors (cast to ``src``'s dtype; they may require grad), or None.

    Returns:
        ``([N, A, *]`` or ``[N, S, A, *]``, counts ``[N]`` int64).
    """
    names = _check_stackable(src, stats, std_mode, eps)
    if scaler is not None and not callable(scaler):
        raise TypeError(f"`scaler` must be a function of the counts returning [N, S] factors, "
                        f"got {type(scaler).__name__}")
    n = check_index(index, src, 0, dim_size)
    counts, primitives, use_native = _index_primitives(src, index, n, names)
    scales = None if scaler is None else _check_scales(scaler(counts), n, src)
    stacked = _stack_primitives(names, counts, primitives, None, None, use_native, std_mode, eps,
                                scales)
    rows = (n,) if scales is None else (n, scales.size(1))
    return stacked.view(*rows, len(names), *src.shape[1:]), counts


def scale_stacked(stacked: Tensor, scales: Tensor) -> Tensor:
    """``[N, A, *]`` statistics times ``[N, S]`` factors: ``[N, S, A, *]``.

    As a batched matmul with ``k = 1``: the same products, and its backward
    sums the gradient over the factors in one pass, with no output-sized
    scaled copy of it.
    """
    n = stacked.size(0)
    out = torch.bmm(scales.unsqueeze(2), stacked.reshape(n, 1, -1))
    return out.view(n, scales.size(1), *stacked.shape[1:])


def _check_scales(scales: Any, n: int, src: Tensor) -> Tensor:
    if (not isinstance(scales, Tensor) or scales.dim() != 2 or scales.size(0) != n
            or not scales.is_floating_point()):
        got = (f"shape {tuple(scales.shape)}, dtype {scales.dtype}" if isinstance(scales, Tensor)
               else type(scales).__name__)
        raise ValueError(f"`scaler` must return floating-point factors of shape ({n}, S) (one "
                         f"row per segment), got {got}")
    return scales.to(src.dtype).contiguous()


def _stack_codes(names: tuple[str, ...]) -> list[int]:
    """The native op's codes of the statistics ``names``."""
    return [STACKABLE.index(name) for name in names]


def _index_primitives(src: Tensor, index: Tensor, n: int,
                      names: tuple[str, ...]) -> tuple[Tensor, tuple[Tensor, ...], bool]:
    """The counts and the primitives ``(sum, M, min, max)`` of ``src`` ``[E, *]``
    (flattened to ``[E, F]``) at a checked, unsorted ``index`` of ``n``
    segments, and whether the native backend ran."""
    # an explicit width: reshape(0, -1) is ambiguous when there are no messages
    flat = src.reshape(src.size(0), math.prod(src.shape[1:]))
    moments, extremes = _needs(names)
    use_native = _use_native(flat)
    if use_native:
        ptr, order = index_segments(index, n)
        total, m2, low, high, _, _ = native.segment_stats(
            flat.contiguous(), ptr, order, None, True, moments, extremes, native.needs_ties(flat))
        return ptr.diff(), (total, m2, low, high), True
    counts = segment_counts(index, n)
    return counts, ReferenceStatistics.apply(flat, index, counts, moments, extremes), False


def segment_statistics(
    src: Tensor,
    ptr: Tensor,
    col: Optional[Tensor] = None,
    edge_term: Optional[Tensor] = None,
    stats: Union[str, Iterable[str]] = ("sum", "mean", "std", "min", "max"),
    fill_value: float = 0.0,
    std_mode: str = "pyg",
    eps: float = 1e-5,
) -> dict[str, Tensor]:
    r""":func:`multi_aggregate` over CSR rows, optionally in gather form.

    Row ``i`` reduces the values :math:`x_e`, ``e`` in ``ptr[i]:ptr[i+1]``:

    .. math::
        x_e = \mathrm{src}[\mathrm{col}_e] + \mathrm{edge\_term}_e

    (``src[e]`` when ``col`` is None; no term when ``edge_term`` is None).
    The gather form never materialises the ``E x F`` messages with the native
    backend (its backward holds the per-edge gradients only where they are
    smaller than the rows' coefficients, see docs/ops.md): a message-passing
    layer whose message is
    ``W x_j + b_e`` passes ``src = W x`` (``N x F``), ``col`` the sources of
    the CSR-sorted edges and ``edge_term = b``.

    Args:
        src: ``[M, F]`` floating-point values.
        ptr: ``[N + 1]`` CSR offsets of the rows.
        col: ``[E]`` row of ``src`` read by each edge, or None (``E = M``).
        edge_term: ``[E, F]`` added to each edge's value, or None.
        stats, fill_value, std_mode, eps: As in :func:`multi_aggregate`.

    Returns:
        A dict from statistic name to ``[N, F]`` (``count``: ``[N]``, int64).
    """
    names = _check_arguments(src, stats, std_mode, eps)
    counts, (total, m2, low, high), use_native = _csr_primitives(src, ptr, col, edge_term, names)
    return derive_statistics(names, counts, total, m2, low, high, fill_value, std_mode, eps,
                             native_std=use_native)


def stacked_statistics(
    src: Tensor,
    ptr: Tensor,
    col: Optional[Tensor] = None,
    edge_term: Optional[Tensor] = None,
    stats: Iterable[str] = ("mean", "min", "max", "std"),
    shift: Optional[Tensor] = None,
    std_mode: str = "pyg",
    eps: float = 1e-5,
    row_order: Optional[Tensor] = None,
) -> tuple[Tensor, Tensor]:
    r"""The statistics of a multi-aggregation, stacked: :func:`segment_statistics`
    in the order of ``stats``, as one ``[N, A, F]`` tensor, of the values

    .. math::
        x_e = \mathrm{src}[\mathrm{col}_e] + \mathrm{edge\_term}_e
        + \mathrm{shift}_i \qquad (e \text{ in row } i).

    A per-row shift (e.g. the target's own term of a message ``W_i x_i + W_j
    x_j``) moves the mean, min and max by :math:`\mathrm{shift}_i`, the sum by
    :math:`d_i\,\mathrm{shift}_i`, and leaves var and std alone, so the rows
    are reduced without it and the shift costs ``N`` rows, not ``E``.

    With the native backend the statistics are derived, shifted and stacked
    in one pass (the ``stack_statistics`` op), and so is their backward,
    where the reference runs a chain of elementwise ops. Empty rows give 0
    in every slot.

    Args:
        src, ptr, col, edge_term, std_mode, eps: As in :func:`segment_statistics`.
        stats: Some of ``sum, mean, min, max, var, std``, in the order wanted
            (repeats allowed).
        shift: ``[N, F]`` added to every value of row ``i``, or None.
        row_order: ``[N]``, a permutation of the rows: output row ``k`` holds
            row ``row_order[k]`` (e.g. the rows grouped by degree, see
            :func:`pyg_agg.ops.degree_groups`), written in place by the
            epilogue instead of gathered after it, forward and backward.
            None: the rows in order. ``counts`` stays in row order.

    Returns:
        ``([N, A, F], counts [N] int64)``.
    """
    names = _check_stackable(src, stats, std_mode, eps)
    if shift is not None:
        rows = ptr.numel() - 1 if isinstance(ptr, Tensor) else None
        if not isinstance(shift, Tensor) or shift.shape != (rows, src.size(-1)):
            got = tuple(shift.shape) if isinstance(shift, Tensor) else type(shift).__name__
            raise ValueError(f"`shift` must have shape {(rows, src.size(-1))} (one row per "
                             f"CSR row), got {got}")
        shift = shift.to(src.dtype)
    counts, primitives, use_native = _csr_primitives(src, ptr, col, edge_term, names)
    if row_order is not None:
        row_order = check_permutation(row_order, counts.numel(), src, "row_order")
    return _stack_primitives(names, counts, primitives, shift, row_order, use_native, std_mode,
                             eps), counts


def _check_stackable(src: Tensor, stats: Iterable[str], std_mode: str,
                     eps: float) -> tuple[str, ...]:
    names = _check_arguments(src, stats, std_mode, eps)
    if isinstance(stats, str) or any(name not in STACKABLE for name in names):
        raise ValueError(f"`stats` must be a sequence of some of {STACKABLE}, got {stats!r}")
    return names


def _stack_primitives(names: tuple[str, ...], counts: Tensor, primitives: tuple[Tensor, ...],
                      shift: Optional[Tensor], row_order: Optional[Tensor], use_native: bool,
                      std_mode: str, eps: float, scales: Optional[Tensor] = None) -> Tensor:
    """The statistics ``names`` stacked ``[N, A, F]`` (``[N, S, A, F]`` times
    ``scales``) from checked primitives: the native epilogue where the native
    backend ran, else the reference."""
    total, m2, low, high = primitives
    if use_native and native.has_kernels(total.device.type):
        return native.stack_statistics(total, m2, low, high, counts, shift, _stack_codes(names), eps,
                                       std_mode == "pyg", row_order, scales)
    stacked = stack_statistics_reference(names, counts, total, m2, low, high, shift, std_mode, eps)
    if scales is not None:
        stacked = scale_stacked(stacked, scales)
    return stacked if row_order is None else stacked.index_select(0, row_order)


def stack_statistics_reference(names: tuple[str, ...], counts: Tensor, total: Tensor, m2: Tensor,
                               low: Tensor, high: Tensor, shift: Optional[Tensor],
                               std_mode: str, eps: float) -> Tensor:
    """The pure-torch epilogue of :func:`stacked_statistics`: the statistics
    ``names`` from the primitives, shifted and stacked ``[N, A, F]``."""
    stats = derive_statistics(tuple(dict.fromkeys(names)), counts, total, m2, low, high, 0.0,
                              std_mode, eps)
    if shift is not None:
        # empty rows keep their fill value (0)
        row_shift = shift.masked_fill((counts == 0).unsqueeze(-1), 0.0)
        for name in ("mean", "min", "max"):
            if name in stats:
                stats[name] = stats[name] + row_shift
        if "sum" in stats:
            stats["sum"] = stats["sum"] + row_shift * counts.unsqueeze(-1).to(shift.dtype)
    return torch.stack([stats[name] for name in names], dim=1)


def _csr_primitives(src: Tensor, ptr: Tensor, col: Optional[Tensor], edge_term: Optional[Tensor],
                    names: tuple[str, ...]) -> tuple[Tensor, tuple[Tensor, ...], bool]:
    """Checks the CSR inputs; returns the counts, the primitives ``(sum, M, min,
    max)`` that ``names`` need (others ``[0]``) and whether the native backend ran."""
    if src.dim() != 2:
        raise ValueError(f"`src` must be two-dimensional [M, F], got shape {tuple(src.shape)}")
    edges = src.size(0)
    if col is not None:
        edges = col.numel()
        check_index(col, col, 0, src.size(0), name="col")
    if edge_term is not None:
        if edge_term.shape != (edges, src.size(1)):
            raise ValueError(f"`edge_term` must have shape {(edges, src.size(1))} (one row per edge), "
                             f"got {tuple(edge_term.shape)}")
        edge_term = edge_term.to(src.dtype)
    check_ptr(ptr, src.new_empty(edges, 0), 0)
    ptr = ptr.long()
    counts = ptr.diff()
    moments, extremes = _needs(names)
    use_native = _use_native(src)
    if use_native:
        total, m2, low, high, _, _ = native.segment_stats(
            src.contiguous(), ptr, None if col is None else col.long().contiguous(),
            None if edge_term is None else edge_term.contiguous(), False, moments, extremes,
            native.needs_ties(src, edge_term))
    else:
        values = src if col is None else src.index_select(0, col)
        if edge_term is not None:
            values = values + edge_term
        index = ptr_to_index(ptr, edges)
        total, m2, low, high = ReferenceStatistics.apply(values, index, counts, moments, extremes)
    return counts, (total, m2, low, high), use_native


def _check_arguments(src: Tensor, stats: Union[str, Iterable[str]], std_mode: str,
                     eps: float) -> tuple[str, ...]:
    if not isinstance(src, Tensor):
        raise TypeError(f"`src` must be a torch.Tensor, got {type(src).__name__}")
    if src.dim() == 0:
        raise ValueError("`src` must have at least one dimension (one row per message), got a 0-D tensor")
    if not src.is_floating_point():
        raise TypeError(f"`src` must be a floating-point tensor, got dtype {src.dtype}")
    names = (stats,) if isinstance(stats, str) else tuple(stats)
    unknown = [s for s in names if s not in STATISTICS]
    if unknown or not names:
        raise ValueError(f"`stats` must name some of {STATISTICS}, got {stats!r}")
    if std_mode not in STD_MODES:
        raise ValueError(f"`std_mode` must be one of {STD_MODES}, got {std_mode!r}")
    if not (isinstance(eps, (int, float)) and 0 <= eps < math.inf):  # NaN fails too
        raise ValueError(f"`eps` must be a finite number >= 0, got {eps!r}")
    return names


def _needs(names: tuple[str, ...]) -> tuple[bool, bool]:
    """Whether the statistics need the moments (M) and the extremes."""
    return any(s in _MOMENT_STATS for s in names), any(s in ("min", "max") for s in names)


def _use_native(src: Tensor) -> bool:
    return resolve_backend("multi", src.device.type) == "native"


def derive_statistics(names: tuple[str, ...], counts: Tensor, total: Tensor, m2: Tensor,
                      low: Tensor, high: Tensor, fill_value: float, std_mode: str,
                      eps: float, native_std: bool = False) -> dict[str, Tensor]:
    """Every statistic of ``names`` from the primitives (count, sum, M, min, max).

    ``native_std``: the native backend's std, one pass over ``M`` (the
    ``stack_statistics`` op with the std alone) instead of the reference's
    chain of elementwise ops (same formulas).
    """
    denom = counts.clamp(min=1).to(total.dtype).unsqueeze(-1)
    out: dict[str, Tensor] = {}
    for name in names:
        if name == "count":
            value = counts
        elif name == "sum":
            value = total
        elif name == "mean":
            value = total / denom
        elif name == "sumsq":
            value = m2 + total * total / denom
        elif name == "min":
            value = low
        elif name == "max":
            value = high
        elif name == "std" and native_std and native.has_kernels(m2.device.type):
            none = m2.new_empty(0)  # the std reads M alone
            value = native.stack_statistics(none, m2.contiguous(), none, none, counts, None,
                                            [STACKABLE.index("std")], eps, std_mode == "pyg")[:, 0]
        else:
            var = m2 / denom
            if name == "var":
                value = var
            elif std_mode == "pyg":
                # sqrt_ may work in place: clamp's backward needs only var
                value = var.clamp(min=eps).sqrt_()
                value = value.masked_fill(value <= math.sqrt(eps), 0.0)
            else:
                value = (var.relu() + eps).sqrt_()
        # "pyg" std is already 0 on empty segments (var = 0 there); "eps" std is sqrt(eps)
        if name != "count" and (fill_value != 0 or (name == "std" and std_mode == "eps")):
            value = fill_empty(value, counts, 0, fill_value)
        out[name] = value
    return out


class ReferenceStatistics(torch.autograd.Function):
    r"""The pure-torch reference of the primitives ``(sum, M, min, max)`` of
    ``[E, F]`` messages at ``index``, with a lean backward.

    The forward makes one scatter pass per primitive (two for ``M``: the sum,
    then the squared deviations from the mean). Autograd through those passes
    would keep ``x - mean``, its square and, for min/max, masks of the
    messages; here only the messages are kept, since the gradient of every
    primitive is a per-segment coefficient gathered per edge:

    .. math::
        \frac{\partial L}{\partial x_e} = g^{sum}_i + 2 g^{M}_i (x_e - \mu_i)
        + \sum_{\text{ext} \in \{\min, \max\}}
        \frac{[x_e = \text{ext}_i]}{\#\text{ties}_i}\, g^{\text{ext}}_i,
        \qquad i = \text{index}_e.

    Ties of min/max share the gradient evenly, like the ``torch`` backend of
    :func:`~pyg_agg.ops.scatter`. Outputs not asked for are empty ``[0]``.
    """

    @staticmethod
    def forward(ctx: Any, src: Tensor, index: Tensor, counts: Tensor, moments: bool,
                extremes: bool) -> tuple[Tensor, ...]:
        n = counts.numel()
        total = src.new_zeros(n, src.size(1)).index_add_(0, index, src)
        none = src.new_empty(0)
        m2 = low = high = none
        mean = total / counts.clamp(min=1).to(src.dtype).unsqueeze(-1)
        if moments:
            deviation = src - mean.index_select(0, index)
            m2 = src.new_zeros(n, src.size(1)).index_add_(0, index, deviation * deviation)
        if extremes:
            low = scatter_unchecked(src, index, 0, n, "min")
            high = scatter_unchecked(src, index, 0, n, "max")
        ctx.save_for_backward(src, index, counts, mean, low, high)
        return total, m2, low, high

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_sum: Optional[Tensor], grad_m2: Optional[Tensor],
                 grad_low: Optional[Tensor], grad_high: Optional[Tensor]) -> tuple[Optional[Tensor], ...]:
        src, index, counts, mean, low, high = ctx.saved_tensors
        per_segment = src.new_zeros(mean.shape)  # the coefficient of 1
        per_message = None  # the coefficient of x_e
        if grad_sum is not None:
            per_segment += grad_sum
        if grad_m2 is not None and grad_m2.numel() > 0:
            per_message = 2 * grad_m2
            per_segment -= per_message * mean
        grad = per_segment.index_select(0, index)
        if per_message is not None:
            grad.addcmul_(per_message.index_select(0, index), src)
        for extreme, grad_extreme in ((low, grad_low), (high, grad_high)):
            if grad_extreme is None or grad_extreme.numel() == 0:
                continue
            hit = src == extreme.index_select(0, index)
            # Each non-empty (segment, channel) has at least one hit; more hits mean
            # ties, and only then is the per-slot tie count worth a scatter pass
            # (a compiled graph cannot branch on data, so it always counts).
            ties = (torch.compiler.is_compiling()
                    or int(torch.count_nonzero(hit)) > int(torch.count_nonzero(counts)) * src.size(1))
            hit = hit.to(src.dtype)
            if ties:
                grad_extreme = grad_extreme / scatter_unchecked(hit, index, 0, counts.numel(),
                                                                "sum").clamp(min=1)
            grad += grad_extreme.index_select(0, index).mul_(hit)
        return grad, None, None, None, None
