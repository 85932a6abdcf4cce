"""Study: the PNA paper's multitask benchmark (Corso et al., NeurIPS 2020, Figure 2).

The paper's setup (its ``multitask_benchmark`` code): :class:`~pyg_agg.datasets.PNAMultitask`
with the paper's generator, 10 x 512 training graphs of 15-24 nodes, 5 x 128
validation and 5 x 256 test graphs of 15-19 nodes, one group per size, every
label divided by its training maximum. One optimiser step per training group
(the whole group is the batch), groups in size order. The network: a first
convolution (2 -> 16 channels), then one weight-tied convolution repeated, for
``N // 2`` convolutions on graphs of ``N`` nodes; a LeakyReLU after each (the
paper's mixing layer) and a GRU cell (input: the layer's input, zero-padded;
state: the convolution's output); a 3-layer LeakyReLU MLP per node and a
Set2Set readout of ``N`` steps with a 3-layer MLP (ReLU and batch norm inside)
per graph; every linear layer initialised as the paper does (Xavier uniform
with gain ``1 / fan_in``, zero bias). Loss: the mean of the node MSE and the
graph MSE. Adam 3e-3, weight decay 1e-6, up to 10,000 epochs, stopped after
1,000 epochs without a better validation loss (the mean over the six tasks and
the size groups of the MSE); the best validation epoch's weights are tested.

Models: ``PNA`` (pyg_agg's :class:`~pyg_agg.nn.PNAConv`: mean, min, max, std ×
identity, amplification, attenuation; 4 towers, the first layer on the whole
input and the others on a slice per tower; the paper's std), ``PNA (no
scalers)`` (identity only), ``MPNN (sum)`` and ``MPNN (max)`` (one aggregator,
identity), and PyG's ``GCN``, ``GAT`` (4 heads) and ``GIN`` convolutions in the
same network (the paper's own GCN, GAT and GIN layers differ in details).

Reported: log10 of the test MSE per task and their mean (``average``), the
same for the mean predictor (the training labels' mean, in the same units, as
the paper's code prints it), and the average on the extrapolation sets of
larger graphs (``n=20-24`` ... ``n=45-49``, 5 x 256 graphs each). Only the
validation split picks the epoch. The validation curve of every model is in
the results' ``details`` and plotted next to the results file.
"""
from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.data import Batch
from torch_geometric.nn import GATConv, GCNConv, GINConv
from torch_geometric.nn.aggr import Set2Set
from torch_geometric.nn.dense.linear import Linear as PyGLinear
from tqdm.auto import tqdm

from pyg_agg.datasets import PNAMultitask
from pyg_agg.datasets.pna_multitask import GRAPH_TASKS, NODE_TASKS
from pyg_agg.nn import PNAConv
from pyg_agg.pipelines.report import plot_by_epoch
from pyg_agg.pipelines.study import (
    Study,
    Trainee,
    resolve_device,
    run_study,
    study_parser,
)

DOCS_PAGE = "pna.md"
NAME = "pna_multitask"
TASKS = NODE_TASKS + GRAPH_TASKS
AGGREGATORS = ["mean", "min", "max", "std"]
SCALERS = ["identity", "amplification", "attenuation"]
#: The PNA-family models: their aggregators and scalers.
PNA_VARIANTS = {"PNA": (AGGREGATORS, SCALERS), "PNA (no scalers)": (AGGREGATORS, ["identity"]),
                "MPNN (sum)": (["sum"], ["identity"]), "MPNN (max)": (["max"], ["identity"])}
MODELS = (*PNA_VARIANTS, "GCN", "GAT", "GIN")
MEAN_PREDICTOR = "mean predictor"
#: Averages of log10 test MSE read off the paper's Figure 2 (arXiv v1 of Corso et al.).
PAPER = {"PNA": {"average": -2.97}, "PNA (no scalers)": {"average": -2.68},
         "MPNN (sum)": {"average": -2.46}, "MPNN (max)": {"average": -2.20},
         "GAT": {"average": -2.10}, "GCN": {"average": -1.90}, "GIN": {"average": -1.86}}


