"""HISTOGRAPH: a readout over every layer's node activations."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple, Optional, Union

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import LayerNorm, Linear, ModuleList

from pyg_agg.ops import check_index, check_ptr, ptr_to_index, scatter, segment_counts

LAYER_WEIGHTINGS = ("signed", "softmax")
LEVELS = ("graph", "node")


class HistoGraphWeights(NamedTuple):
    """What :class:`HistoGraphReadout` returns with ``return_weights=True``.

    Attributes:
        layer: ``[B, L]`` layer weights :math:`\\alpha` per graph (``[N, L]``
            per node for ``level="node"``).
        node: Stage-2 attention: one ``[heads, n_b, n_b]`` tensor per graph
            (query node, key node; the graph's nodes in increasing index
            order), each row summing to 1; None for ``level="node"``.
    """

    layer: Tensor
    node: Optional[list[Tensor]]


def sinusoidal_encoding(num_positions: int, channels: int) -> Tensor:
    """``[num_positions, channels]`` sinusoidal position code (Vaswani et al.)."""
    position = torch.arange(num_positions, dtype=torch.float).unsqueeze(1)
    freq = torch.exp(torch.arange(0, channels, 2, dtype=torch.float)
                     * (-math.log(10000.0) / channels))
    code = torch.zeros(num_positions, channels)
    code[:, 0::2] = torch.sin(position * freq)
    code[:, 1::2] = torch.cos(position * freq[: channels // 2])
    return code


def node_slots(batch: Tensor, counts: Tensor) -> Tensor:
    """Position of every node among its graph's nodes (``batch`` may be unsorted)."""
    by_graph = torch.argsort(batch, stable=True)  # node ids listed graph by graph
    graph_start = torch.cumsum(counts, 0) - counts
    slot = torch.empty_like(batch)
    slot[by_graph] = torch.arange(batch.numel(), device=batch.device) - graph_start[batch[by_graph]]
    return slot


