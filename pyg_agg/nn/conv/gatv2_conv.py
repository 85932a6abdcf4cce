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

from pyg_agg.ops import (
    HAS_TORCH_SPARSE,
    Edges,
    dynamic_attention,
    index_to_ptr,
    read_edges,
    scatter,
    target_csr,
)

if HAS_TORCH_SPARSE:  # pragma: no cover - depends on the optional `fast` extra
    from torch_sparse import SparseTensor
else:
    SparseTensor = None

FILL_REDUCTIONS = ("add", "sum", "mean", "min", "max", "mul")


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

    * **One fused op.** Scores, softmax and aggregation are one call of
      :func:`pyg_agg.ops.dynamic_attention` over the target-sorted edges
      (sorted once per graph and cached, see :mod:`pyg_agg.ops.graph`). Its
      native kernel streams each target's edges once with an online softmax
      and keeps only per-node normalisers for a backward that recomputes, so
      no ``[E, H, C]`` tensor is ever allocated.
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

    Explain mode works as in PyG (an explainer's edge mask weights each
    message, added self-loops keep weight 1), and ``flow`` is honoured. The
    :class:`MessagePassing` propagate/message hooks are not called: the
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
        edge_dim (int, optional): Edge feature size; ``edge_attr`` is then
            required. (default: ``None``)
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

        edges = read_edges(edge_index, num_src, num_dst, self.flow)
        edge_attr = self._check_edge_attr(edge_attr, edges.source.numel())
        edge_mask = self._explain_edge_mask(edges.source.numel())
        sources, rows = edges.source, edges.target
        if self.add_self_loops:
            # Existing loops are parked in row num_dst (dropped without a
            # data-dependent shape); fresh loops i -> i follow the edges.
            loops = torch.arange(min(num_src, num_dst), device=rows.device)
            is_loop = sources == rows
            parked_rows = torch.where(is_loop, num_dst, rows)
            if edge_attr is not None:
                # PyG's add_self_loops reduces over edge_index[1] whatever the flow
                second, size = (rows, num_dst) if self.flow == "source_to_target" else (sources, num_src)
                loop_attr = self._loop_attr(edge_attr, torch.where(is_loop, size, second), size + 1)
                edge_attr = torch.cat([edge_attr, loop_attr[:loops.numel()]], dim=0)
            if edge_mask is not None:  # as PyG's explain_message: loops keep weight 1
                edge_mask = torch.cat([edge_mask, edge_mask.new_ones(loops.numel())])
            sources, rows = torch.cat([sources, loops]), torch.cat([parked_rows, loops])
            graph = target_csr(edges, rows, sources, options=("self_loops",))
        else:
            graph = target_csr(edges)

        edge_scale = None
        if edge_mask is not None:
            edge_scale = graph.to_csr_order(edge_mask).unsqueeze(-1).expand(-1, heads)
        keep = None
        if self.training and self.dropout > 0:
            keep = F.dropout(h_src.new_ones(graph.col.numel(), heads), self.dropout)
            edge_scale = keep if edge_scale is None else edge_scale * keep
        out, alpha = dynamic_attention(
            h_src, h_dst, self.att.view(heads, channels), graph, graph.to_csr_order(edge_attr),
            None if edge_attr is None else self.lin_edge.weight, edge_scale,
            self.negative_slope, return_alpha=bool(return_attention_weights))

        out = out.reshape(num_dst, heads * channels) if self.concat else out.mean(dim=1)
        if self.res is not None:
            out = out + self.res(x_dst)
        if self.bias is not None:
            out = out + self.bias

        if return_attention_weights:
            if keep is not None:  # PyG returns the attention after dropout
                alpha = alpha * keep
            alpha = graph.to_input_order(alpha)
            if self.add_self_loops:
                kept = rows != num_dst
                sources, rows, alpha = sources[kept], rows[kept], alpha[kept]
            return out, self._attention_output(sources, rows, alpha, edges, num_src, num_dst)
        return out

    def _explain_edge_mask(self, num_edges: int) -> Optional[Tensor]:
        """The explainer's per-edge weight (PyG's explain mode), or None."""
        if not self.explain:
            return None
        mask = self._edge_mask
        if mask is None:
            raise ValueError("explain mode is on but no edge mask was set; "
                             "did you forget to initialize it?")
        if mask.numel() != num_edges:
            raise ValueError(f"the explainer's edge mask has {mask.numel()} entries but "
                             f"`edge_index` has {num_edges} edges")
        return mask.sigmoid() if self._apply_sigmoid else mask

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

    def _check_edge_attr(self, edge_attr: Optional[Tensor], num_edges: int) -> Optional[Tensor]:
        """Returns ``edge_attr`` as ``[E, edge_dim]`` after validating it."""
        if edge_attr is None:
            if self.lin_edge is not None:
                raise ValueError(
                    f"`edge_attr` is missing but the layer was built with edge_dim={self.edge_dim}; "
                    f"pass edge features [E, {self.edge_dim}] or build it with edge_dim=None")
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
        # as PyG's: a product over no edge is 1, other reductions give 0
        return scatter(edge_attr, group, 0, num_groups, reduce="sum" if fill == "add" else fill,
                       fill_value=1.0 if fill == "mul" else 0.0)

    @staticmethod
    def _attention_output(src: Tensor, dst: Tensor, alpha: Tensor, edges: Edges,
                          num_src: int, num_dst: int):
        """What PyG returns beside the output: ``(edge_index, alpha)``, a
        ``SparseTensor`` holding alpha, or ``(adjacency, alpha)`` for torch.sparse."""
        kind = edges.kind
        if kind == "index":
            pair = (src, dst) if edges.flow == "source_to_target" else (dst, src)
            return torch.stack(pair), alpha
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