@dataclass(frozen=True)
class Settings:
    """Everything that decides the numbers; the defaults are the paper's protocol."""

    models: tuple[str, ...] = MODELS
    train_graphs: int = 5_120
    val_graphs: int = 640
    test_graphs: int = 1_280
    extrapolation_sizes: tuple[tuple[int, int], ...] = tuple((n, n + 4)
                                                             for n in range(20, 50, 5))
    extrapolation_graphs: int = 1_280
    hidden: int = 16
    towers: int = 4
    readout_layers: int = 3
    lr: float = 3e-3
    weight_decay: float = 1e-6
    max_epochs: int = 10_000
    patience: int = 1_000
    seed: int = 0
    #: The heads' last activation: the paper's LeakyReLU, or none (a diagnostic:
    #: the Laplacian labels are signed, see docs/pna.md).
    final_activation: str = "leaky_relu"
    #: The linear layers' initialisation: the paper's (Xavier uniform, gain
    #: 1 / fan_in, zero bias), or each layer's own PyTorch/PyG default (a
    #: diagnostic: at the paper's, the node-to-node signal vanishes through
    #: the weight-tied layers, see docs/pna.md).
    init: str = "paper"


FINAL_ACTIVATIONS = {"leaky_relu": nn.LeakyReLU, "none": nn.Identity}
INITS = ("paper", "torch")
CPU_BUDGET = Settings(max_epochs=1_000, patience=200)
#: What the reduced budgets cut from the paper's protocol.
REDUCED_BUDGETS = {"cpu": f"the paper's data and model, at most {CPU_BUDGET.max_epochs:,} "
                          f"epochs with patience {CPU_BUDGET.patience}"}
BUDGETS = {"full": Settings(),
           "cpu": CPU_BUDGET,
           "small": Settings(train_graphs=40, val_graphs=10, test_graphs=10,
                             extrapolation_sizes=((20, 24), (25, 29)), extrapolation_graphs=10,
                             hidden=8, max_epochs=3, patience=2)}


def make_conv(model: str, in_channels: int, out_channels: int, towers: int, deg: Tensor,
              first: bool) -> nn.Module:
    """One convolution of ``model``; ``first`` for the layer on the input features."""
    if model in PNA_VARIANTS:
        aggregators, scalers = PNA_VARIANTS[model]
        return PNAConv(in_channels, out_channels, aggregators, scalers, deg=deg, towers=towers,
                       divide_input=not first, std_mode="eps")
    if model == "GCN":
        return GCNConv(in_channels, out_channels)
    if model == "GAT":
        return GATConv(in_channels, out_channels // towers, heads=towers)
    if model == "GIN":
        return GINConv(nn.Sequential(nn.Linear(in_channels, out_channels), nn.ReLU(),
                                     nn.Linear(out_channels, out_channels)))
    raise ValueError(f"Unknown model {model!r}: expected one of {MODELS}")


def readout_mlp(in_channels: int, hidden: int, out_channels: int, layers: int,
                mid: Callable[[], nn.Module], last: Callable[[], nn.Module]) -> nn.Sequential:
    """``layers`` linear layers, ``mid()`` after each but the last, ``last()`` at the end."""
    sizes = [in_channels] + [hidden] * (layers - 1) + [out_channels]
    modules: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:], strict=False)):
        modules += [nn.Linear(a, b), mid() if i < layers - 1 else last()]
    return nn.Sequential(*modules)


