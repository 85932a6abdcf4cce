"""Fused dynamic (GATv2) attention: scores, softmax and aggregation in one op."""
from __future__ import annotations

from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable

from pyg_agg.ops.backend import resolve_backend
from pyg_agg.ops.graph import CSRGraph, position_rows
from pyg_agg.ops.scatter import scatter_unchecked
from pyg_agg.ops.softmax import scatter_softmax

# The reference backend builds the [E, H, C] pre-activation one chunk of edges
# at a time, each about this many elements: large enough to amortise per-call
# overhead, small enough (4 MiB in float32) to stay cache resident.
CHUNK_ELEMENTS = 1 << 20


def dynamic_attention(
    x_src: Tensor,
    x_dst: Tensor,
    att: Tensor,
    graph: CSRGraph,
    edge_attr: Optional[Tensor] = None,
    edge_weight: Optional[Tensor] = None,
    edge_scale: Optional[Tensor] = None,
    negative_slope: float = 0.2,
    return_alpha: bool = False,
) -> tuple[Tensor, Optional[Tensor]]:
    r"""GATv2's attention and aggregation over the rows of a CSR graph.

    For target row :math:`i` and its edges :math:`e = (j \to i)`:

    .. math::
        z_e = \mathbf{x}^{src}_j + \mathbf{x}^{dst}_i \;[+\; W_e \mathbf{e}_e],
        \quad
        s_{e,h} = \textstyle\sum_c a_{h,c}\,\mathrm{LeakyReLU}(z_{e,h,c}),
        \quad
        \alpha_e = \operatorname{softmax}_{e \in \mathrm{row}\,i}(s_e),
        \quad
        \mathbf{out}_i = \textstyle\sum_e \alpha_e\,\lambda_e\,\mathbf{x}^{src}_j

    (Brody et al., "How Attentive are Graph Attention Networks?", ICLR 2022),
    with an optional per-edge scale :math:`\lambda` (attention dropout, an
    explainer's edge mask). Entries of ``graph.col`` past ``graph.ptr[-1]``
    (parked) take no part; their ``alpha`` is 0.

    With the ``"native"`` backend (C++ on CPU) each row is one streaming pass
    with an online softmax, as in FlashAttention: no ``[E, H, C]`` tensor is
    allocated, forward or backward, and only the per-row log-sum-exp is kept
    for the backward, which recomputes the scores. The ``"torch"`` reference
    builds the pre-activation in chunks of edges and keeps ``[E, H]``
    attention. Both are deterministic.

    Args:
        x_src: ``[N_src, H, C]`` source features (:math:`W_l \mathbf{x}`).
        x_dst: ``[N_dst, H, C]`` target features (:math:`W_r \mathbf{x}`).
        att: ``[H, C]`` attention vector.
        graph: target-sorted CSR with ``N_dst`` rows, from
            :func:`~pyg_agg.ops.target_csr`.
        edge_attr: ``[E, D]`` edge features in CSR order, or None.
        edge_weight: ``[H * C, D]`` :math:`W_e` (a ``Linear``'s weight); with
            ``edge_attr`` only.
        edge_scale: ``[E, H]`` multiplier of each attention weight in the
            sum, in CSR order, or None.
        negative_slope: LeakyReLU slope.
        return_alpha: also return the softmax, ``[E, H]`` in CSR order.

    Returns:
        ``(out, alpha)``: ``[N_dst, H, C]`` and the softmax or None.
    """
    _check_inputs(x_src, x_dst, att, graph, edge_attr, edge_weight, edge_scale)
    if resolve_backend("attention", x_src.device.type) == "native":
        # the transposed graph, cached with the CSR, serves the backward
        keep_transpose = (torch.is_grad_enabled() and not torch.compiler.is_compiling()
                          and _any_requires_grad(x_src, x_dst, att, edge_attr, edge_weight, edge_scale))
        csc = graph.transpose() if keep_transpose else (None, None, None)
        out, _, alpha = torch.ops.pyg_agg.dynamic_attention(
            x_src.contiguous(), x_dst.contiguous(), att.contiguous(), graph.ptr, graph.col,
            None if edge_attr is None else edge_attr.contiguous(),
            None if edge_weight is None else edge_weight.t().contiguous(),
            None if edge_scale is None else edge_scale.contiguous(),
            float(negative_slope), return_alpha, *csc)
        return out, alpha if return_alpha else None
    num_dst, heads, channels = x_dst.shape
    if num_dst == 0:  # nothing to attend to: keep the (empty) output in the autograd graph
        return x_dst * 0, x_dst.new_zeros(graph.col.numel(), heads) if return_alpha else None
    rows = position_rows(graph.ptr, graph.col.numel())
    # compiled: one chunk, so that nothing specialises on the edge count
    chunk_size = None if torch.compiler.is_compiling() else max(1, CHUNK_ELEMENTS // (heads * channels))
    out, alpha = ReferenceAttention.apply(
        x_src, x_dst, att, edge_attr, edge_weight, edge_scale, graph.col, rows,
        float(negative_slope), chunk_size)
    return out[:num_dst], alpha if return_alpha else None


def _any_requires_grad(*tensors: Optional[Tensor]) -> bool:
    return any(t is not None and t.requires_grad for t in tensors)


def _check_inputs(x_src: Tensor, x_dst: Tensor, att: Tensor, graph: CSRGraph,
                  edge_attr: Optional[Tensor], edge_weight: Optional[Tensor],
                  edge_scale: Optional[Tensor]) -> None:
    if att.dim() != 2:
        raise ValueError(f"`att` must be [heads, channels], got shape {tuple(att.shape)}")
    heads, channels = att.shape
    for name, x in (("x_src", x_src), ("x_dst", x_dst)):
        if x.dim() != 3 or tuple(x.shape[1:]) != (heads, channels):
            raise ValueError(f"`{name}` must be [N, {heads}, {channels}] like `att`, got shape "
                             f"{tuple(x.shape)}")
        if x.dtype != att.dtype or x.device != att.device:
            raise TypeError(f"`{name}` must match `att` in dtype and device, got {x.dtype} on "
                            f"{x.device} against {att.dtype} on {att.device}")
    if graph.num_rows != x_dst.size(0) or graph.num_sources != x_src.size(0):
        raise ValueError(f"`graph` has {graph.num_rows} rows and {graph.num_sources} sources but "
                         f"x_dst has {x_dst.size(0)} and x_src {x_src.size(0)} nodes")
    edges = graph.col.numel()
    if (edge_attr is None) != (edge_weight is None):
        raise ValueError("`edge_attr` and `edge_weight` must be given together")
    if edge_attr is not None:
        if edge_attr.dim() != 2 or edge_attr.size(0) != edges:
            raise ValueError(f"`edge_attr` must be [{edges}, D] (one row per edge), got shape "
                             f"{tuple(edge_attr.shape)}")
        if tuple(edge_weight.shape) != (heads * channels, edge_attr.size(1)):
            raise ValueError(f"`edge_weight` must be [{heads * channels}, {edge_attr.size(1)}], "
                             f"got shape {tuple(edge_weight.shape)}")
    if edge_scale is not None and tuple(edge_scale.shape) != (edges, heads):
        raise ValueError(f"`edge_scale` must be [{edges}, {heads}] (edges x heads), got shape "
                         f"{tuple(edge_scale.shape)}")


def _edge_chunks(num_edges: int, chunk_size: Optional[int]) -> list[slice]:
    """Slices covering ``range(num_edges)`` in steps of ``chunk_size`` (None: one)."""
    if chunk_size is None:
        return [slice(None)]
    return [slice(start, min(start + chunk_size, num_edges))
            for start in range(0, num_edges, chunk_size)] or [slice(0, 0)]


def _pre_activation(x_src: Tensor, x_dst: Tensor, edge_attr: Optional[Tensor],
                    edge_weight: Optional[Tensor], src: Tensor, dst: Tensor) -> Tensor:
    """``x_src[src] + x_dst[dst] (+ W_e e)`` for one chunk of edges: a fresh
    ``[c, H, C]`` tensor that callers may overwrite."""
    z = x_src.index_select(0, src)
    z += x_dst.index_select(0, dst)
    if edge_attr is not None:
        z += (edge_attr @ edge_weight.t()).view_as(z)
    return z


class ReferenceAttention(torch.autograd.Function):
    r"""The ``"torch"`` backend of :func:`dynamic_attention`.

    Forward keeps only the ``[E, H]`` attention; the ``[E, H, C]``
    pre-activation and its LeakyReLU are rebuilt chunk by chunk in backward,
    so every ``E x H x C`` tensor exists one chunk at a time. Position ``p``
    reads ``x_src[col[p]]`` and ``x_dst[rows[p]]`` and is normalised within
    row ``rows[p]``; parked positions (``rows[p] = N_dst``) form an extra
    output row that the caller drops.
    """

    @staticmethod
    def forward(ctx: Any, x_src: Tensor, x_dst: Tensor, att: Tensor, edge_attr: Optional[Tensor],
                edge_weight: Optional[Tensor], edge_scale: Optional[Tensor], col: Tensor,
                rows: Tensor, negative_slope: float,
                chunk_size: Optional[int]) -> tuple[Tensor, Tensor]:
        num_dst, heads, channels = x_dst.shape
        # parked positions read any valid target row; their scores are then -inf
        dst = rows.clamp(max=max(num_dst - 1, 0))
        parked = rows == num_dst
        chunks = _edge_chunks(col.numel(), chunk_size)
        scores = x_src.new_empty(col.numel(), heads)
        for part in chunks:
            z = _pre_activation(x_src, x_dst, None if edge_attr is None else edge_attr[part],
                                edge_weight, col[part], dst[part])
            scores[part] = F.leaky_relu_(z, negative_slope).mul_(att).sum(-1)
        scores.masked_fill_(parked.unsqueeze(-1), float("-inf"))
        alpha = scatter_softmax(scores, rows, num_dst + 1)  # all -inf row: zeros
        weight = alpha if edge_scale is None else alpha * edge_scale

        out = x_src.new_zeros(num_dst + 1, heads, channels)
        for part in chunks:
            message = x_src.index_select(0, col[part]).mul_(weight[part].unsqueeze(-1))
            out.index_add_(0, rows[part], message)

        ctx.save_for_backward(x_src, x_dst, att, edge_attr, edge_weight, edge_scale, col, dst,
                              rows, alpha, weight)
        ctx.negative_slope = negative_slope
        ctx.chunks = chunks
        return out, alpha

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: Optional[Tensor],
                 grad_alpha: Optional[Tensor]) -> tuple[Optional[Tensor], ...]:
        (x_src, x_dst, att, edge_attr, edge_weight, edge_scale, col, dst, rows,
         alpha, weight) = ctx.saved_tensors
        needs = ctx.needs_input_grad
        slope = ctx.negative_slope
        grad_src = torch.zeros_like(x_src) if needs[0] else None
        grad_dst = torch.zeros_like(x_dst) if needs[1] else None
        grad_att = torch.zeros_like(att) if needs[2] else None
        grad_edge_attr = torch.zeros_like(edge_attr) if needs[3] else None
        grad_edge_weight = torch.zeros_like(edge_weight) if needs[4] else None

        # d out_i / d weight_e = x_src[j] . g_i;  d out_i / d x_src[j] = weight_e g_i
        grad_weight = torch.zeros_like(alpha)
        if grad_out is not None:
            for part in ctx.chunks:
                grad_message = grad_out.index_select(0, rows[part])
                grad_weight[part] = (grad_message * x_src.index_select(0, col[part])).sum(-1)
                if grad_src is not None:
                    grad_src.index_add_(0, col[part], grad_message.mul_(weight[part].unsqueeze(-1)))
        grad_scale = alpha * grad_weight if needs[5] else None
        grad_alpha_total = grad_weight if edge_scale is None else grad_weight * edge_scale
        if grad_alpha is not None:
            grad_alpha_total = grad_alpha_total + grad_alpha

        # softmax backward: ds_e = a_e (g_e - sum_k a_k g_k) within each row
        weighted = alpha * grad_alpha_total
        row_sums = scatter_unchecked(weighted, rows, 0, x_dst.size(0) + 1, "sum")
        grad_scores = weighted - alpha * row_sums.index_select(0, rows)

        if any(needs[:5]):
            for part in ctx.chunks:
                part_attr = None if edge_attr is None else edge_attr[part]
                z = _pre_activation(x_src, x_dst, part_attr, edge_weight, col[part], dst[part])
                factor = (z > 0).to(z.dtype).mul_(1.0 - slope).add_(slope)
                grad_score = grad_scores[part].unsqueeze(-1)
                if grad_att is not None:
                    grad_att += (z.mul_(factor) * grad_score).sum(0)
                grad_z = factor.mul_(grad_score).mul_(att)
                if grad_src is not None:
                    grad_src.index_add_(0, col[part], grad_z)
                if grad_dst is not None:
                    grad_dst.index_add_(0, dst[part], grad_z)
                if edge_attr is not None:
                    flat = grad_z.view(grad_z.size(0), -1)
                    if grad_edge_attr is not None:
                        grad_edge_attr[part] = flat @ edge_weight
                    if grad_edge_weight is not None:
                        grad_edge_weight += flat.t() @ part_attr

        return (grad_src, grad_dst, grad_att, grad_edge_attr, grad_edge_weight, grad_scale,
                None, None, None, None)
