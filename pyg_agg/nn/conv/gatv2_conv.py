"""GATv2: dynamic graph attention with recomputation instead of stored
``E x H x C`` intermediates."""
from __future__ import annotations

import numbers
from typing import Optional, Union

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Parameter
from torch_geometric.nn.conv import MessagePassing
from torch_geometric.nn.dense.linear import Linear
from torch_geometric.nn.inits import glorot, zeros

from pyg_agg.ops import HAS_TORCH_SPARSE, index_to_ptr, ptr_to_index, scatter, scatter_softmax
from pyg_agg.ops.scatter import scatter_unchecked

if HAS_TORCH_SPARSE:  # pragma: no cover - depends on the optional `fast` extra
    from torch_sparse import SparseTensor
else:
    SparseTensor = None

FILL_REDUCTIONS = ("add", "sum", "mean", "min", "max", "mul")

# Edges per chunk are chosen so one chunk of the E x H x C intermediate holds
# about this many elements: large enough to amortise per-call overhead, small
# enough (4 MiB in float32) to stay cache resident.
CHUNK_ELEMENTS = 1 << 20


def _edge_chunks(num_edges: int, chunk_size: int):
    """Slices covering ``range(num_edges)`` in steps of ``chunk_size``."""
    return [slice(start, min(start + chunk_size, num_edges))
            for start in range(0, num_edges, chunk_size)] or [slice(0, 0)]


def _pre_activation(
    x_src: Tensor, x_dst: Tensor, edge_attr: Optional[Tensor], edge_weight: Optional[Tensor],
    src: Tensor, dst: Tensor,
) -> Tensor:
    """``W_l x_j + W_r x_i (+ W_e e_ij)`` for one chunk of edges: a fresh
    ``[c, H, C]`` tensor that callers may overwrite."""
    z = x_src.index_select(0, src)
    z += x_dst.index_select(0, dst)
    if edge_attr is not None:
        z += (edge_attr @ edge_weight.t()).view_as(z)
    return z


