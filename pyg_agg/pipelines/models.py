"""Model factory: one network skeleton per task level, any convolution inside.

:data:`MODELS` is the registry: per model, how to build one convolution, whether
it takes edge features or a degree histogram, and which setting must divide the
hidden width (:func:`check_architecture` checks that before any work). Adding a
model is adding one entry.

``build_model(cfg, task)`` returns a :class:`GraphNet` (graph-level prediction:
node encoder -> L x [conv, batch norm, ReLU, dropout, residual] -> readout -> MLP
head) or a :class:`NodeNet` (node-level: L convolutions, the last one producing the
classes). OGB molecules are embedded with OGB's ``AtomEncoder``; their bonds with a
``BondEncoder`` per layer, as in OGB's reference examples.

Convolutions ``gatv2``, ``pna``, ``pna-simple`` and ``lcm`` and the ``histograph``
readout are this library's (:mod:`pyg_agg.nn`); ``gin``, ``gcn``, ``gat`` and ``sage`` are
PyG's baselines. ``gatv2-pyg``, ``pna-pyg`` and ``lcm-pyg`` are PyG's versions of this
library's layers, built with the same arguments and the same ``state_dict`` keys, so
one network's weights load into the other (the demo trains such pairs).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

import torch
from torch import Tensor, nn

from pyg_agg.datasets.task import GRAPH, TaskData
from pyg_agg.ops import read_edges, scatter, target_csr

if TYPE_CHECKING:  # config validates through this module, so it cannot be imported here
    from pyg_agg.pipelines.config import TrainConfig

READOUTS = ("mean", "sum", "max", "jk-cat", "histograph")
#: Graph-level prediction heads: ``mlp`` is Linear-ReLU-Dropout-Linear at the hidden
#: width; ``halving`` is the Benchmarking-GNNs ``MLPReadout`` (widths h, h/2, h/4, out)
#: that PNA's OGB code uses.
HEADS = ("mlp", "halving")
PNA_AGGREGATORS = ("mean", "min", "max", "std")
PNA_SCALERS = ("identity", "amplification", "attenuation")
#: The heads of the ``histograph`` readout, which must divide the hidden width.
HISTOGRAPH_HEADS = 4


@dataclass(frozen=True)
class ConvArgs:
    """What a convolution builder may use besides its input and output widths.

    ``concat``: attention heads are concatenated (each ``out // heads`` wide) rather
    than averaged; ``deg``: the degree histogram of the training graphs.
    """

    heads: int = 1
    concat: bool = True
    edge_dim: Optional[int] = None
    deg: Optional[Tensor] = None
    towers: int = 1


@dataclass(frozen=True)
class ModelSpec:
    """A model of the registry: how to build one convolution, and what it needs."""

    build: Callable[[int, int, ConvArgs], nn.Module]
    #: Takes edge features (through ``edge_dim``).
    edge_aware: bool = False
    #: Built on a degree histogram of the training graphs.
    needs_degree: bool = False
    #: The setting (``"heads"`` or ``"towers"``) that must divide the hidden width.
    divides_hidden: Optional[str] = None


def _attention(cls: type, in_channels: int, out_channels: int, args: ConvArgs) -> nn.Module:
    per_head = out_channels // args.heads if args.concat else out_channels
    return cls(in_channels, per_head, heads=args.heads, concat=args.concat,
               edge_dim=args.edge_dim)


def _gatv2(in_channels: int, out_channels: int, args: ConvArgs) -> nn.Module:
    from pyg_agg.nn import GATv2Conv

    return _attention(GATv2Conv, in_channels, out_channels, args)


def _gatv2_pyg(in_channels: int, out_channels: int, args: ConvArgs) -> nn.Module:
    from torch_geometric.nn import GATv2Conv

    return _attention(GATv2Conv, in_channels, out_channels, args)


def _gat(in_channels: int, out_channels: int, args: ConvArgs) -> nn.Module:
    from torch_geometric.nn import GATConv

    return _attention(GATConv, in_channels, out_channels, args)


def _degree(model: str, args: ConvArgs) -> Tensor:
    if args.deg is None:
        raise ValueError(f"model {model!r} needs a degree histogram 'deg'")
    return args.deg


def _pna_of(cls: type, model: str, in_channels: int, out_channels: int,
            args: ConvArgs) -> nn.Module:
    return cls(in_channels, out_channels, aggregators=list(PNA_AGGREGATORS),
               scalers=list(PNA_SCALERS), deg=_degree(model, args), edge_dim=args.edge_dim,
               towers=args.towers, pre_layers=1, post_layers=1, divide_input=False)


def _pna(in_channels: int, out_channels: int, args: ConvArgs) -> nn.Module:
    from pyg_agg.nn import PNAConv

    return _pna_of(PNAConv, "pna", in_channels, out_channels, args)


def _pna_pyg(in_channels: int, out_channels: int, args: ConvArgs) -> nn.Module:
    from torch_geometric.nn import PNAConv

    return _pna_of(PNAConv, "pna-pyg", in_channels, out_channels, args)


def _pna_simple(in_channels: int, out_channels: int, args: ConvArgs) -> nn.Module:
    return PNASimpleConv(in_channels, out_channels, _degree("pna-simple", args))


def _lcm(in_channels: int, out_channels: int, args: ConvArgs) -> nn.Module:
    from pyg_agg.nn import LCMConv

    return LCMConv(in_channels, out_channels)


def _lcm_pyg(in_channels: int, out_channels: int, args: ConvArgs) -> nn.Module:
    """``LCMConv`` as PyG composes it: a GINConv aggregating with PyG's LCMAggregation
    (which needs the edges sorted by target)."""
    from torch_geometric.nn import GINConv
    from torch_geometric.nn.aggr import LCMAggregation

    mlp = nn.Sequential(nn.Linear(in_channels, out_channels), nn.ReLU(),
                        nn.Linear(out_channels, out_channels))
    return GINConv(mlp, aggr=LCMAggregation(in_channels, in_channels))


def _gin(in_channels: int, out_channels: int, args: ConvArgs) -> nn.Module:
    from torch_geometric.nn import GINConv, GINEConv

    mlp = nn.Sequential(nn.Linear(in_channels, out_channels), nn.BatchNorm1d(out_channels),
                        nn.ReLU(), nn.Linear(out_channels, out_channels))
    if args.edge_dim is not None:
        return GINEConv(mlp, train_eps=True, edge_dim=args.edge_dim)
    return GINConv(mlp, train_eps=True)


def _gcn(in_channels: int, out_channels: int, args: ConvArgs) -> nn.Module:
    from torch_geometric.nn import GCNConv

    return GCNConv(in_channels, out_channels)


def _sage(in_channels: int, out_channels: int, args: ConvArgs) -> nn.Module:
    from torch_geometric.nn import SAGEConv

    return SAGEConv(in_channels, out_channels)


#: Every model ``pyg-agg train`` accepts; adding a model is adding an entry here.
MODELS: dict[str, ModelSpec] = {
    "gatv2": ModelSpec(_gatv2, edge_aware=True, divides_hidden="heads"),
    "pna": ModelSpec(_pna, edge_aware=True, needs_degree=True, divides_hidden="towers"),
    "pna-simple": ModelSpec(_pna_simple, needs_degree=True),
    "lcm": ModelSpec(_lcm),
    "gin": ModelSpec(_gin, edge_aware=True),
    "gcn": ModelSpec(_gcn),
    "gat": ModelSpec(_gat, edge_aware=True, divides_hidden="heads"),
    "sage": ModelSpec(_sage),
    "gatv2-pyg": ModelSpec(_gatv2_pyg, edge_aware=True, divides_hidden="heads"),
    "pna-pyg": ModelSpec(_pna_pyg, edge_aware=True, needs_degree=True, divides_hidden="towers"),
    "lcm-pyg": ModelSpec(_lcm_pyg),
}


def model_spec(model: str) -> ModelSpec:
    """The registry entry of ``model``; ValueError listing the valid ones if unknown."""
    if model not in MODELS:
        raise ValueError(f"Unknown model {model!r}. Valid models: {', '.join(MODELS)}")
    return MODELS[model]


def check_architecture(model: str, *, graph_level: bool, hidden: int, heads: int,
                       towers: int, readout: Optional[str], head: str) -> None:
    """ValueError naming the first setting that ``model`` (and, for graph tasks, the
    readout and head) cannot be built with."""
    spec = model_spec(model)
    if spec.divides_hidden is not None:
        divisor = {"heads": heads, "towers": towers}[spec.divides_hidden]
        if hidden % divisor:
            raise ValueError(f"hidden ({hidden}) must be divisible by {spec.divides_hidden} "
                             f"({divisor})")
    if not graph_level:
        return
    if readout not in READOUTS:
        raise ValueError(f"Unknown readout {readout!r}. Valid readouts: {', '.join(READOUTS)}")
    if head not in HEADS:
        raise ValueError(f"Unknown head {head!r}. Valid heads: {', '.join(HEADS)}")
    if head == "halving" and hidden < 4:
        raise ValueError(f"head 'halving' needs hidden >= 4 (widths h/2, h/4), got {hidden}")
    if readout == "histograph" and hidden % HISTOGRAPH_HEADS:
        raise ValueError(f"hidden ({hidden}) must be divisible by the {HISTOGRAPH_HEADS} heads "
                         "of the histograph readout")


def make_conv(model: str, in_channels: int, out_channels: int, *, heads: int = 1,
              concat: bool = True, edge_dim: Optional[int] = None,
              deg: Optional[Tensor] = None, towers: int = 1) -> nn.Module:
    """One convolution ``in_channels -> out_channels`` of the given kind.

    For attention models with ``concat=True`` each of the ``heads`` heads has
    ``out_channels // heads`` channels, so the output width is ``out_channels``.
    """
    args = ConvArgs(heads=heads, concat=concat, edge_dim=edge_dim, deg=deg, towers=towers)
    return model_spec(model).build(in_channels, out_channels, args)


def degree_histogram(task: TaskData) -> Tensor:
    """The in-degree histogram of the training graphs (the whole graph at node level)."""
    from pyg_agg.nn import PNAConv

    graphs = task.dataset[task.split["train"]] if task.level == GRAPH else [task.dataset]
    return PNAConv.get_degree_histogram(graphs)


def build_model(cfg: TrainConfig, task: TaskData) -> nn.Module:
    """The network for ``cfg.model`` on ``task`` (degree histogram from the train split)."""
    deg = degree_histogram(task) if model_spec(cfg.model).needs_degree else None
    if task.level == GRAPH:
        return GraphNet(cfg.model, task.num_features, cfg.hidden, task.num_outputs, cfg.layers,
                        cfg.dropout, cfg.readout, task.ogb_mol, task.edge_dim, heads=cfg.heads,
                        deg=deg, towers=cfg.towers, head=cfg.head,
                        dropout_after_residual=cfg.dropout_after_residual)
    return NodeNet(cfg.model, task.num_features, cfg.hidden, task.num_outputs, cfg.layers,
                   cfg.dropout, heads=cfg.heads, deg=deg, towers=cfg.towers)


class PNASimpleConv(nn.Module):
    r"""The "simple" PNA layer of the authors' OGB leaderboard code (Corso et al., 2020):
    the degree-scaled aggregates of the raw neighbour features, then one linear map,

    .. math::
        \mathbf{x}_i' = \mathbf{W} \big\Vert_{s} s(d_i) \big\Vert_{a}
        a\big(\{\mathbf{x}_j : j \in \mathcal{N}(i)\}\big) + \mathbf{b},

    with aggregators mean/min/max/std (the paper's std,
    :math:`\sqrt{\mathrm{relu}(\sigma^2) + 10^{-5}}`) and scalers
    identity/amplification/attenuation. Unlike :class:`pyg_agg.nn.PNAConv` it has no
    pre-transformation, no self term and no edge features. ``W`` starts as in that
    code: Xavier-uniform with gain ``1 / fan_in``, zero bias.

    Shapes: ``x`` ``[N, in_channels]``, ``edge_index`` ``[2, E]`` ->
    ``[N, out_channels]``.
    """

    def __init__(self, in_channels: int, out_channels: int, deg: Tensor) -> None:
        super().__init__()
        from pyg_agg.nn.aggr import DegreeScalerAggregation

        self.in_channels, self.out_channels = in_channels, out_channels
        self.aggr = DegreeScalerAggregation(list(PNA_AGGREGATORS), list(PNA_SCALERS), deg,
                                            std_mode="eps")
        width = len(PNA_AGGREGATORS) * len(PNA_SCALERS) * in_channels
        self.lin = nn.Linear(width, out_channels)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.aggr.reset_parameters()
        nn.init.xavier_uniform_(self.lin.weight, gain=1.0 / self.lin.in_features)
        nn.init.zeros_(self.lin.bias)

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        # the statistics read x[source] in gather form over the target-sorted
        # edges (sorted once per graph): no [E, F] message tensor exists
        num_nodes = x.size(0)
        graph = target_csr(read_edges(edge_index, num_nodes, num_nodes))
        groups = self.aggr.degree_groups(graph.ptr)  # the nodes by degree, or None
        stacked, count = self.aggr.gathered_statistics(x, graph.ptr, graph.col, None, None, groups)
        # W [s_1 a || s_2 a || s_3 a] (scaler-major, as PyG orders them) = sum_s s (W_s a)
        weight = self.lin.weight.view(1, self.out_channels, len(PNA_SCALERS), -1).transpose(1, 2)
        out = self.aggr.scaled_linear(stacked.reshape(num_nodes, 1, -1), count, weight, groups)
        return out.squeeze(1) + self.lin.bias

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels})"


def _call_conv(conv: nn.Module, x: Tensor, edge_index: Tensor,
               edge_attr: Optional[Tensor]) -> Tensor:
    return conv(x, edge_index) if edge_attr is None else conv(x, edge_index, edge_attr)


def _pool(x: Tensor, batch: Tensor, num_graphs: int, reduce: str) -> Tensor:
    return scatter(x, batch, dim=0, dim_size=num_graphs, reduce=reduce)


class GraphNet(nn.Module):
    r"""Graph-level predictor: encoder, ``num_layers`` residual conv blocks, readout, MLP.

    Block: :math:`h^{(l+1)} = h^{(l)} + \mathrm{Dropout}(\mathrm{ReLU}(\mathrm{BN}(
    \mathrm{conv}(h^{(l)}))))`, or with ``dropout_after_residual`` (PNA's OGB code)
    :math:`h^{(l+1)} = \mathrm{Dropout}(h^{(l)} + \mathrm{ReLU}(\mathrm{BN}(
    \mathrm{conv}(h^{(l)}))))`. Readouts: ``mean``/``sum``/``max`` pool the last layer;
    ``jk-cat`` mean-pools PyG's ``JumpingKnowledge("cat")`` of every layer (Xu et al.,
    2018); ``histograph`` reads the outputs of layers 1..L with
    :class:`pyg_agg.nn.HistoGraphReadout` (Galron et al., 2026).

    Shapes: ``data.x`` ``[N, F]`` (OGB: categorical ``[N, 9]``), ``data.edge_index``
    ``[2, E]``, optional ``data.edge_attr`` ``[E, D]``, ``data.batch`` ``[N]``;
    output ``[num_graphs, out_channels]``.
    """

    def __init__(self, model: str, in_channels: int, hidden: int, out_channels: int,
                 num_layers: int, dropout: float, readout: str, ogb_mol: bool,
                 edge_dim: Optional[int], heads: int = 1, deg: Optional[Tensor] = None,
                 towers: int = 1, head: str = "mlp", dropout_after_residual: bool = False) -> None:
        super().__init__()
        if head not in HEADS:
            raise ValueError(f"Unknown head {head!r}. Valid heads: {', '.join(HEADS)}")
        if ogb_mol:
            from ogb.graphproppred.mol_encoder import AtomEncoder, BondEncoder

            self.node_encoder: nn.Module = AtomEncoder(hidden)
            edge_encoder = BondEncoder
        else:
            self.node_encoder = nn.Linear(in_channels, hidden)

            def edge_encoder(dim: int) -> nn.Module:
                return nn.Linear(edge_dim, dim)
        use_edges = edge_dim is not None and model_spec(model).edge_aware
        self.edge_encoders = nn.ModuleList(
            [edge_encoder(hidden) for _ in range(num_layers)] if use_edges else [])
        self.convs = nn.ModuleList([
            make_conv(model, hidden, hidden, heads=heads, edge_dim=hidden if use_edges else None,
                      deg=deg, towers=towers) for _ in range(num_layers)])
        self.norms = nn.ModuleList([nn.BatchNorm1d(hidden) for _ in range(num_layers)])
        self.dropout = dropout
        self.dropout_after_residual = dropout_after_residual
        self.readout = readout
        self.in_channels = in_channels
        if readout == "jk-cat":
            from torch_geometric.nn import JumpingKnowledge

            self.jumping_knowledge = JumpingKnowledge("cat")
        if readout == "histograph":
            from pyg_agg.nn import HistoGraphReadout

            self.histograph = HistoGraphReadout(hidden, num_layers, hidden)
        pooled = hidden * (num_layers + 1) if readout == "jk-cat" else hidden
        if head == "mlp":
            self.head = nn.Sequential(nn.Linear(pooled, hidden), nn.ReLU(), nn.Dropout(dropout),
                                      nn.Linear(hidden, out_channels))
        else:
            self.head = nn.Sequential(nn.Linear(pooled, pooled // 2), nn.ReLU(),
                                      nn.Linear(pooled // 2, pooled // 4), nn.ReLU(),
                                      nn.Linear(pooled // 4, out_channels))

    def forward(self, data: Any) -> Tensor:
        x = data.x
        if x is None:  # featureless graphs (some TU sets): constant input
            x = torch.ones(data.num_nodes, self.in_channels, device=data.edge_index.device)
        h = self.node_encoder(x if x.dtype == torch.long else x.float())
        history = [h]
        for i, (conv, norm) in enumerate(zip(self.convs, self.norms, strict=True)):
            edge_attr = self.edge_encoders[i](data.edge_attr) if self.edge_encoders else None
            out = _call_conv(conv, h, data.edge_index, edge_attr)
            out = norm(out).relu()
            if self.dropout_after_residual:
                h = nn.functional.dropout(h + out, self.dropout, self.training)
            else:
                h = h + nn.functional.dropout(out, self.dropout, self.training)
            history.append(h)
        return self.head(self._read(history, data.batch, int(data.num_graphs)))

    def _read(self, history: list[Tensor], batch: Tensor, num_graphs: int) -> Tensor:
        if self.readout == "jk-cat":
            return _pool(self.jumping_knowledge(history), batch, num_graphs, "mean")
        if self.readout == "histograph":
            return self.histograph(history[1:], batch=batch, size=num_graphs)
        return _pool(history[-1], batch, num_graphs, self.readout)


class NodeNet(nn.Module):
    r"""Node-level predictor: ``num_layers`` convolutions with BN/ReLU/dropout between.

    Attention models use ``heads`` concatenated heads in hidden layers and ``heads``
    averaged heads in the output layer (as in the GAT/GATv2 papers). Shapes:
    ``x`` ``[N, F]``, ``edge_index`` ``[2, E]`` -> ``[N, out_channels]``.
    """

    def __init__(self, model: str, in_channels: int, hidden: int, out_channels: int,
                 num_layers: int, dropout: float, heads: int = 1,
                 deg: Optional[Tensor] = None, towers: int = 1) -> None:
        super().__init__()
        dims = [in_channels] + [hidden] * (num_layers - 1) + [out_channels]
        self.convs = nn.ModuleList()
        for i in range(num_layers):
            last = i == num_layers - 1
            self.convs.append(make_conv(model, dims[i], dims[i + 1], heads=heads,
                                        concat=not last, deg=deg,
                                        towers=1 if last else towers))
        self.norms = nn.ModuleList([nn.BatchNorm1d(hidden) for _ in range(num_layers - 1)])
        self.dropout = dropout

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        for conv, norm in zip(self.convs[:-1], self.norms, strict=True):
            x = nn.functional.dropout(x, self.dropout, self.training)
            x = norm(conv(x, edge_index)).relu()
        x = nn.functional.dropout(x, self.dropout, self.training)
        return self.convs[-1](x, edge_index)
