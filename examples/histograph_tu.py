"""HISTOGRAPH vs last-layer pooling and JumpingKnowledge on TU graph classification.

A GIN backbone (default 5 layers, hidden 64) with one of the readouts

* ``mean`` / ``sum``: global mean / sum pooling of the last layer,
* ``jk-cat`` / ``jk-max``: PyG's ``JumpingKnowledge`` over all layers, then
  sum pooling (with ``cat`` this is the GIN paper's readout),
* ``histograph``: :class:`pyg_agg.nn.HistoGraphReadout` over all layers,

each followed by the same 2-layer MLP classifier, trained with the same budget
(Adam, same epochs, batch size and learning rate, same seeds) under 10-fold
stratified cross-validation. Reported: the test accuracy of the last epoch of
each fold (no model selection on the test fold), mean ± std over folds, and
the training time. Also a depth sweep on one dataset, the readout's time
overhead against mean pooling on one batch, and (``--plot``) the layer
weights α of trained HISTOGRAPH models.

Example (full budget)::

    python examples/histograph_tu.py --root /work/shared/datasets

Reduced budget::

    python examples/histograph_tu.py --epochs 30 --folds-run 5 --depths 2 4 8 16
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.model_selection import StratifiedKFold
from torch import nn
from torch_geometric.loader import DataLoader
from torch_geometric.nn import GINConv, JumpingKnowledge, global_add_pool, global_mean_pool

from pyg_agg.datasets import load_tu
from pyg_agg.nn import HistoGraphReadout
from pyg_agg.nn.models import LayerHistoryGNN

READOUTS = ("mean", "sum", "jk-cat", "jk-max", "histograph")


class GINClassifier(nn.Module):
    """GIN backbone -> readout -> MLP classifier."""

    def __init__(self, in_channels: int, hidden: int, num_layers: int, num_classes: int,
                 readout: str, heads: int = 4) -> None:
        super().__init__()
        convs, norms = [], []
        for i in range(num_layers):
            mlp = nn.Sequential(nn.Linear(in_channels if i == 0 else hidden, hidden),
                                nn.BatchNorm1d(hidden), nn.ReLU(), nn.Linear(hidden, hidden))
            convs.append(GINConv(mlp, train_eps=True))
            norms.append(nn.BatchNorm1d(hidden))
        self.gnn = LayerHistoryGNN(convs, norms=norms)
        self.readout_name = readout
        graph_dim = hidden
        if readout.startswith("jk-"):
            mode = readout[3:]
            self.jk = JumpingKnowledge(mode)
            graph_dim = hidden * num_layers if mode == "cat" else hidden
        elif readout == "histograph":
            self.histograph = HistoGraphReadout(hidden, num_layers, hidden, heads=heads)
        elif readout not in ("mean", "sum"):
            raise ValueError(f"unknown readout {readout!r}: expected one of {READOUTS}")
        self.classifier = nn.Sequential(nn.Linear(graph_dim, hidden), nn.ReLU(),
                                        nn.Dropout(0.5), nn.Linear(hidden, num_classes))

    def embed(self, data, return_weights: bool = False):
        x, history = self.gnn(data.x, data.edge_index)
        if self.readout_name == "mean":
            return global_mean_pool(x, data.batch, data.num_graphs)
        if self.readout_name == "sum":
            return global_add_pool(x, data.batch, data.num_graphs)
        if self.readout_name == "histograph":
            return self.histograph(history, data.batch, size=data.num_graphs,
                                   return_weights=return_weights)
        return global_add_pool(self.jk(history), data.batch, data.num_graphs)

    def forward(self, data):
        return self.classifier(self.embed(data))


def run_fold(dataset, train_idx, test_idx, args, readout, num_layers, seed):
    torch.manual_seed(seed)
    model = GINClassifier(dataset.num_features, args.hidden, num_layers,
                          dataset.num_classes, readout)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    train_loader = DataLoader(dataset[train_idx], batch_size=args.batch_size, shuffle=True,
                              drop_last=len(train_idx) % args.batch_size == 1)
    test_loader = DataLoader(dataset[test_idx], batch_size=256)
    start = time.perf_counter()
    for _ in range(args.epochs):
        model.train()
        for data in train_loader:
            opt.zero_grad()
            F.cross_entropy(model(data), data.y).backward()
            opt.step()
    train_s = time.perf_counter() - start
    model.eval()
    correct = 0
    with torch.no_grad():
        for data in test_loader:
            correct += int((model(data).argmax(-1) == data.y).sum())
    return correct / len(test_idx), train_s, model


def cross_validate(dataset, args, readout, num_layers):
    folds = StratifiedKFold(n_splits=args.folds, shuffle=True, random_state=args.seed)
    accs, times, model, test_idx = [], [], None, None
    splits = list(folds.split(np.zeros(len(dataset)), dataset.y.numpy()))[: args.folds_run]
    for k, (train_idx, test_idx) in enumerate(splits):
        acc, train_s, model = run_fold(dataset, torch.as_tensor(train_idx),
                                       torch.as_tensor(test_idx), args, readout,
                                       num_layers, args.seed + k)
        accs.append(acc)
        times.append(train_s)
    return accs, times, model, dataset[torch.as_tensor(test_idx)]


@torch.no_grad()
def layer_weights(model, graphs):
    """α of every graph in ``graphs`` under a trained HISTOGRAPH model: [G, L]."""
    model.eval()
    data = next(iter(DataLoader(graphs, batch_size=len(graphs))))
    _, weights = model.embed(data, return_weights=True)
    return weights.layer


def time_overhead(dataset, args, repeats: int = 20):
    """Median forward+backward time of the readout alone and of the whole
    model, HISTOGRAPH vs mean pooling, on one batch."""
    data = next(iter(DataLoader(dataset, batch_size=args.timing_batch, shuffle=False)))
    out = {}
    for readout in ("mean", "histograph"):
        torch.manual_seed(0)
        model = GINClassifier(dataset.num_features, args.hidden, args.layers,
                              dataset.num_classes, readout).train()
        x, history = model.gnn(data.x, data.edge_index)
        history = [h.detach().requires_grad_() for h in history]

        def readout_step(model=model, history=history, readout=readout):
            if readout == "mean":
                g = global_mean_pool(history[-1], data.batch, data.num_graphs)
            else:
                g = model.histograph(history, data.batch, size=data.num_graphs)
            g.sum().backward()

        def model_step(model=model):
            model.zero_grad()
            F.cross_entropy(model(data), data.y).backward()

        out[readout] = {"readout": median_s(readout_step, repeats),
                        "model": median_s(model_step, repeats)}
    return data, out


def median_s(fn, repeats):
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def fmt(accs):
    std = statistics.pstdev(accs) if len(accs) > 1 else 0.0
    return f"{100 * statistics.mean(accs):.1f} ± {100 * std:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=None, help="data root (default $PYG_AGG_DATA)")
    parser.add_argument("--datasets", nargs="*", default=["MUTAG", "PROTEINS", "ENZYMES"])
    parser.add_argument("--readouts", nargs="+", default=list(READOUTS), choices=READOUTS)
    parser.add_argument("--folds", type=int, default=10, help="k of the stratified k-fold")
    parser.add_argument("--folds-run", type=int, default=None,
                        help="evaluate only the first K folds of the k-fold split")
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--layers", type=int, default=5)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--depths", nargs="*", type=int, default=[2, 4, 8, 16])
    parser.add_argument("--depth-dataset", default="MUTAG")
    parser.add_argument("--depth-readouts", nargs="+", default=list(READOUTS), choices=READOUTS)
    parser.add_argument("--timing-dataset", default="PROTEINS")
    parser.add_argument("--timing-batch", type=int, default=128, help="0 skips the timing")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--plot", default=None, help="save a PNG of α across layers here")
    parser.add_argument("--json", default=None, help="save all results as JSON here")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    args.folds_run = args.folds_run or args.folds
    print(f"budget: {args.folds_run}/{args.folds} folds, {args.epochs} epochs, batch "
          f"{args.batch_size}, lr {args.lr}, hidden {args.hidden}, "
          f"{torch.get_num_threads()} threads")

    results = {"args": vars(args), "main": {}, "depth": {}, "alpha": {}, "timing": {}}
    needed = [*args.datasets, *([args.depth_dataset] if args.depths else []),
              *([args.timing_dataset] if args.timing_batch else [])]
    datasets = {name: load_tu(name, root=args.root) for name in dict.fromkeys(needed)}

    def evaluate(name, readout, num_layers, table):
        accs, times, model, test_graphs = cross_validate(datasets[name], args, readout,
                                                         num_layers)
        table[f"{name}/{readout}/{num_layers}"] = {"accs": accs, "train_s": sum(times)}
        print(f"  {name:9s} L={num_layers:<2d} {readout:11s} {fmt(accs):>12s}  "
              f"train {sum(times):7.1f} s", flush=True)
        if readout == "histograph":
            alpha = layer_weights(model, test_graphs)
            results["alpha"][f"{name}/{num_layers}"] = alpha.tolist()

    if args.datasets:
        print(f"\n## {args.layers}-layer GIN, test accuracy (%) over folds")
    for name in args.datasets:
        for readout in args.readouts:
            evaluate(name, readout, args.layers, results["main"])
    if args.depths:
        print(f"\n## depth sweep on {args.depth_dataset}")
        for depth in args.depths:
            for readout in args.depth_readouts:
                evaluate(args.depth_dataset, readout, depth, results["depth"])

    if args.timing_batch:
        print(f"\n## readout overhead on one {args.timing_dataset} batch of {args.timing_batch} "
              f"graphs (forward + backward, median of 20)")
        data, timing = time_overhead(datasets[args.timing_dataset], args)
        results["timing"] = {"num_nodes": data.num_nodes, **timing}
        for part in ("readout", "model"):
            ratio = timing["histograph"][part] / timing["mean"][part]
            print(f"  {part:8s} mean pool {1e3 * timing['mean'][part]:8.2f} ms   histograph "
                  f"{1e3 * timing['histograph'][part]:8.2f} ms   ratio {ratio:6.1f}x")

    print_tables(results, args)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    if args.plot and results["alpha"]:
        plot_alpha(results["alpha"], args.plot)


def print_tables(results, args):
    """Markdown tables: accuracy mean ± std over folds and training time."""
    print("\n## markdown tables (accuracy %, mean ± std over folds; training time, all folds)\n")
    if args.datasets:
        print("| readout | " + " | ".join(args.datasets) + " |")
        print("|" + "---|" * (len(args.datasets) + 1))
        for readout in args.readouts:
            cells = [cell(results["main"][f"{name}/{readout}/{args.layers}"])
                     for name in args.datasets]
            print(f"| {readout} | " + " | ".join(cells) + " |")
    if results["depth"]:
        print(f"\n| readout ({args.depth_dataset}) | "
              + " | ".join(f"L={d}" for d in args.depths) + " |")
        print("|" + "---|" * (len(args.depths) + 1))
        for readout in args.depth_readouts:
            cells = [cell(results["depth"][f"{args.depth_dataset}/{readout}/{d}"])
                     for d in args.depths]
            print(f"| {readout} | " + " | ".join(cells) + " |")


def cell(entry):
    return f"{fmt(entry['accs'])} ({entry['train_s']:.0f} s)"


def plot_alpha(alpha, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for key, values in alpha.items():
        a = torch.tensor(values)
        layers = np.arange(1, a.size(1) + 1)
        mean, std = a.mean(0).numpy(), a.std(0).numpy() if a.size(0) > 1 else 0 * layers
        ax.errorbar(layers, mean, yerr=std, marker="o", capsize=3, label=key.replace("/", ", L="))
    ax.axhline(0, color="grey", lw=0.5)
    ax.set_xlabel("layer l")
    ax.set_ylabel(r"$\alpha_l$ (mean ± std over test graphs)")
    ax.set_title("HISTOGRAPH layer weights after training (last CV fold)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    print(f"saved {path}")


if __name__ == "__main__":
    main()