class _DynamicAttention(torch.autograd.Function):
    r"""Scores, per-target softmax and weighted aggregation of GATv2 in one
    autograd node.

    Forward stores only the ``[E, H]`` attention; the ``[E, H, C]``
    pre-activation ``z = W_l x_j + W_r x_i (+ W_e e_ij)`` and its LeakyReLU are
    rebuilt chunk by chunk in backward. Every ``E x H x C`` tensor exists one
    chunk at a time, so peak memory is ``O(N H C + E H)`` plus one chunk.

    Edge ``e`` reads ``x_src[src[e]]`` and ``x_dst[dst[e]]`` and is normalised
    and summed within ``group[e]`` (``num_groups`` slots); ``group`` differs from
    ``dst`` only for edges routed to a discarded slot.
    """

    @staticmethod
    def forward(ctx, x_src, x_dst, att, edge_attr, edge_weight, src, dst, group, num_groups,
                keep, negative_slope, chunk_size):
        heads, channels = att.shape
        chunks = _edge_chunks(src.numel(), chunk_size)
        scores = x_src.new_empty(src.numel(), heads)
        for part in chunks:
            z = _pre_activation(x_src, x_dst, None if edge_attr is None else edge_attr[part],
                                edge_weight, src[part], dst[part])
            scores[part] = F.leaky_relu_(z, negative_slope).mul_(att).sum(-1)
        alpha = scatter_softmax(scores, group, num_groups)
        alpha_used = alpha if keep is None else alpha * keep

        out = x_src.new_zeros(num_groups, heads, channels)
        for part in chunks:
            message = x_src.index_select(0, src[part]).mul_(alpha_used[part].unsqueeze(-1))
            # Accumulating chunk after chunk needs an in-place sum into one
            # buffer, which is what ops.scatter's "sum" does internally.
            out.index_add_(0, group[part], message)

        ctx.save_for_backward(x_src, x_dst, att, edge_attr, edge_weight, src, dst, group,
                              alpha, alpha_used, keep)
        ctx.num_groups = num_groups
        ctx.negative_slope = negative_slope
        ctx.chunks = chunks
        return out, alpha_used

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out, grad_alpha_used):
        (x_src, x_dst, att, edge_attr, edge_weight, src, dst, group,
         alpha, alpha_used, keep) = ctx.saved_tensors
        needs = ctx.needs_input_grad
        slope = ctx.negative_slope
        grad_src = torch.zeros_like(x_src) if needs[0] else None
        grad_dst = torch.zeros_like(x_dst) if needs[1] else None
        grad_att = torch.zeros_like(att) if needs[2] else None
        grad_edge_attr = torch.zeros_like(edge_attr) if needs[3] else None
        grad_edge_weight = torch.zeros_like(edge_weight) if needs[4] else None

        # d out_i / d alpha_ij = x_src[j]; d out_i / d x_src[j] = alpha_ij.
        grad_alpha = torch.zeros_like(alpha) if grad_alpha_used is None else grad_alpha_used.clone()
        if grad_out is not None:
            for part in ctx.chunks:
                grad_message = grad_out.index_select(0, group[part])
                grad_alpha[part] += (grad_message * x_src.index_select(0, src[part])).sum(-1)
                if grad_src is not None:
                    grad_src.index_add_(
                        0, src[part], grad_message.mul_(alpha_used[part].unsqueeze(-1)))
        if keep is not None:
            grad_alpha *= keep

        # Softmax backward: ds_j = a_j (g_j - sum_k a_k g_k) within each group.
        weighted = alpha * grad_alpha
        grad_scores = weighted - alpha * scatter_unchecked(
            weighted, group, 0, ctx.num_groups, "sum").index_select(0, group)

        if any(needs[:5]):
            for part in ctx.chunks:
                part_attr = None if edge_attr is None else edge_attr[part]
                z = _pre_activation(x_src, x_dst, part_attr, edge_weight, src[part], dst[part])
                slope_factor = (z > 0).to(z.dtype).mul_(1.0 - slope).add_(slope)
                grad_score = grad_scores[part].unsqueeze(-1)
                if grad_att is not None:
                    grad_att += (z.mul_(slope_factor) * grad_score).sum(0)
                grad_z = slope_factor.mul_(grad_score).mul_(att)
                if grad_src is not None:
                    grad_src.index_add_(0, src[part], grad_z)
                if grad_dst is not None:
                    grad_dst.index_add_(0, dst[part], grad_z)
                if edge_attr is not None:
                    flat = grad_z.view(grad_z.size(0), -1)
                    if grad_edge_attr is not None:
                        grad_edge_attr[part] = flat @ edge_weight
                    if grad_edge_weight is not None:
                        grad_edge_weight += flat.t() @ part_attr

        return (grad_src, grad_dst, grad_att, grad_edge_attr, grad_edge_weight,
                None, None, None, None, None, None, None)


