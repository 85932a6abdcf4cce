"""Principal Neighbourhood Aggregation (PNA), drop-in for PyG's ``PNAConv``."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Optional, Union

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import ModuleList, Sequential
from torch_geometric.nn.conv import MessagePassing
from torch_geometric.nn.dense.linear import Linear
from torch_geometric.nn.inits import reset
from torch_geometric.nn.resolver import activation_resolver

from pyg_agg.nn.aggr.degree_scaler import (
    AGGREGATORS,
    SCALERS,
    STD_MODES,
    DegreeScalerAggregation,
    parse_names,
)
from pyg_agg.ops import check_index, read_edges, segment_counts, target_csr


def _tower_linear(inp: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """All towers' linear maps in one matmul.

    ``inp`` is ``[R, T, Fin]`` (one input per tower) or ``[R, Fin]`` (shared by
    all towers); ``weight`` is ``[T, Fout, Fin]``, ``bias`` ``[T, Fout]``.
    Returns ``[R, T, Fout]``.
    """
    towers, f_out, f_in = weight.shape
    if inp.dim() == 2 or towers == 1:
        flat_bias = None if bias is None else bias.reshape(-1)
        out = F.linear(inp.reshape(inp.size(0), f_in), weight.reshape(-1, f_in), flat_bias)
        return out.view(-1, towers, f_out)
    out = torch.einsum("rtf,tof->rto", inp, weight)
    return out if bias is None else out + bias


class PNAConv(MessagePassing):
    r"""The Principal Neighbourhood Aggregation operator from the
    `"Principal Neighbourhood Aggregation for Graph Nets"
    <https://arxiv.org/abs/2004.05718>`_ paper (Corso et al., NeurIPS 2020),
    a faster drop-in for :class:`torch_geometric.nn.PNAConv`.

    .. math::
        \mathbf{x}_i^{\prime} = \mathbf{W} \, \big\Vert_{t=1}^{T}
        \gamma_t\Big(\mathbf{x}_i^{(t)},
        \underset{j \in \mathcal{N}(i)}{\bigoplus}
        h_t\big(\mathbf{x}_i^{(t)}, \mathbf{x}_j^{(t)}, \mathbf{e}_{ji}\big)\Big)

    with :math:`T` towers, MLPs :math:`h_t` (``pre_layers``) and
    :math:`\gamma_t` (``post_layers``), and

    .. math::
        \bigoplus = \underbrace{\begin{bmatrix} 1 \\ S(d, \alpha=1) \\
        S(d, \alpha=-1) \\ \vdots \end{bmatrix}}_{\text{scalers}}
        \otimes \underbrace{\begin{bmatrix} \mu \\ \sigma \\ \max \\ \min \\
        \vdots \end{bmatrix}}_{\text{aggregators}}, \qquad
        S(d, \alpha) = \left(\frac{\log(d + 1)}{\delta}\right)^{\alpha},

    where :math:`d` is the in-degree and :math:`\delta` the mean of
    :math:`\log(d + 1)` over the training graphs (from ``deg``). ``linear`` and
    ``inverse_linear`` use :math:`d / \delta_{lin}` and its inverse, with
    :math:`\delta_{lin}` the mean degree.

    Parameters, ``state_dict`` keys and shapes, ``repr`` and outputs are
    those of PyG's ``PNAConv`` (torch-geometric 2.8), so
    ``ours.load_state_dict(theirs.state_dict())`` works. The computation is
    reorganised, not approximated:

    * the first pre-layer :math:`W[\mathbf{x}_i \Vert \mathbf{x}_j \Vert
      \mathbf{e}]` is split into :math:`W_i\mathbf{x}_i + W_j\mathbf{x}_j +
      W_e\mathbf{e}`; the node terms are computed on :math:`N` rows and
      gathered per edge, the edge encoder is folded into :math:`W_e`;
    * all towers run in one matmul on a stacked view of their weights;
    * all aggregators come from one fused statistics pass; with a single
      pre-layer (the default) the pass reads :math:`W_j\mathbf{x}_j` per
      edge in gather form over the target-sorted edges, and the per-node
      term :math:`W_i\mathbf{x}_i + b` shifts the results afterwards
      (mean, min, max by it, the sum by :math:`d_i` times it, the spread not
      at all), so no :math:`E \times F` message exists, forward or
      backward, without edge features (see
      :meth:`~pyg_agg.nn.aggr.DegreeScalerAggregation.gathered_statistics`);
    * the scalers are applied after the first post-layer's matmul, by
      linearity :math:`W(s \otimes a) = \sum_s s\,(W_s a)`, as one broadcast
      multiply on :math:`N \times S \times F_{out}` values instead of
      materialising the :math:`N \times S \cdot A \cdot F` scaled input;
    * with one tower and one post-layer, the final ``lin`` is folded into the
      post-layer's weights, :math:`(W_{lin} W_{post})\,h + W_{lin} b + b_{lin}`,
      in place of one more matmul over the :math:`N` output rows (when the
      rows outnumber the post-layer's input width, so that the fold is the
      cheaper of the two).

    Aggregators: ``"mean"``, ``"sum"``, ``"min"``, ``"max"``, ``"var"``,
    ``"std"``, and the paper's ``"moment3"``, ``"moment4"``, ``"moment5"``
    (:math:`M_n = \operatorname{sign}(m)(|m| + \epsilon)^{1/n}`,
    :math:`m = \mathbb{E}[(x - \mu)^n]`; extras that PyG lacks).
    ``std`` follows ``std_mode``: ``"pyg"`` (default, PyG's values)
    :math:`\sqrt{\max(\sigma^2, \epsilon)}`, set to 0 where
    :math:`\le \sqrt{\epsilon}`; or ``"eps"`` (the paper)
    :math:`\sqrt{\mathrm{relu}(\sigma^2) + \epsilon}`, with
    :math:`\epsilon = 10^{-5}`. Nodes without in-edges aggregate to 0.

    Args:
        in_channels (int): Size of each input sample.
        out_channels (int): Size of each output sample (divisible by
            ``towers``).
        aggregators (List[str]): Aggregator names (see above).
        scalers (List[str]): Scaler names: ``"identity"``,
            ``"amplification"``, ``"attenuation"``, ``"linear"``,
            ``"inverse_linear"``.
        deg (torch.Tensor, optional): Histogram of the training graphs'
            in-degrees (``deg[k]`` = number of nodes with in-degree ``k``);
            see :meth:`get_degree_histogram`. Required unless the only scaler
            is ``"identity"``.
        edge_dim (int, optional): Edge feature dimensionality.
            (default: :obj:`None`)
        towers (int, optional): Number of towers. (default: :obj:`1`)
        pre_layers (int, optional): Linear layers before aggregation.
            (default: :obj:`1`)
        post_layers (int, optional): Linear layers after aggregation.
            (default: :obj:`1`)
        divide_input (bool, optional): Split the input features between
            the towers instead of giving each tower all of them.
            (default: :obj:`False`)
        act (str or callable, optional): Activation between pre- and
            post-layers. (default: :obj:`"relu"`)
        act_kwargs (Dict[str, Any], optional): Arguments of ``act``.
        train_norm (bool, optional): Make the degree normalisers
            trainable. (default: :obj:`False`)
        std_mode (str, optional): ``"pyg"`` or ``"eps"``, see above.
            (default: :obj:`"pyg"`)
        **kwargs (optional): Arguments of
            :class:`torch_geometric.nn.conv.MessagePassing` (e.g. ``flow``).

    Shapes:
        - **input:** node features :math:`(|\mathcal{V}|, F_{in})`, edge
          indices :math:`(2, |\mathcal{E}|)` (or a sparse adjacency
          ``adj_t``), edge features :math:`(|\mathcal{E}|, D)` *(optional)*
        - **output:** node features :math:`(|\mathcal{V}|, F_{out})`

    ``flow`` and PyG's explain mode (an explainer's edge mask weights each
    message) work as in PyG; ``forward`` does not go through
    :meth:`propagate`, so the propagate/message hooks are not called.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        aggregators: list[str],
        scalers: list[str],
        deg: Optional[Tensor] = None,
        edge_dim: Optional[int] = None,
        towers: int = 1,
        pre_layers: int = 1,
        post_layers: int = 1,
        divide_input: bool = False,
        act: Union[str, Callable, None] = "relu",
        act_kwargs: Optional[dict[str, Any]] = None,
        train_norm: bool = False,
        std_mode: str = "pyg",
        **kwargs,
    ):
        aggregators = parse_names(aggregators, AGGREGATORS, "aggregators")
        scalers = parse_names(scalers, SCALERS, "scalers")
        if std_mode not in STD_MODES:
            raise ValueError(f"`std_mode` must be one of {STD_MODES}, got {std_mode!r}")
        for name, value in (("in_channels", in_channels), ("out_channels", out_channels),
                            ("towers", towers), ("pre_layers", pre_layers),
                            ("post_layers", post_layers)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"`{name}` must be a positive integer, got {value!r}")
        if edge_dim is not None and (not isinstance(edge_dim, int) or edge_dim < 1):
            raise ValueError(f"`edge_dim` must be None or a positive integer, got {edge_dim!r}")
        if out_channels % towers:
            raise ValueError(f"`out_channels` ({out_channels}) must be divisible by "
                             f"`towers` ({towers})")
        if divide_input and in_channels % towers:
            raise ValueError(f"`in_channels` ({in_channels}) must be divisible by "
                             f"`towers` ({towers}) when `divide_input=True`")

        aggr = DegreeScalerAggregation(aggregators, scalers, deg, train_norm, std_mode=std_mode)
        super().__init__(aggr=aggr, node_dim=0, **kwargs)

        self.in_channels = in_channels
        self.out_channels = out_channels
        self.edge_dim = edge_dim
        self.towers = towers
        self.divide_input = divide_input
        self.aggregators = aggregators
        self.scalers = scalers
        self.std_mode = std_mode

        self.F_in = in_channels // towers if divide_input else in_channels
        self.F_out = out_channels // towers

        if edge_dim is not None:
            self.edge_encoder = Linear(edge_dim, self.F_in)

        def mlp(first_in: int, width: int, layers: int) -> Sequential:
            modules = [Linear(first_in, width)]
            for _ in range(layers - 1):
                modules += [activation_resolver(act, **(act_kwargs or {})), Linear(width, width)]
            return Sequential(*modules)

        # Same modules in the same order as PyG: identical keys, shapes and init.
        self.pre_nns = ModuleList()
        self.post_nns = ModuleList()
        post_in = (len(aggregators) * len(scalers) + 1) * self.F_in
        for _ in range(towers):
            self.pre_nns.append(mlp((3 if edge_dim else 2) * self.F_in, self.F_in, pre_layers))
            self.post_nns.append(mlp(post_in, self.F_out, post_layers))
        self.lin = Linear(out_channels, out_channels)

        self.reset_parameters()

    def reset_parameters(self) -> None:
        super().reset_parameters()
        if self.edge_dim is not None:
            self.edge_encoder.reset_parameters()
        for nn in self.pre_nns:
            reset(nn)
        for nn in self.post_nns:
            reset(nn)
        self.lin.reset_parameters()

    def _tower_weights(self, mlps: ModuleList, position: int) -> tuple[Tensor, Tensor]:
        """Layer ``position`` of every tower's MLP as ``[T, Fout, Fin]``, ``[T, Fout]``."""
        layers = [mlp[position] for mlp in mlps]
        if len(layers) == 1:  # a view, not a stacked copy (and no copy back in backward)
            return layers[0].weight.unsqueeze(0), layers[0].bias.unsqueeze(0)
        return (torch.stack([layer.weight for layer in layers]),
                torch.stack([layer.bias for layer in layers]))

    @staticmethod
    def _activate(h: Tensor, mlps: ModuleList, position: int) -> Tensor:
        """Applies the activation at ``position`` to ``h`` ``[R, T, F]``, all
        towers at once unless it has per-tower parameters (e.g. PReLU)."""
        acts = [mlp[position] for mlp in mlps]
        if not any(True for _ in acts[0].parameters()):
            return acts[0](h)
        return torch.stack([act(h[:, t]) for t, act in enumerate(acts)], dim=1)

    def _run_mlp_tail(self, h: Tensor, mlps: ModuleList) -> Tensor:
        """Layers 2.. of the towers' MLPs on ``h`` ``[R, T, F]``."""
        for position in range(2, len(mlps[0]), 2):
            h = self._activate(h, mlps, position - 1)
            h = _tower_linear(h, *self._tower_weights(mlps, position))
        return h

    def _edge_term(self, edge_attr: Tensor, w_edge: Tensor) -> Tensor:
        """``W_e (encoder(e))`` without the encoder's bias (folded into the node
        term), ``[E, T * F_in]``, in the cheaper association."""
        enc = self.edge_encoder.weight  # [F_in, edge_dim]
        towers_width = w_edge.size(0)
        if self.edge_dim * (towers_width - self.F_in) <= towers_width * self.F_in:
            return edge_attr @ (w_edge @ enc).t()  # encoder folded into W_e
        return (edge_attr @ enc.t()) @ w_edge.t()

    def _explain_edge_mask(self, num_edges: int) -> Optional[Tensor]:
        """The explainer's per-edge weight (PyG's explain mode), or None."""
        if not self.explain:
            return None
        mask = self._edge_mask
        if mask is None or mask.numel() != num_edges:
            raise ValueError(f"explain mode needs an edge mask of {num_edges} entries (one per edge), "
                             f"got {None if mask is None else mask.numel()}")
        return mask.sigmoid() if self._apply_sigmoid else mask

    def forward(self, x: Tensor, edge_index: Any, edge_attr: Optional[Tensor] = None) -> Tensor:
        """Returns the ``[N, out_channels]`` node embeddings."""
        if not isinstance(x, Tensor) or x.dim() != 2 or x.size(1) != self.in_channels:
            shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(f"`x` must have shape [num_nodes, {self.in_channels}], got {shape}")
        num_nodes, towers, f_in = x.size(0), self.towers, self.F_in
        width = towers * f_in
        edges = read_edges(edge_index, num_nodes, num_nodes, self.flow)
        if edge_attr is None and edges.values is not None and edges.values.dim() > 1:
            edge_attr = edges.values  # a sparse adjacency's feature values
        source, target = edges.source, edges.target
        if (edge_attr is None) != (self.edge_dim is None):
            raise ValueError("`edge_attr` must be given exactly when `edge_dim` is set "
                             f"(edge_dim={self.edge_dim}, edge_attr "
                             f"{'given' if edge_attr is not None else 'missing'})")
        if edge_attr is not None:
            edge_attr = edge_attr.view(-1, 1) if edge_attr.dim() == 1 else edge_attr
            if edge_attr.shape != (source.numel(), self.edge_dim):
                raise ValueError(f"`edge_attr` must have shape [{source.numel()}, "
                                 f"{self.edge_dim}], got {tuple(edge_attr.shape)}")
        # [N, T, F_in] per tower, or [N, F_in] shared by all towers.
        x_towers = x.view(num_nodes, towers, f_in) if self.divide_input else x

        # First pre-layer W [x_i || x_j || e] + b = (W_i x_i + b') + W_j x_j + W_e e:
        # the node terms cost N rows instead of E, then one gather each. The
        # first post-layer's x part W_x x + b is a third map of x: all three
        # are one matmul, forward and backward.
        weight, bias = self._tower_weights(self.pre_nns, 0)
        post_weight, post_bias = self._tower_weights(self.post_nns, 0)
        # One tower and one post-layer: the final `lin` folds into it,
        # W_lin (W_post h + b_post) + b_lin. The product of the weights costs
        # F_out^2 K multiply-adds (K = post_weight's width), the matmul it
        # replaces N F_out^2: fold when N >= K (always when compiled, so that
        # no guard depends on N).
        fold_lin = (towers == 1 and len(self.post_nns[0]) == 1
                    and (torch.compiler.is_compiling() or num_nodes >= post_weight.size(-1)))
        if fold_lin:
            post_weight = (self.lin.weight @ post_weight[0]).unsqueeze(0)
            post_bias = torch.addmv(self.lin.bias, self.lin.weight, post_bias[0]).unsqueeze(0)
        w_edge = None
        if edge_attr is not None:
            w_edge = weight[..., 2 * f_in:].reshape(towers * f_in, f_in)
            bias = bias + (w_edge @ self.edge_encoder.bias).view(towers, f_in)
        num_scalers, f_out = len(self.scalers), self.F_out
        node_terms = _tower_linear(
            x_towers,
            torch.cat([weight[..., :f_in], weight[..., f_in:2 * f_in], post_weight[..., :f_in]], 1),
            torch.cat([bias, torch.zeros_like(bias), post_bias], 1))
        target_term, source_term, post_term = node_terms.split([f_in, f_in, f_out], dim=-1)
        target_term = target_term.reshape(num_nodes, width)
        source_term = source_term.reshape(num_nodes, width)
        edge_mask = self._explain_edge_mask(source.numel())
        graph = target_csr(edges)  # sorted once per graph
        # the nodes grouped by degree for the post-layer (see scaled_linear), or None
        groups = self.aggr_module.degree_groups(graph.ptr)
        if len(self.pre_nns[0]) == 1 and self.aggr_module.gathers and edge_mask is None:
            # One linear pre-layer: aggregate W_j x_j + W_e e in gather form over
            # the target-sorted edges and add W_i x_i + b per node afterwards, so
            # no [E, F] message exists (but W_e e). The statistics come out
            # grouped by degree, ready for the post-layer.
            edge_term = None
            if edge_attr is not None:
                edge_term = self._edge_term(graph.to_csr_order(edge_attr), w_edge)
            stacked, count = self.aggr_module.gathered_statistics(
                source_term, graph.ptr, graph.col, edge_term, target_term, groups)
        else:
            h = target_term.index_select(0, target)
            h += source_term.index_select(0, source)
            if edge_attr is not None:
                h += self._edge_term(edge_attr, w_edge)
            h = self._run_mlp_tail(h.view(h.size(0), towers, f_in), self.pre_nns)
            h = h.reshape(h.size(0), width)
            if edge_mask is not None:  # as PyG's explain_message: weight each message
                h = h * edge_mask.unsqueeze(-1)
            stacked, count = self.aggr_module.statistics(h, target, num_nodes)
            if groups is not None:
                stacked = stacked.index_select(0, groups.order)
        num_aggr = len(self.aggregators)
        stacked = stacked.view(num_nodes, num_aggr, towers, f_in).transpose(1, 2)

        # First post-layer on [x || s_1 a || s_2 a || ...], with the scalers s
        # applied after the matmul: W [x || s (x) a] = W_x x + sum_s s (W_s a).
        w_aggr = post_weight[..., f_in:].reshape(towers, f_out, num_scalers, num_aggr * f_in)
        out = self.aggr_module.scaled_linear(stacked.reshape(num_nodes, towers, num_aggr * f_in),
                                             count, w_aggr.transpose(1, 2), groups, add=post_term)
        if fold_lin:
            return out.view(num_nodes, self.out_channels)
        out = self._run_mlp_tail(out, self.post_nns)
        return self.lin(out.reshape(num_nodes, self.out_channels))

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"towers={self.towers}, edge_dim={self.edge_dim})")

    @staticmethod
    def get_degree_histogram(loader: Iterable[Any]) -> Tensor:
        r"""In-degree histogram for the ``deg`` argument: ``out[k]`` is the
        number of nodes with ``k`` incoming edges over all graphs.

        Args:
            loader: A graph (``Data``/``Batch``), or an iterable of them (a
                dataset, a list, a ``DataLoader``).
        """
        graphs = [loader] if hasattr(loader, "edge_index") else loader
        hist = torch.zeros(1, dtype=torch.long)
        seen = 0
        for number, data in enumerate(graphs):
            num_nodes = int(data.num_nodes)
            target = data.edge_index[1]
            check_index(target, target, 0, num_nodes, name=f"edge_index[1] of graph {number}")
            counts = segment_counts(target, num_nodes).cpu()
            bins = torch.bincount(counts, minlength=hist.numel())
            bins[:hist.numel()] += hist
            hist, seen = bins, seen + 1
        if seen == 0:
            raise ValueError("`loader` yielded no graphs: cannot build a degree histogram")
        return hist


__all__ = ["PNAConv"]
