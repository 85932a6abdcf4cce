"""PNA vs. baselines on the PNA paper's multitask graph-theory benchmark.

Every model shares the paper's recipe: a linear embedding to ``hidden``
channels, ``--layers`` convolutions each followed by one GRU update (shared
over layers), a node head (3 node tasks) and a graph head on
``[mean || max]`` pooling (3 graph tasks), trained with Adam on the mean
squared error of the six standardised targets; the test MSE of the best
validation epoch is reported as log10 per task and averaged.

    python examples/pna_multitask.py                        # paper sizes
    python examples/pna_multitask.py --train-graphs 1024 --epochs 30
"""
from __future__ import annotations

import argparse
import copy
import time

import torch
from torch import Tensor, nn
from torch_geometric.loader import DataLoader
from torch_geometric.nn import GATConv, GCNConv, GINConv, global_max_pool, global_mean_pool

from pyg_agg.datasets import PNAMultitask
from pyg_agg.datasets.pna_multitask import GRAPH_TASKS, NODE_TASKS
from pyg_agg.nn import PNAConv

# Averages of log10 MSE read off the paper's Figure 2 (Corso et al., 2020).
PAPER_AVERAGE = {"PNA": -2.97, "PNA (no scalers)": -2.68, "MPNN (sum)": -2.46,
                 "MPNN (max)": -2.20, "GAT": -2.10, "GCN": -1.90, "GIN": -1.86}
MODELS = ("PNA", "PNA (no scalers)", "MPNN (sum)", "MPNN (mean)", "MPNN (max)", "GCN", "GAT",
          "GIN")


def make_conv(name: str, hidden: int, towers: int, deg: Tensor) -> nn.Module:
    if name == "PNA":
        return PNAConv(hidden, hidden, ["mean", "min", "max", "std"],
                       ["identity", "amplification", "attenuation"], deg=deg, towers=towers)
    if name == "PNA (no scalers)":
        return PNAConv(hidden, hidden, ["mean", "min", "max", "std"], ["identity"], towers=towers)
    if name.startswith("MPNN"):
        return PNAConv(hidden, hidden, [name[6:-1]], ["identity"], towers=towers)
    if name == "GCN":
        return GCNConv(hidden, hidden)
    if name == "GAT":
        return GATConv(hidden, hidden // towers, heads=towers)
    if name == "GIN":
        return GINConv(nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(),
                                     nn.Linear(hidden, hidden)))
    raise ValueError(f"Unknown model {name!r}: expected one of {MODELS}")


class MultitaskNet(nn.Module):
    def __init__(self, conv: str, layers: int, hidden: int, towers: int, deg: Tensor):
        super().__init__()
        self.embed = nn.Linear(2, hidden)
        self.convs = nn.ModuleList(make_conv(conv, hidden, towers, deg) for _ in range(layers))
        self.gru = nn.GRUCell(hidden, hidden)
        self.node_head = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(),
                                       nn.Linear(hidden, len(NODE_TASKS)))
        self.graph_head = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU(),
                                        nn.Linear(hidden, len(GRAPH_TASKS)))

    def forward(self, data) -> tuple[Tensor, Tensor]:
        h = self.embed(data.x)
        for conv in self.convs:
            h = self.gru(torch.relu(conv(h, data.edge_index)), h)
        pooled = torch.cat([global_mean_pool(h, data.batch), global_max_pool(h, data.batch)], 1)
        return self.node_head(h), self.graph_head(pooled)


def task_errors(model: nn.Module, loader: DataLoader) -> Tensor:
    """Mean squared error of each of the six tasks over ``loader``."""
    model.eval()
    sums, nodes, graphs = torch.zeros(6), 0, 0
    with torch.no_grad():
        for data in loader:
            node, whole = model(data)
            sums[:3] += ((node - data.y_node) ** 2).sum(0)
            sums[3:] += ((whole - data.y_graph) ** 2).sum(0)
            nodes, graphs = nodes + data.num_nodes, graphs + data.num_graphs
    return sums / torch.tensor([nodes] * 3 + [graphs] * 3)


def train_model(name: str, args, loaders, deg: Tensor) -> tuple[Tensor, float]:
    torch.manual_seed(args.seed)
    model = MultitaskNet(name, args.layers, args.hidden, args.towers, deg)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=5)
    best, best_state, start = float("inf"), None, time.perf_counter()
    for _ in range(args.epochs):
        model.train()
        for data in loaders["train"]:
            optimizer.zero_grad()
            node, whole = model(data)
            loss = (nn.functional.mse_loss(node, data.y_node, reduction="none").mean(0).sum()
                    + nn.functional.mse_loss(whole, data.y_graph, reduction="none").mean(0).sum())
            (loss / 6).backward()
            optimizer.step()
        val = float(task_errors(model, loaders["val"]).log10().mean())
        scheduler.step(val)
        if val < best:
            best, best_state = val, copy.deepcopy(model.state_dict())
    model.load_state_dict(best_state)
    return task_errors(model, loaders["test"]).log10(), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train-graphs", type=int, default=5120)
    parser.add_argument("--val-graphs", type=int, default=640)
    parser.add_argument("--test-graphs", type=int, default=1280)
    parser.add_argument("--extrapolation", action="store_true",
                        help="test on graphs of 25-50 nodes")
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--layers", type=int, default=4,
                        help="message-passing steps (the paper uses about N/2)")
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--towers", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    start = time.perf_counter()
    common = dict(num_train_graphs=args.train_graphs, seed=args.seed)
    splits = {"train": PNAMultitask("train", args.train_graphs, **common),
              "val": PNAMultitask("val", args.val_graphs, **common),
              "test": PNAMultitask("test", args.test_graphs, extrapolation=args.extrapolation,
                                   **common)}
    loaders = {k: DataLoader(v, batch_size=args.batch_size, shuffle=k == "train")
               for k, v in splits.items()}
    deg = PNAConv.get_degree_histogram(splits["train"])
    print(f"graphs train/val/test {[len(s) for s in splits.values()]}, generated in "
          f"{time.perf_counter() - start:.0f}s; {args.epochs} epochs, {args.layers} layers, "
          f"hidden {args.hidden}, {args.towers} towers, {torch.get_num_threads()} threads")

    tasks = ["sssp", "ecc", "lapl", "conn", "diam", "spec"]
    print(f"| model | {' | '.join(tasks)} | average | paper avg | train s |")
    print("|---" * (len(tasks) + 4) + "|")
    for name in args.models:
        errors, seconds = train_model(name, args, loaders, deg)
        paper = PAPER_AVERAGE.get(name)
        print(f"| {name} | " + " | ".join(f"{e:.2f}" for e in errors.tolist())
              + f" | {float(errors.mean()):.2f} | {'' if paper is None else paper} "
              + f"| {seconds:.0f} |", flush=True)
    print(f"total {time.perf_counter() - start:.0f}s")


if __name__ == "__main__":
    main()