class MultitaskNet(nn.Module):
    """The paper's network around the convolutions of ``model`` (see the module)."""

    def __init__(self, model: str, hidden: int, towers: int, readout_layers: int,
                 deg: Tensor, final_activation: str = "leaky_relu", init: str = "paper") -> None:
        super().__init__()
        if final_activation not in FINAL_ACTIVATIONS:
            raise ValueError(f"`final_activation` must be one of {tuple(FINAL_ACTIVATIONS)}, "
                             f"got {final_activation!r}")
        if init not in INITS:
            raise ValueError(f"`init` must be one of {INITS}, got {init!r}")
        last = FINAL_ACTIVATIONS[final_activation]
        self.hidden = hidden
        self.first = make_conv(model, 2, hidden, towers, deg, first=True)
        self.middle = make_conv(model, hidden, hidden, towers, deg, first=False)
        self.gru = nn.GRUCell(hidden, hidden)
        self.node_head = readout_mlp(hidden, hidden, len(NODE_TASKS), readout_layers,
                                     nn.LeakyReLU, last)
        self.set2set = Set2Set(hidden, processing_steps=1)
        self.graph_head = readout_mlp(2 * hidden, hidden, len(GRAPH_TASKS), readout_layers,
                                      lambda: nn.Sequential(nn.ReLU(), nn.BatchNorm1d(hidden)),
                                      last)
        if init == "paper":  # the paper's FCLayer initialisation
            for module in self.modules():
                if isinstance(module, (nn.Linear, PyGLinear)):
                    nn.init.xavier_uniform_(module.weight, gain=1 / module.weight.size(1))
                    if module.bias is not None:
                        nn.init.zeros_(module.bias)

    def forward(self, batch: Batch, num_nodes: int) -> tuple[Tensor, Tensor]:
        """Node and graph predictions for ``batch``, whose graphs all have ``num_nodes`` nodes."""
        x = batch.x
        for layer in range(num_nodes // 2):
            conv = self.first if layer == 0 else self.middle
            out = F.leaky_relu(conv(x, batch.edge_index))
            x = self.gru(F.pad(x, (0, self.hidden - x.size(-1))), out)
        self.set2set.processing_steps = num_nodes  # the paper runs Set2Set for N steps
        pooled = self.set2set(x, batch.batch, dim_size=batch.num_graphs)
        return self.node_head(x), self.graph_head(pooled)


Group = tuple[int, Batch]  # (nodes per graph, the graphs of that size)


def size_groups(dataset: PNAMultitask, device: torch.device) -> list[Group]:
    """The dataset's graphs batched by size, smallest first, as the paper feeds them."""
    by_size: dict[int, list[Any]] = {}
    for graph in dataset:
        by_size.setdefault(graph.num_nodes, []).append(graph)
    return [(n, Batch.from_data_list(graphs).to(device)) for n, graphs in sorted(by_size.items())]


Predictor = Callable[[Batch, int], tuple[Tensor, Tensor]]


def group_loss(predict: Predictor, group: Group) -> Tensor:
    """Per task, the MSE over the group's nodes (node tasks) or graphs (graph tasks)."""
    num_nodes, batch = group
    node, whole = predict(batch, num_nodes)
    return torch.cat([((node - batch.y_node) ** 2).mean(0),
                      ((whole - batch.y_graph) ** 2).mean(0)])


@torch.no_grad()
def task_mse(predict: Predictor, groups: list[Group]) -> Tensor:
    """Per task, the MSE averaged over the size groups (the paper's weighting)."""
    return torch.stack([group_loss(predict, group) for group in groups]).mean(0).cpu()


def mean_predictor(groups: list[Group]) -> Predictor:
    """Predicts the labels' mean over ``groups`` (each group weighing the same)."""
    mean = torch.stack([torch.cat([batch.y_node.mean(0), batch.y_graph.mean(0)])
                        for _, batch in groups]).mean(0)
    return lambda batch, _: (mean[:3].expand(batch.num_nodes, 3),
                             mean[3:].expand(batch.num_graphs, 3))


def log10_scores(mse: Tensor) -> dict[str, float]:
    """log10 MSE per task and their mean, ``average``."""
    logs = [math.log10(float(value)) for value in mse]
    return {**dict(zip(TASKS, logs, strict=True)), "average": sum(logs) / len(logs)}


def patience_ran_out(curve: list[float], patience: int) -> bool:
    """Whether the last ``patience`` epochs of ``curve`` did not beat its best before."""
    return len(curve) - 1 - curve.index(min(curve)) >= patience


def extrapolation_key(sizes: tuple[int, int]) -> str:
    return f"n={sizes[0]}-{sizes[1]}"


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Trains every model of ``args.models`` and writes the results file."""
    settings = replace(BUDGETS[args.budget], seed=args.seed,
                       final_activation=args.final_activation, init=args.init,
                       **({"models": tuple(args.models)} if args.models else {}))
    study = Study(NAME, DOCS_PAGE, settings, args, BUDGETS)
    device = resolve_device(args.device)
    s = settings

    @cache
    def groups(split: str, sizes: tuple[int, int] | None = None) -> list[Group]:
        count = {"train": s.train_graphs, "val": s.val_graphs,
                 "test": s.test_graphs if sizes is None else s.extrapolation_graphs}[split]
        return size_groups(PNAMultitask(split, count, sizes=sizes,
                                        num_train_graphs=s.train_graphs, seed=s.seed), device)

    deg = PNAConv.get_degree_histogram([batch for _, batch in groups("train")])

    def scores(predict: Predictor) -> dict[str, float]:
        result = log10_scores(task_mse(predict, groups("test")))
        for sizes in s.extrapolation_sizes:
            result[extrapolation_key(sizes)] = log10_scores(
                task_mse(predict, groups("test", sizes)))["average"]
        return result

    ours = {MEAN_PREDICTOR: scores(mean_predictor(groups("train")))}
    tqdm.write(f"{MEAN_PREDICTOR}, log10 test MSE of the labels / training max: "
               + ", ".join(f"{k} {v:.3f}" for k, v in ours[MEAN_PREDICTOR].items()))
    details: dict[str, dict[str, Any]] = {}
    for name in s.models:
        def build(name=name) -> Trainee:
            model = MultitaskNet(name, s.hidden, s.towers, s.readout_layers, deg,
                                 s.final_activation, s.init).to(device)
            optimizer = torch.optim.Adam(model.parameters(), lr=s.lr,
                                         weight_decay=s.weight_decay)
            return Trainee(model, optimizer, state={"validation": [], "best_model": None})

        def train_epoch(trainee: Trainee, epoch: int) -> dict[str, float]:
            model, optimizer = trainee.model, trainee.optimizer
            model.train()
            losses = []
            for group in groups("train"):
                optimizer.zero_grad()
                loss = group_loss(model, group)
                total = (loss[:3].mean() + loss[3:].mean()) / 2
                total.backward()
                optimizer.step()
                losses.append(float(total.detach()))
            model.eval()
            val = float(task_mse(model, groups("val")).mean())
            curve = trainee.state["validation"]
            if not curve or val < min(curve):
                trainee.state["best_model"] = {k: v.detach().clone()
                                               for k, v in model.state_dict().items()}
            curve.append(val)
            return {"loss": sum(losses) / len(losses), "val": val}

        def evaluate(trainee: Trainee, history: list[dict[str, float]]) -> dict[str, Any]:
            trainee.model.load_state_dict(trainee.state["best_model"])
            trainee.model.eval()
            curve = [row["val"] for row in history]
            return {"scores": scores(trainee.model), "validation": curve,
                    "best_epoch": 1 + curve.index(min(curve))}

        def finished(history: list[dict[str, float]]) -> bool:
            return patience_ran_out([row["val"] for row in history], s.patience)

        result, details[name] = study.unit(name, s.seed, build, train_epoch, evaluate,
                                           s.max_epochs, finished)
        ours[name] = result["scores"]
        details[name].update(validation=result["validation"], best_epoch=result["best_epoch"])
    plot_by_epoch({model: [math.log10(v) for v in detail["validation"]]
                   for model, detail in details.items() if detail.get("validation")},
                  "log10 validation MSE (mean over tasks)", study.results.with_suffix(".png"))
    return study.write_results({k: v for k, v in PAPER.items() if k in s.models}, ours, details)


def main(argv: list[str] | None = None) -> int:
    parser = study_parser(__doc__, NAME, DOCS_PAGE, MODELS, REDUCED_BUDGETS)
    parser.add_argument("--final-activation", choices=tuple(FINAL_ACTIVATIONS),
                        default=Settings.final_activation,
                        help="the heads' last activation: the paper's leaky_relu (default), "
                             "or none, a diagnostic for the signed Laplacian labels")
    parser.add_argument("--init", choices=INITS, default=Settings.init,
                        help="the linear layers' initialisation: the paper's (default), or "
                             "torch, each layer's own default (a diagnostic, see docs/pna.md)")
    return run_study(run, parser, argv)