class GATv2Conv(MessagePassing):
    r"""The GATv2 operator from `"How Attentive are Graph Attention Networks?"
    <https://arxiv.org/abs/2105.14491>`_ (Brody et al., ICLR 2022), a drop-in
    replacement for :class:`torch_geometric.nn.GATv2Conv` that uses less memory.

    .. math::
        \mathbf{x}^{\prime}_i = \sum_{j \in \mathcal{N}(i) \cup \{ i \}}
        \alpha_{i,j}\mathbf{\Theta}_{l}\mathbf{x}_{j},
        \qquad
        \alpha_{i,j} = \operatorname{softmax}_{j}\Big(\mathbf{a}^{\top}
        \mathrm{LeakyReLU}\big(\mathbf{\Theta}_{r}\mathbf{x}_i
        + \mathbf{\Theta}_{l}\mathbf{x}_j
        \;[+\; \mathbf{\Theta}_{e}\mathbf{e}_{i,j}]\big)\Big).

    Unlike GAT, where :math:`\mathbf{a}` is applied before the non-linearity
    and the ranking of neighbours is the same for every query node ("static"
    attention), the non-linearity sits between :math:`\mathbf{\Theta}` and
    :math:`\mathbf{a}`, so the ranking can depend on node :math:`i`
    ("dynamic" attention). With several heads the outputs are concatenated or
    averaged (``concat``), then the residual and bias are added.

    Differences from PyG (outputs, attention weights, ``state_dict`` and
    ``repr`` are the same):

    * **Memory.** Scores, softmax and aggregation run in one autograd node that
      keeps only the ``[E, H]`` attention for backward and recomputes the
      ``[E, H, C]`` pre-activation there, in chunks, instead of storing it and
      its LeakyReLU.
    * **Self-loops** (``add_self_loops=True``): existing loops
      :math:`i \to i` are replaced by fresh ones carrying the ``fill_value``
      edge features, as in PyG, but they are dropped by routing them to a
      discarded output slot rather than by boolean indexing, so there is no
      data-dependent shape and the layer compiles with :func:`torch.compile`
      without graph breaks (``return_attention_weights`` alone compacts the
      edge list).
    * **Bipartite self-loops.** For ``x = (x_src, x_dst)`` a loop
      :math:`i \to i` only means something if source ``i`` and target ``i`` are
      the same node. The layer uses the convention of layer-wise neighbour
      sampling, where one node set is a prefix of the other (targets are the
      first ``N_dst`` sampled nodes), and adds loops for
      ``i < min(N_src, N_dst)``, as PyG does. PyG crashes when
      ``N_dst > N_src`` with a string ``fill_value`` (it aggregates edge
      features into only ``N_src`` slots); here the aggregation spans all
      targets. For node sets without that correspondence (e.g. different node
      types) pass ``add_self_loops=False``.
    * Inputs are validated with errors naming the argument, and
      ``edge_attr`` may accompany self-loops for every adjacency format.

    The :class:`MessagePassing` hooks and explain mode are not used: the
    forward pass does not go through :meth:`propagate`.

    Args:
        in_channels (int or tuple): Size of each input sample, ``-1`` for lazy
            initialisation, or a ``(source, target)`` tuple for bipartite input.
        out_channels (int): Size of each output sample per head.
        heads (int): Number of attention heads. (default: ``1``)
        concat (bool): Concatenate the heads if ``True``, average them
            otherwise. (default: ``True``)
        negative_slope (float): LeakyReLU negative slope. (default: ``0.2``)
        dropout (float): Dropout probability of the normalised attention
            coefficients in training. (default: ``0.0``)
        add_self_loops (bool): Replace existing self-loops by fresh ones.
            (default: ``True``)
        edge_dim (int, optional): Edge feature size. (default: ``None``)
        fill_value (float, Tensor or str): Edge features of the added
            self-loops: a constant, or a reduction (``"add"``, ``"mean"``,
            ``"min"``, ``"max"``, ``"mul"``) of the features of the edges
            entering each node. (default: ``"mean"``)
        bias (bool): Learn an additive bias. (default: ``True``)
        share_weights (bool): Use the same matrix for source and target nodes
            (:math:`\mathbf{\Theta}_l = \mathbf{\Theta}_r`). (default: ``False``)
        residual (bool): Add a learnable skip connection. (default: ``False``)
        **kwargs: Arguments of :class:`torch_geometric.nn.conv.MessagePassing`.

    Shapes:
        - **input:** node features :math:`(N, F)` or
          :math:`((N_s, F_s), (N_t, F_t))`; edge indices :math:`(2, E)`, a
          ``torch_sparse.SparseTensor`` or a ``torch.sparse`` COO/CSR adjacency
          of shape :math:`(N_t, N_s)` (row = target); edge features
          :math:`(E, D)` *(optional)*, in the order of the adjacency entries.
        - **output:** :math:`(N_t, H \cdot C)` if ``concat`` else
          :math:`(N_t, C)`; with ``return_attention_weights=True`` also
          ``(edge_index, alpha)`` with :math:`\alpha` of shape :math:`(E', H)`
          over the edges after self-loop handling (an adjacency of the input's
          kind holding :math:`\alpha` for sparse input).
    """

    def __init__(
        self,
        in_channels: Union[int, tuple[int, int]],
        out_channels: int,
        heads: int = 1,
        concat: bool = True,
        negative_slope: float = 0.2,
        dropout: float = 0.0,
        add_self_loops: bool = True,
        edge_dim: Optional[int] = None,
        fill_value: Union[float, Tensor, str] = "mean",
        bias: bool = True,
        share_weights: bool = False,
        residual: bool = False,
        **kwargs,
    ):
        super().__init__(node_dim=0, **kwargs)
        if not isinstance(out_channels, int) or out_channels <= 0:
            raise ValueError(f"`out_channels` must be a positive int, got {out_channels!r}")
        if not isinstance(heads, int) or heads <= 0:
            raise ValueError(f"`heads` must be a positive int, got {heads!r}")
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"`dropout` must lie in [0, 1], got {dropout}")
        if edge_dim is not None and (not isinstance(edge_dim, int) or edge_dim <= 0):
            raise ValueError(f"`edge_dim` must be None or a positive int, got {edge_dim!r}")
        if isinstance(fill_value, str) and fill_value not in FILL_REDUCTIONS:
            raise ValueError(
                f"`fill_value` must be a number, a tensor or one of {FILL_REDUCTIONS}, "
                f"got {fill_value!r}")

        self.in_channels = in_channels
        self.out_channels = out_channels
        self.heads = heads
        self.concat = concat
        self.negative_slope = negative_slope
        self.dropout = dropout
        self.add_self_loops = add_self_loops
        self.edge_dim = edge_dim
        self.fill_value = fill_value
        self.residual = residual
        self.share_weights = share_weights

        src_channels, dst_channels = (
            (in_channels, in_channels) if isinstance(in_channels, int) else in_channels)
        self.lin_l = Linear(src_channels, heads * out_channels, bias=bias,
                            weight_initializer="glorot")
        if share_weights:
            self.lin_r = self.lin_l
        else:
            self.lin_r = Linear(dst_channels, heads * out_channels, bias=bias,
                                weight_initializer="glorot")
        self.att = Parameter(torch.empty(1, heads, out_channels))
        if edge_dim is not None:
            self.lin_edge = Linear(edge_dim, heads * out_channels, bias=False,
                                   weight_initializer="glorot")
        else:
            self.lin_edge = None

        total_out_channels = out_channels * (heads if concat else 1)
        if residual:
            self.res = Linear(dst_channels, total_out_channels, bias=False,
                              weight_initializer="glorot")
        else:
            self.register_parameter("res", None)
        if bias:
            self.bias = Parameter(torch.empty(total_out_channels))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        super().reset_parameters()
        self.lin_l.reset_parameters()
        self.lin_r.reset_parameters()
        if self.lin_edge is not None:
            self.lin_edge.reset_parameters()
        if self.res is not None:
            self.res.reset_parameters()
        glorot(self.att)
        zeros(self.bias)

    def forward(
        self,
        x: Union[Tensor, tuple[Tensor, Tensor]],
        edge_index,
        edge_attr: Optional[Tensor] = None,
        return_attention_weights: Optional[bool] = None,
    ):
        r"""Runs the layer.

        Args:
            x: ``[N, F]`` node features, or ``(x_src, x_dst)`` for bipartite
                graphs.
            edge_index: ``[2, E]`` integer tensor (row 0 = source, row 1 =
                target), ``torch_sparse.SparseTensor`` or ``torch.sparse``
                COO/CSR adjacency with rows = targets.
            edge_attr: ``[E, edge_dim]`` (or ``[E]`` if ``edge_dim == 1``)
                edge features.
            return_attention_weights: If true, also return
                ``(edge_index, alpha)``.
        """
        heads, channels = self.heads, self.out_channels
        x_src, x_dst = self._check_features(x)
        h_src = self.lin_l(x_src).view(-1, heads, channels)
        h_dst = h_src if x_dst is x_src and self.share_weights else (
            self.lin_r(x_dst).view(-1, heads, channels))
        num_src, num_dst = x_src.size(0), x_dst.size(0)

        src, dst, kind = self._edge_list(edge_index, num_src, num_dst)
        edge_attr = self._check_edge_attr(edge_attr, src.numel())
        group, num_groups = dst, num_dst
        if self.add_self_loops:
            src, dst, group, edge_attr = self._replace_self_loops(
                src, dst, edge_attr, num_src, num_dst)
            num_groups = num_dst + 1  # the extra slot collects the replaced loops

        keep = None
        if self.training and self.dropout > 0:
            keep = F.dropout(h_src.new_ones(src.numel(), heads), self.dropout)
        # Under torch.compile a single chunk avoids specialising on the edge count.
        if torch.compiler.is_compiling():
            chunk_size = max(1, src.numel())
        else:
            chunk_size = max(1, CHUNK_ELEMENTS // (heads * channels))
        out, alpha = _DynamicAttention.apply(
            h_src, h_dst, self.att.view(heads, channels), edge_attr,
            None if edge_attr is None else self.lin_edge.weight,
            src, dst, group, num_groups, keep, self.negative_slope, chunk_size)
        out = out[:num_dst]

        out = out.reshape(num_dst, heads * channels) if self.concat else out.mean(dim=1)
        if self.res is not None:
            out = out + self.res(x_dst)
        if self.bias is not None:
            out = out + self.bias

        if return_attention_weights:
            if self.add_self_loops:
                kept = group != num_dst
                src, dst, alpha = src[kept], dst[kept], alpha[kept]
            return out, self._attention_output(src, dst, alpha, kind, num_src, num_dst)
        return out

    def _check_features(self, x) -> tuple[Tensor, Tensor]:
        """Splits ``x`` into source and target features and validates them."""
        if isinstance(x, Tensor):
            pair, expected = (x, x), (self.in_channels, self.in_channels)
        elif isinstance(x, (tuple, list)) and len(x) == 2:
            pair = tuple(x)
            if isinstance(self.in_channels, int):
                expected = (self.in_channels, self.in_channels)
            else:
                expected = tuple(self.in_channels)
        else:
            raise TypeError(
                f"`x` must be a tensor or a (x_src, x_dst) pair of tensors, got "
                f"{type(x).__name__}")
        for name, feat, want in zip(("x_src", "x_dst"), pair, expected, strict=True):
            label = "x" if isinstance(x, Tensor) else name
            if not isinstance(feat, Tensor):
                raise TypeError(f"`{label}` must be a tensor, got {type(feat).__name__}")
            if feat.dim() != 2:
                raise ValueError(
                    f"`{label}` must be 2-D [num_nodes, num_features], got shape "
                    f"{tuple(feat.shape)}")
            if want > 0 and feat.size(1) != want:
                raise ValueError(
                    f"`{label}` has {feat.size(1)} features but the layer expects "
                    f"in_channels={want}")
        return pair

    def _edge_list(self, edge_index, num_src: int, num_dst: int) -> tuple[Tensor, Tensor, str]:
        """Source and target of each edge, and the input kind for the output."""
        if SparseTensor is not None and isinstance(edge_index, SparseTensor):
            row, col, _ = edge_index.coo()
            self._check_adjacency_size(tuple(edge_index.sizes()), num_src, num_dst)
            return col, row, "torch_sparse"
        if not isinstance(edge_index, Tensor):
            raise TypeError(
                f"`edge_index` must be a [2, E] tensor, a torch.sparse adjacency or a "
                f"SparseTensor, got {type(edge_index).__name__}")
        if edge_index.layout == torch.sparse_coo:
            self._check_adjacency_size(tuple(edge_index.shape[:2]), num_src, num_dst)
            row, col = edge_index._indices()
            return col, row, "coo"
        if edge_index.layout == torch.sparse_csr:
            self._check_adjacency_size(tuple(edge_index.shape[:2]), num_src, num_dst)
            col = edge_index.col_indices()
            row = ptr_to_index(edge_index.crow_indices(), col.numel())
            return col.long(), row, "csr"
        if edge_index.layout != torch.strided:
            raise ValueError(
                f"`edge_index` has unsupported layout {edge_index.layout}; use a [2, E] "
                f"tensor, sparse COO or sparse CSR")
        if edge_index.dtype not in (torch.int64, torch.int32):
            raise TypeError(
                f"`edge_index` must be an integer tensor (torch.long or torch.int), got "
                f"dtype {edge_index.dtype}")
        if edge_index.dim() != 2 or edge_index.size(0) != 2:
            raise ValueError(
                f"`edge_index` must have shape [2, E], got {tuple(edge_index.shape)}")
        src, dst = edge_index[0], edge_index[1]
        if src.numel() and not torch.compiler.is_compiling():
            for name, index, size in (("edge_index[0] (sources)", src, num_src),
                                      ("edge_index[1] (targets)", dst, num_dst)):
                lo, hi = (int(v) for v in torch.aminmax(index))
                if lo < 0 or hi >= size:
                    raise ValueError(
                        f"`{name}` has entries in [{lo}, {hi}] but must lie in "
                        f"[0, {size - 1}] for {size} nodes")
        return src, dst, "index"

    @staticmethod
    def _check_adjacency_size(size: tuple, num_src: int, num_dst: int) -> None:
        if size != (num_dst, num_src):
            raise ValueError(
                f"`edge_index` adjacency has shape {size} but must be "
                f"(num_target_nodes, num_source_nodes) = ({num_dst}, {num_src})")

    def _check_edge_attr(self, edge_attr: Optional[Tensor], num_edges: int) -> Optional[Tensor]:
        """Returns ``edge_attr`` as ``[E, edge_dim]`` after validating it."""
        if edge_attr is None:
            return None
        if self.lin_edge is None:
            raise ValueError(
                "`edge_attr` was given but the layer was built with edge_dim=None; "
                "pass edge_dim=<number of edge features> to use edge features")
        if not isinstance(edge_attr, Tensor):
            raise TypeError(f"`edge_attr` must be a tensor, got {type(edge_attr).__name__}")
        if edge_attr.dim() == 1:
            edge_attr = edge_attr.view(-1, 1)
        if edge_attr.dim() != 2 or edge_attr.size(1) != self.edge_dim:
            raise ValueError(
                f"`edge_attr` must have shape [E, {self.edge_dim}] (edge_dim={self.edge_dim}), "
                f"got {tuple(edge_attr.shape)}")
        if edge_attr.size(0) != num_edges:
            raise ValueError(
                f"`edge_attr` has {edge_attr.size(0)} rows but `edge_index` has "
                f"{num_edges} edges")
        return edge_attr

    def _replace_self_loops(
        self, src: Tensor, dst: Tensor, edge_attr: Optional[Tensor], num_src: int, num_dst: int,
    ) -> tuple[Tensor, Tensor, Tensor, Optional[Tensor]]:
        """Routes existing loops to the discarded slot ``num_dst`` and appends a
        loop ``i -> i`` for every ``i < min(num_src, num_dst)``."""
        num_loops = min(num_src, num_dst)
        group = torch.where(src == dst, num_dst, dst).long()
        loops = torch.arange(num_loops, device=src.device)
        if edge_attr is not None:
            loop_attr = self._loop_attr(edge_attr, group, num_dst + 1)[:num_loops]
            edge_attr = torch.cat([edge_attr, loop_attr], dim=0)
        return (torch.cat([src.long(), loops]), torch.cat([dst.long(), loops]),
                torch.cat([group, loops]), edge_attr)

    def _loop_attr(self, edge_attr: Tensor, group: Tensor, num_groups: int) -> Tensor:
        """Edge features of the added self-loops, ``[num_groups, D]``."""
        fill = self.fill_value
        size = (num_groups, edge_attr.size(1))
        if fill is None:
            return edge_attr.new_ones(size)
        if isinstance(fill, Tensor):
            fill = fill.to(edge_attr.device, edge_attr.dtype)
            return fill.expand(size).contiguous()
        if isinstance(fill, numbers.Number):
            return edge_attr.new_full(size, fill)
        if fill == "mul":
            # pyg_agg.ops has no product reduction; this touches only [E, D].
            return edge_attr.new_ones(size).scatter_reduce_(
                0, group.view(-1, 1).expand_as(edge_attr), edge_attr, reduce="prod")
        return scatter(edge_attr, group, 0, num_groups, reduce="sum" if fill == "add" else fill)

    @staticmethod
    def _attention_output(src: Tensor, dst: Tensor, alpha: Tensor, kind: str,
                          num_src: int, num_dst: int):
        """What PyG returns beside the output: ``(edge_index, alpha)``, a
        ``SparseTensor`` holding alpha, or ``(adjacency, alpha)`` for torch.sparse."""
        if kind == "index":
            return torch.stack([src, dst]), alpha
        if kind == "torch_sparse":
            return SparseTensor(row=dst, col=src, value=alpha, sparse_sizes=(num_dst, num_src))
        order = torch.argsort(dst * num_src + src)
        src, dst, alpha = src[order], dst[order], alpha[order]
        size = (num_dst, num_src) + tuple(alpha.shape[1:])
        if kind == "coo":
            adj = torch.sparse_coo_tensor(torch.stack([dst, src]), alpha, size, is_coalesced=True)
        else:
            adj = torch.sparse_csr_tensor(index_to_ptr(dst, num_dst), src, alpha, size)
        return adj, alpha

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, "
                f"{self.out_channels}, heads={self.heads})")