class HistoGraphReadout(torch.nn.Module):
    r"""The HISTOGRAPH readout from the `"Learning from Historical Activations
    in Graph Neural Networks" <https://arxiv.org/abs/2601.01123>`_ paper
    (Galron, Sinai, Maron, Eliasof; ICLR 2026).

    It reads the activations :math:`X_{v,l}` of node :math:`v` after every
    layer :math:`l = 1..L` of a GNN, not only the last one. Each layer is
    embedded to a common width :math:`D` and tagged with a fixed sinusoidal
    layer code :math:`P_l`:

    .. math::
        \tilde X_{v,l} = \mathrm{Emb}_l(X_{v,l}) + P_l.

    **Stage 1, layer attention** (the last layer is the query):

    .. math::
        s_{v,l} = \frac{(\tilde X_{v,L} W^Q)(\tilde X_{v,l} W^K)^\top}{\sqrt D},
        \qquad c_{b,l} = \frac{1}{|V_b|}\sum_{v \in V_b} s_{v,l},

    .. math::
        \alpha_{b,l} = \frac{c_{b,l}}{\operatorname{sign}(S_b)\,
            \max\!\big(|S_b|,\ \epsilon \textstyle\sum_{l'} |c_{b,l'}|\big)},
        \qquad S_b = \textstyle\sum_{l'} c_{b,l'},

    .. math::
        H_v = \textstyle\sum_l \alpha_{b(v),l}\, \tilde X_{v,l}.

    The ``"signed"`` weights are the paper's :math:`c_l / \sum c` (signed,
    so layers can be subtracted like the taps of an FIR filter). They equal
    it exactly unless the layers' scores cancel to within a fraction
    :math:`\epsilon` (``signed_eps``) of their total magnitude; then the
    denominator's magnitude is clamped to :math:`\epsilon\sum|c|` keeping its
    sign (:math:`\operatorname{sign}(0) = +1`), which bounds
    :math:`\sum_l |\alpha_l| \le 1/\epsilon` however close :math:`\sum c` is
    to 0. (A graph whose scores are all exactly 0 gets :math:`\alpha = 0`.)
    ``"softmax"`` uses :math:`\alpha_b = \mathrm{softmax}_l(c_b)` instead.

    **Stage 2, node attention**: multi-head self-attention among the nodes of
    each graph only, then residual + LayerNorm and a mean over the graph's
    nodes. Graphs of similar size (within a factor :math:`\sqrt 2`) are laid
    out together as a padded ``[G, M, D]`` block and padding keys are masked
    out of the softmax, so no graph sees another or its padding, and the work
    stays within twice :math:`\sum_b n_b^2 D` however skewed the sizes are:

    .. math::
        Z = \mathrm{LN}\big(H + \mathrm{MHA}(H, H, H)\big),\qquad
        G_b = W^{out}\, \frac{1}{|V_b|}\sum_{v\in V_b} Z_v + b^{out}.

    ``MHA`` is parameterised as :class:`torch.nn.MultiheadAttention`
    (``in_proj`` stacks :math:`W^Q, W^K, W^V`). With ``level="node"`` the
    scores are not averaged (:math:`c_{v,l} = s_{v,l}`, weights per node),
    stage 2 is skipped and the output is :math:`W^{out} H_v + b^{out}`.

    Args:
        in_channels: Width of every layer's activations, or a list of the
            :math:`L` per-layer widths.
        num_layers: :math:`L`, the number of layers in the history.
        out_channels: Output width.
        hidden_channels: Common width :math:`D` (default ``out_channels``);
            must be divisible by ``heads``.
        heads: Attention heads of stage 2.
        dropout: Dropout on :math:`H` and on the stage-2 attention weights.
        residual: Add :math:`H` back after stage 2 (``level="graph"`` only).
        layer_norm: LayerNorm after stage 2 (``level="graph"`` only).
        layer_weighting: ``"signed"`` (the paper) or ``"softmax"``.
        level: ``"graph"`` (readout, ``[B, out]``) or ``"node"``
            (``[N, out]``, stage 1 per node, no stage 2).
        signed_eps: :math:`\epsilon` of the signed normalisation, in (0, 1].

    Shapes:
        - **input:** ``history`` :math:`(N, L, F)` or a list of :math:`L`
          tensors :math:`(N, F_l)`; ``batch`` :math:`(N)` or ``ptr``
          :math:`(B + 1)`.
        - **output:** :math:`(B, F_{out})` or, for ``level="node"``,
          :math:`(N, F_{out})`.
    """

    def __init__(
        self,
        in_channels: Union[int, Sequence[int]],
        num_layers: int,
        out_channels: int,
        hidden_channels: Optional[int] = None,
        heads: int = 4,
        dropout: float = 0.0,
        residual: bool = True,
        layer_norm: bool = True,
        layer_weighting: str = "signed",
        level: str = "graph",
        signed_eps: float = 0.1,
    ) -> None:
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"`num_layers` must be >= 1, got {num_layers}")
        widths = [in_channels] * num_layers if isinstance(in_channels, int) else list(in_channels)
        if len(widths) != num_layers:
            raise ValueError(
                f"`in_channels` lists {len(widths)} widths but `num_layers` is {num_layers}"
            )
        hidden_channels = out_channels if hidden_channels is None else hidden_channels
        if hidden_channels % heads != 0:
            raise ValueError(
                f"`hidden_channels` ({hidden_channels}) must be divisible by `heads` ({heads})"
            )
        if layer_weighting not in LAYER_WEIGHTINGS:
            raise ValueError(
                f"`layer_weighting` must be one of {LAYER_WEIGHTINGS}, got {layer_weighting!r}"
            )
        if level not in LEVELS:
            raise ValueError(f"`level` must be one of {LEVELS}, got {level!r}")
        if not 0.0 < signed_eps <= 1.0:
            raise ValueError(f"`signed_eps` must be in (0, 1], got {signed_eps}")

        self.in_channels = in_channels
        self.layer_widths = widths
        self.num_layers = num_layers
        self.out_channels = out_channels
        self.hidden_channels = hidden_channels
        self.heads = heads
        self.dropout = dropout
        self.residual = residual
        self.layer_weighting = layer_weighting
        self.level = level
        self.signed_eps = signed_eps

        self.embed = ModuleList([Linear(w, hidden_channels) for w in widths])
        self.register_buffer(
            "layer_code", sinusoidal_encoding(num_layers, hidden_channels), persistent=False
        )
        self.lin_query = Linear(hidden_channels, hidden_channels, bias=False)
        self.lin_key = Linear(hidden_channels, hidden_channels, bias=False)
        if level == "graph":
            self.in_proj = Linear(hidden_channels, 3 * hidden_channels)
            self.out_proj = Linear(hidden_channels, hidden_channels)
            self.norm = LayerNorm(hidden_channels) if layer_norm else None
        self.lin_out = Linear(hidden_channels, out_channels)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        r"""Resets all learnable parameters of the module."""
        for module in self.modules():
            if module is not self and hasattr(module, "reset_parameters"):
                module.reset_parameters()

    def forward(
        self,
        history: Union[Tensor, Sequence[Tensor]],
        batch: Optional[Tensor] = None,
        ptr: Optional[Tensor] = None,
        size: Optional[int] = None,
        return_weights: bool = False,
    ) -> Union[Tensor, tuple[Tensor, HistoGraphWeights]]:
        r"""Forward pass.

        Args:
            history: ``[N, L, F]``, or a list of ``L`` tensors ``[N, F_l]``.
            batch: ``[N]`` graph of each node (one graph if both ``batch``
                and ``ptr`` are None). Ignored for ``level="node"``.
            ptr: ``[B + 1]`` CSR offsets of the graphs instead of ``batch``.
            size: Number of graphs ``B`` (graphs without nodes give the
                output of an all-zero embedding).
            return_weights: Also return a :class:`HistoGraphWeights`.
        """
        layers = self._split_history(history)
        num_nodes = layers[0].size(0)
        x = torch.stack([emb(h) for emb, h in zip(self.embed, layers, strict=True)], dim=1)
        x = x + self.layer_code  # [N, L, D]

        query = self.lin_query(x[:, -1])  # [N, D]
        key = self.lin_key(x)  # [N, L, D]
        scores = (key @ query.unsqueeze(-1)).squeeze(-1) / math.sqrt(self.hidden_channels)

        if self.level == "node":
            alpha = self._normalise(scores)  # [N, L]
            h = (alpha.unsqueeze(-1) * x).sum(dim=1)
            out = self.lin_out(F.dropout(h, self.dropout, self.training))
            return (out, HistoGraphWeights(alpha, None)) if return_weights else out

        batch, num_graphs = self._resolve_batch(batch, ptr, size, num_nodes, x)
        alpha = self._normalise(scatter(scores, batch, 0, num_graphs, reduce="mean"))  # [B, L]
        h = (alpha[batch].unsqueeze(-1) * x).sum(dim=1)  # [N, D]
        h = F.dropout(h, self.dropout, self.training)

        z, attn = self._node_attention(h, batch, num_graphs, return_weights)
        if self.residual:
            z = z + h
        if self.norm is not None:
            z = self.norm(z)
        out = self.lin_out(scatter(z, batch, 0, num_graphs, reduce="mean"))
        return (out, HistoGraphWeights(alpha, attn)) if return_weights else out

    def _normalise(self, c: Tensor) -> Tensor:
        """Layer weights from layer scores ``c`` ``[*, L]`` (see the class doc)."""
        if self.layer_weighting == "softmax":
            return torch.softmax(c, dim=-1)
        total = c.sum(dim=-1, keepdim=True)
        floor = self.signed_eps * c.abs().sum(dim=-1, keepdim=True)
        # the tiny absolute floor only matters when every score is exactly 0
        magnitude = torch.maximum(total.abs(), floor).clamp(min=torch.finfo(c.dtype).tiny)
        sign = torch.where(total >= 0, 1.0, -1.0).to(c.dtype)
        return c / (sign * magnitude)

    def _node_attention(
        self, h: Tensor, batch: Tensor, num_graphs: int, keep_weights: bool
    ) -> tuple[Tensor, Optional[list[Tensor]]]:
        """Multi-head self-attention within each graph, on padded blocks of
        graphs of similar size, and (``keep_weights``) each graph's
        ``[heads, n, n]`` weights."""
        num_nodes, dim = h.size(0), self.hidden_channels
        counts = segment_counts(batch, num_graphs)
        slot = node_slots(batch, counts)
        qkv = self.in_proj(h)
        z = h.new_zeros(num_nodes, dim)
        weights: list[Tensor] = [h.new_zeros(self.heads, 0, 0)] * num_graphs
        # graphs whose sizes agree within a factor sqrt(2) share one padded block,
        # so padding at most doubles the O(n^2) work however skewed the sizes are
        bucket = torch.ceil(2 * torch.log2(counts.clamp(min=1).to(torch.float))).long()
        bucket = bucket.masked_fill(counts == 0, -1)
        for key in torch.unique(bucket).tolist():
            if key < 0:
                continue  # graphs without nodes
            graphs = (bucket == key).nonzero().view(-1)
            local = torch.full_like(counts, -1).index_copy(
                0, graphs, torch.arange(graphs.numel(), device=h.device))
            nodes = (local[batch] >= 0).nonzero().view(-1)
            out, attn = self._dense_attention(
                qkv[nodes], local[batch[nodes]], slot[nodes], counts[graphs])
            z = z.index_copy(0, nodes, out)
            if not keep_weights:
                continue
            for g, graph_attn, n in zip(graphs.tolist(), attn, counts[graphs].tolist(),
                                        strict=True):
                weights[g] = graph_attn[:, :n, :n]
        return self.out_proj(z), weights if keep_weights else None

    def _dense_attention(
        self, qkv: Tensor, graph: Tensor, slot: Tensor, counts: Tensor
    ) -> tuple[Tensor, Tensor]:
        """Attention of the nodes of ``counts.numel()`` graphs laid out as a
        ``[G, M, 3D]`` block, padding keys masked out of the softmax."""
        num_graphs, max_nodes = counts.numel(), int(counts.max())
        head_dim = self.hidden_channels // self.heads
        block = qkv.new_zeros(num_graphs, max_nodes, qkv.size(-1)).index_put((graph, slot), qkv)
        block = block.view(num_graphs, max_nodes, 3, self.heads, head_dim).permute(2, 0, 3, 1, 4)
        query, key, value = block.unbind(0)  # each [G, heads, M, head_dim]
        score = query @ key.transpose(-1, -2) / math.sqrt(head_dim)  # [G, heads, M, M]
        is_key = torch.arange(max_nodes, device=qkv.device) < counts.unsqueeze(1)  # [G, M]
        score = score.masked_fill(~is_key[:, None, None, :], float("-inf"))
        attn = torch.softmax(score, dim=-1)  # every graph here has a key: no all -inf row
        out = F.dropout(attn, self.dropout, self.training) @ value
        out = out.transpose(1, 2).reshape(num_graphs, max_nodes, -1)[graph, slot]
        return out, attn

    def _split_history(self, history: Union[Tensor, Sequence[Tensor]]) -> list[Tensor]:
        """Validates ``history`` and returns it as a list of ``[N, F_l]``."""
        if isinstance(history, Tensor):
            if history.dim() != 3:
                raise ValueError(
                    f"`history` must be [N, L, F] (3-D) or a list of L tensors [N, F_l], "
                    f"got a tensor of shape {tuple(history.shape)}"
                )
            layers = list(history.unbind(dim=1))
        elif isinstance(history, (list, tuple)):
            layers = list(history)
            for i, h in enumerate(layers):
                if not isinstance(h, Tensor) or h.dim() != 2:
                    shape = tuple(h.shape) if isinstance(h, Tensor) else type(h).__name__
                    raise ValueError(f"`history[{i}]` must be a 2-D tensor [N, F], got {shape}")
        else:
            raise TypeError(
                f"`history` must be a tensor [N, L, F] or a list of tensors, "
                f"got {type(history).__name__}"
            )
        if len(layers) != self.num_layers:
            raise ValueError(
                f"`history` holds {len(layers)} layers but the readout was built for "
                f"`num_layers`={self.num_layers}"
            )
        num_nodes = layers[0].size(0)
        for i, (h, width) in enumerate(zip(layers, self.layer_widths, strict=True)):
            if h.size(0) != num_nodes:
                raise ValueError(
                    f"`history[{i}]` has {h.size(0)} nodes but layer 0 has {num_nodes}: "
                    f"every layer must hold the same N nodes"
                )
            if h.size(1) != width:
                raise ValueError(
                    f"layer {i} of `history` has {h.size(1)} features, expected {width} "
                    f"(`in_channels`)"
                )
        return layers

    @staticmethod
    def _resolve_batch(
        batch: Optional[Tensor], ptr: Optional[Tensor], size: Optional[int],
        num_nodes: int, x: Tensor,
    ) -> tuple[Tensor, int]:
        """``batch`` vector and number of graphs from ``batch``/``ptr``/``size``."""
        if ptr is not None:
            num_graphs = check_ptr(ptr, x, 0)
            if size is not None and size != num_graphs:
                raise ValueError(f"`size`={size} disagrees with `ptr` ({num_graphs} graphs)")
            size = num_graphs
            if batch is None:
                batch = ptr_to_index(ptr.long(), num_nodes)
        if batch is None:
            batch = torch.zeros(num_nodes, dtype=torch.long, device=x.device)
            size = 1 if size is None else size
        num_graphs = check_index(batch, x, 0, size, name="batch")
        return batch.long(), num_graphs

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.in_channels}, num_layers={self.num_layers}, "
            f"out_channels={self.out_channels}, heads={self.heads}, "
            f"layer_weighting={self.layer_weighting!r}, level={self.level!r})"
        )
