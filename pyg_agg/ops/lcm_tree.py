r"""Balanced-tree reduction of segments with a binary operator (the tree of
:class:`~pyg_agg.nn.LCMAggregation`).

Every segment is reduced on its own by a balanced binary tree whose levels
pair neighbouring elements; all pairs of all segments in a level go through
the operator in one call. :func:`tree_level` is one level's pairing (pure
index arithmetic), :func:`balanced_tree_reduce` the whole reduction.

Only the pure-torch reference exists, so the op has no entry in the backend
tables: its time is the operator's arithmetic (a GRU per pair for the LCM
layer), and the index arithmetic of all levels is 2.3% of an LCMAggregation
forward + backward on the ``bench_lcm.py`` molecule batch (0.9% on a 20k-node
power-law graph), too little for a native kernel to pay off.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Optional

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from pyg_agg.ops.checks import check_index, check_ptr
from pyg_agg.ops.graph import index_segments

BinaryOperator = Callable[[Tensor, Tensor], Tensor]


class SegmentLayout(NamedTuple):
    """Where the elements of each segment live in a working tensor ``h``.

    Segment ``ids[s]`` holds the rows ``h[order[starts[s] + p]]`` for
    ``p < counts[s]``, in that order; ``h`` itself is never reordered.

    Attributes:
        ids: ``[S]`` the segments' numbers in the output.
        order: ``[M]`` rows of ``h``, segment after segment.
        starts: ``[S]`` each segment's first position in ``order``.
        counts: ``[S]`` each segment's number of elements.
    """

    ids: Tensor
    order: Tensor
    starts: Tensor
    counts: Tensor


class TreeLevel(NamedTuple):
    """One level of the tree, as returned by :func:`tree_level`.

    Attributes:
        left: ``[P]`` rows of ``h``: the first operand of each pair.
        right: ``[P]`` rows of ``h``: the second operand of each pair.
        carried: ``[C]`` rows of ``h`` that move up unchanged (the last
            element of each odd segment).
        finished_ids: the ids of the segments this level reduces to one value.
        finished_pairs: for each of them, its pair (a row of the results).
        next: the continuing segments over ``h' = [pair results; h[carried]]``.
    """

    left: Tensor
    right: Tensor
    carried: Tensor
    finished_ids: Tensor
    finished_pairs: Tensor
    next: SegmentLayout


def tree_level(layout: SegmentLayout) -> TreeLevel:
    r"""Pairs the elements of every segment for one level of a balanced tree.

    A segment :math:`(e_0, \dots, e_{d-1})` with :math:`d \ge 2` forms the
    pairs :math:`(e_{2k}, e_{2k+1})` for :math:`k < \lfloor d/2 \rfloor`, and
    at the next level becomes

    .. math::
        (e_0 \oplus e_1,\; e_2 \oplus e_3,\; \dots,\;
        e_{2\lfloor d/2 \rfloor - 2} \oplus e_{2\lfloor d/2 \rfloor - 1}
        \;[,\; e_{d-1} \text{ if } d \text{ is odd}]),

    :math:`\lceil d/2 \rceil` elements; it is finished when :math:`d = 2`.
    The pair results are numbered segment after segment (pair :math:`k` of
    the :math:`s`-th segment is row :math:`\sum_{t<s} \lfloor d_t/2 \rfloor
    + k`), and the carried elements follow them, in segment order.

    Args:
        layout: the segments, each with at least two elements.

    Returns:
        The pairs, carried rows, finished segments and the next layout.
    """
    ids, order, starts, counts = layout
    for name, tensor in zip(SegmentLayout._fields, layout, strict=True):
        if not isinstance(tensor, Tensor) or tensor.dim() != 1 or tensor.dtype != torch.long:
            got = (f"{tensor.dtype} of shape {tuple(tensor.shape)}" if isinstance(tensor, Tensor)
                   else type(tensor).__name__)
            raise TypeError(f"`layout.{name}` must be a one-dimensional torch.long tensor, "
                            f"got {got}")
        if tensor.device != order.device:
            raise RuntimeError(f"`layout.{name}` is on {tensor.device} but `layout.order` is on "
                               f"{order.device}")
    if not ids.numel() == starts.numel() == counts.numel():
        raise ValueError(f"`layout.ids`, `layout.starts` and `layout.counts` must have one entry "
                         f"per segment, got {ids.numel()}, {starts.numel()} and {counts.numel()}")
    if counts.numel() > 0:
        if int(counts.min()) < 2:
            raise ValueError(f"`layout.counts` must be at least 2 (a segment of one element is "
                             f"already reduced), got {int(counts.min())}")
        if int(starts.min()) < 0 or int((starts + counts).max()) > order.numel():
            raise ValueError(f"`layout.starts` + `layout.counts` must stay within the "
                             f"{order.numel()} entries of `layout.order`")
    return tree_level_unchecked(layout)


def tree_level_unchecked(layout: SegmentLayout) -> TreeLevel:
    """:func:`tree_level` for callers that built ``layout`` themselves."""
    ids, order, starts, counts = layout
    num_pairs = counts // 2
    odd = counts % 2 == 1
    pair_offset = num_pairs.cumsum(0) - num_pairs
    total_pairs = int(num_pairs.sum())
    pair_segment = torch.repeat_interleave(num_pairs, output_size=total_pairs)
    pair_ids = torch.arange(total_pairs, device=order.device)
    rank = pair_ids - pair_offset[pair_segment]  # k of pair (2k, 2k+1)
    first = starts[pair_segment] + 2 * rank
    carried = order[(starts + counts - 1)[odd]]

    finished = counts == 2
    keep = ~finished  # an odd segment has >= 3 elements, so it continues
    next_counts = torch.where(keep, num_pairs + odd.long(), 0)
    next_starts = next_counts.cumsum(0) - next_counts
    next_order = order.new_empty(int(next_counts.sum()))
    kept_pairs = keep[pair_segment]
    next_order[(next_starts[pair_segment] + rank)[kept_pairs]] = pair_ids[kept_pairs]
    next_order[(next_starts + num_pairs)[odd]] = total_pairs + torch.arange(
        carried.numel(), device=order.device)

    return TreeLevel(
        left=order[first], right=order[first + 1], carried=carried,
        finished_ids=ids[finished], finished_pairs=pair_offset[finished],
        next=SegmentLayout(ids[keep], next_order, next_starts[keep], next_counts[keep]),
    )


def balanced_tree_reduce(
    x: Tensor,
    combine: BinaryOperator,
    index: Optional[Tensor] = None,
    ptr: Optional[Tensor] = None,
    dim_size: Optional[int] = None,
    empty_value: Optional[Tensor] = None,
    chunk_size: Optional[int] = None,
    parameters: Sequence[Tensor] = (),
    leaf: Optional[Callable[[Tensor], Tensor]] = None,
) -> Tensor:
    r"""Reduces the rows of each segment with a balanced binary tree of
    ``combine`` (:math:`\oplus`) over the leaves :math:`e_k = \phi(x_k)`:

    .. math::
        T(e_0) = e_0, \qquad
        T(e_0, \dots, e_{d-1}) = T(e_0 \oplus e_1,\; e_2 \oplus e_3,\; \dots
        \;[,\; e_{d-1}]),

    where the last element of an odd level moves up unchanged (see
    :func:`tree_level`), and :math:`\mathrm{out}_s = T(\text{segment } s)`, or
    ``empty_value`` for an empty segment. A segment of :math:`d` elements
    takes :math:`d - 1` applications in :math:`\lceil \log_2 d \rceil`
    levels; each level is one call of ``combine`` on the pairs of every
    segment, so a row of the output depends only on its own segment, and the
    work is :math:`\mathcal{O}(E)` operator applications whatever the degrees.

    Segments come from ``index`` (any order; the elements of a segment keep
    their order in ``x``) or, taking precedence as in PyG, from the CSR
    offsets ``ptr``.

    Levels with more than ``chunk_size`` pairs are evaluated in chunks
    without keeping the operator's activations, which the backward pass
    recomputes one chunk at a time (gradient checkpointing). The leaf map
    :math:`\phi` (e.g. a projection) is applied inside the first level, so
    :math:`\phi(x)` is never held whole: a chunked first level recomputes it
    with the operator, and the gradient flows to ``x`` directly.

    Args:
        x: ``[E, F]`` the elements.
        combine: :math:`(a, b) \mapsto a \oplus b` on ``[P, F]`` rows,
            returning ``[P, F]``.
        index: ``[E]`` the segment of each row, in any order.
        ptr: ``[S + 1]`` CSR offsets of ``x``'s rows, instead of ``index``.
        dim_size: the number of segments ``S``; from ``index`` or ``ptr``
            when None.
        empty_value: ``[F]`` the value of empty segments (it receives their
            gradient); zeros when None.
        chunk_size: the most pairs per ``combine`` call before a level is
            chunked and recomputed in backward; None never chunks.
        parameters: the tensors ``combine`` and ``leaf`` use besides their
            inputs (e.g. their modules' parameters). Chunked levels return
            their gradients only to the tensors listed here.
        leaf: :math:`\phi`, a row-wise map ``[P, F_in] -> [P, F]`` applied to
            every element before the tree; the identity when None.

    Returns:
        ``[S, F]`` the reduced segments.
    """
    if not isinstance(x, Tensor) or x.dim() != 2:
        raise ValueError(f"`x` must be a two-dimensional tensor [num_rows, features], got "
                         f"{tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__}")
    if not callable(combine):
        raise TypeError(f"`combine` must be a callable (a, b) -> a ⊕ b, got "
                        f"{type(combine).__name__}")
    if leaf is not None and not callable(leaf):
        raise TypeError(f"`leaf` must be a callable x -> φ(x) or None, got {type(leaf).__name__}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"`chunk_size` must be a positive integer or None, got {chunk_size!r}")
    if empty_value is not None and not (
            isinstance(empty_value, Tensor) and empty_value.dim() == 1
            and (leaf is not None or empty_value.shape == x.shape[1:])
            and empty_value.dtype == x.dtype and empty_value.device == x.device):
        got = (f"{tuple(empty_value.shape)} ({empty_value.dtype} on {empty_value.device})"
               if isinstance(empty_value, Tensor) else type(empty_value).__name__)
        width = "[F]" if leaf is not None else f"[{x.size(1)}]"
        raise ValueError(f"`empty_value` must be {width} like a row of the output ({x.dtype} "
                         f"on {x.device}), got {got}")
    if ptr is not None:
        num_segments = check_ptr(ptr, x, 0)
        if dim_size is not None and dim_size != num_segments:
            raise ValueError(f"`dim_size`={dim_size} does not match the {num_segments} "
                             f"segments described by `ptr`")
        counts = (ptr[1:] - ptr[:-1]).long()
        order = torch.arange(x.size(0), device=x.device)
    elif index is not None:
        num_segments = check_index(index, x, 0, dim_size)
        ptr, order = index_segments(index, num_segments)
        counts = ptr.diff()
    else:
        raise ValueError("One of `index` or `ptr` must be given")

    ids, values = _reduce_segments(x, combine, leaf, order, counts, chunk_size,
                                   [p for p in parameters if p.requires_grad])
    if empty_value is not None:
        if empty_value.shape != values.shape[1:]:
            raise ValueError(f"`empty_value` must be [{values.size(1)}] like a row of the "
                             f"output, got {tuple(empty_value.shape)}")
        out = empty_value.expand(num_segments, -1)
    else:
        out = values.new_zeros(num_segments, values.size(1))
    return out.index_copy(0, ids, values)


def _reduce_segments(
    h: Tensor, combine: BinaryOperator, leaf: Optional[Callable[[Tensor], Tensor]],
    order: Tensor, counts: Tensor, chunk_size: Optional[int], parameters: list[Tensor],
) -> tuple[Tensor, Tensor]:
    """Reduces every non-empty segment; returns (segment ids, values).

    Each level builds ``h = [pair results; carried elements]``. Finished
    segments leave the working set, so the total work is O(E), not
    O(N * depth). ``h`` starts as the raw elements. When the first level is
    chunked, it applies ``leaf`` to the rows it reads; otherwise its autograd
    stores ``leaf(h)`` anyway, so one call maps every row up front (a node's
    output then stays bitwise independent of the batch: BLAS rounds the same
    row differently in matrices of different heights).
    """
    def identity(rows: Tensor) -> Tensor:
        return rows

    if leaf is None or chunk_size is None or h.size(0) // 2 <= chunk_size:
        h = h if leaf is None else leaf(h)
        leaf = identity
    starts = counts.cumsum(0) - counts
    ids = torch.arange(counts.numel(), device=h.device)
    single = counts == 1
    done_ids = [ids[single]]
    done_values = [leaf(h.index_select(0, order[starts[single]]))]

    active = counts >= 2
    layout = SegmentLayout(ids[active], order, starts[active], counts[active])
    while layout.ids.numel() > 0:
        level = tree_level_unchecked(layout)
        pairs = _combine_pairs(h, level.left, level.right, combine, leaf, chunk_size,
                               parameters)
        done_ids.append(level.finished_ids)
        done_values.append(pairs.index_select(0, level.finished_pairs))
        h = torch.cat([pairs, leaf(h.index_select(0, level.carried))])
        layout, leaf = level.next, identity
    return torch.cat(done_ids), torch.cat(done_values)


def _combine_pairs(h: Tensor, left: Tensor, right: Tensor, combine: BinaryOperator,
                   leaf: Callable[[Tensor], Tensor], chunk_size: Optional[int],
                   parameters: list[Tensor]) -> Tensor:
    """``leaf(h[left]) ⊕ leaf(h[right])``, recomputed in chunks in backward if large."""
    def combine_leaves(a: Tensor, b: Tensor) -> Tensor:
        return combine(leaf(a), leaf(b))

    if chunk_size is None or left.numel() <= chunk_size:
        return combine_leaves(h.index_select(0, left), h.index_select(0, right))
    return RecomputedPairs.apply(h, left, right, combine_leaves, chunk_size, *parameters)


class RecomputedPairs(torch.autograd.Function):
    """``combine(h[left], h[right])`` evaluated chunk by chunk without
    storing the operator's activations; backward recomputes them one chunk at
    a time, so the extra memory is O(chunk_size * F) instead of O(P * F).

    ``apply(h, left, right, combine, chunk_size, *parameters)``: gradients
    flow to ``h`` and to ``parameters``, the tensors ``combine`` uses.
    """

    @staticmethod
    def forward(ctx: Any, h: Tensor, left: Tensor, right: Tensor, combine: BinaryOperator,
                chunk_size: int, *parameters: Tensor) -> Tensor:
        ctx.combine, ctx.chunk_size = combine, chunk_size
        ctx.save_for_backward(h, left, right, *parameters)
        with torch.no_grad():
            chunks = zip(left.split(chunk_size), right.split(chunk_size), strict=True)
            return torch.cat([combine(h.index_select(0, lc), h.index_select(0, rc))
                              for lc, rc in chunks])

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Optional[Tensor], ...]:
        h, left, right, *parameters = ctx.saved_tensors
        grad_h = torch.zeros_like(h)
        grad_parameters = [torch.zeros_like(p) for p in parameters]
        for start in range(0, left.numel(), ctx.chunk_size):
            chunk = slice(start, start + ctx.chunk_size)
            with torch.enable_grad():
                a = h.detach().index_select(0, left[chunk]).requires_grad_()
                b = h.detach().index_select(0, right[chunk]).requires_grad_()
                grads = torch.autograd.grad(ctx.combine(a, b), [a, b, *parameters],
                                            grad_out[chunk], allow_unused=True)
            # every row of h is in at most one pair of a level: no sums to order
            for rows, grad in ((left[chunk], grads[0]), (right[chunk], grads[1])):
                if grad is not None:
                    grad_h.index_add_(0, rows, grad)
            for total, grad in zip(grad_parameters, grads[2:], strict=True):
                if grad is not None:
                    total.add_(grad)
        return (grad_h, None, None, None, None, *grad_parameters)
