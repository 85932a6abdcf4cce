"""The second-minimum task of "Learnable Commutative Monoids for Graph Neural
Networks" (Ong & Veličković, 2022): which aggregator can tell the second
smallest element of a multiset, and keep doing so on longer sets?

Every model is ``encoder (per element) -> aggregator -> decoder (256 classes)``
and differs only in the aggregator:

* ``lcm``: pyg_agg's LCMAggregation (GRU operator, balanced tree, depth log n)
* ``sum`` / ``max``: the usual fixed aggregators
* ``gru``: PyG's GRUAggregation, a recurrent reader of the elements in the
  order they were generated (index-sorted, not permutation invariant; depth n)

Trained on sets of 2-16 elements, tested on sets of fixed sizes including
longer ones than seen in training. Prints the test accuracy per aggregator and
set size, the number of parameters and the training time.

    python examples/lcm_second_min.py                    # default budget
    python examples/lcm_second_min.py --train-sets 5000 --epochs 5   # smoke run
"""
from __future__ import annotations

import argparse
import time

import torch
from torch import nn
from torch_geometric.loader import DataLoader
from torch_geometric.nn.aggr import GRUAggregation, MaxAggregation, SumAggregation

from pyg_agg.datasets import SecondMinimum
from pyg_agg.nn import LCMAggregation


class SetClassifier(nn.Module):
    def __init__(self, aggregator: str, num_bits: int, hidden: int, num_classes: int):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(num_bits, hidden), nn.ReLU(),
                                     nn.Linear(hidden, hidden), nn.ReLU())
        self.aggr = {
            "lcm": lambda: LCMAggregation(hidden, hidden),
            "sum": SumAggregation,
            "max": MaxAggregation,
            "gru": lambda: GRUAggregation(hidden, hidden),
        }[aggregator]()
        self.decoder = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(),
                                     nn.Linear(hidden, num_classes))

    def forward(self, x: torch.Tensor, batch: torch.Tensor, num_sets: int) -> torch.Tensor:
        return self.decoder(self.aggr(self.encoder(x), batch, dim_size=num_sets))


def accuracy(model: SetClassifier, loader: DataLoader) -> float:
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for data in loader:
            pred = model(data.x, data.batch, data.num_graphs).argmax(-1)
            correct += int((pred == data.y).sum())
            total += data.num_graphs
    return correct / total


def train(name: str, args: argparse.Namespace, train_set, test_loaders) -> dict:
    torch.manual_seed(args.seed)
    model = SetClassifier(name, args.num_bits, args.hidden, train_set.num_classes)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
    start = time.perf_counter()
    for _ in range(args.epochs):
        model.train()
        for data in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(data.x, data.batch, data.num_graphs),
                                               data.y)
            if name == "lcm" and args.assoc_weight > 0:
                loss = loss + args.assoc_weight * model.aggr.associativity_loss(
                    model.encoder(data.x))
            loss.backward()
            optimizer.step()
    train_s = time.perf_counter() - start
    start = time.perf_counter()
    accs = {size: accuracy(model, test) for size, test in test_loaders.items()}
    return {"accs": accs, "train_s": train_s, "test_s": time.perf_counter() - start,
            "params": sum(p.numel() for p in model.parameters())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--aggregators", nargs="+", default=["lcm", "sum", "max", "gru"],
                        choices=["lcm", "sum", "max", "gru"])
    parser.add_argument("--train-sets", type=int, default=20000)
    parser.add_argument("--test-sets", type=int, default=1000)
    parser.add_argument("--test-sizes", type=int, nargs="+", default=[4, 8, 16, 32, 64])
    parser.add_argument("--num-bits", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--assoc-weight", type=float, default=0.0,
                        help="weight of LCM's associativity regulariser (0: off)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads (default: torch's choice)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    train_set = SecondMinimum(args.train_sets, 2, 16, args.num_bits, seed=args.seed)
    test_loaders = {
        size: DataLoader(SecondMinimum(args.test_sets, size, size, args.num_bits,
                                       seed=args.seed + 1 + size), batch_size=256)
        for size in args.test_sizes
    }
    print(f"train: {args.train_sets} sets of 2-16 {args.num_bits}-bit integers, "
          f"{args.epochs} epochs, hidden {args.hidden}; test: {args.test_sets} sets per size; "
          f"{torch.get_num_threads()} threads")
    results = {name: train(name, args, train_set, test_loaders) for name in args.aggregators}

    sizes = "".join(f"{f'n={s}':>8}" for s in args.test_sizes)
    print(f"\n{'aggregator':<11}{sizes}{'params':>9}{'train s':>9}{'test s':>8}")
    for name, res in results.items():
        accs = "".join(f"{res['accs'][s]:8.3f}" for s in args.test_sizes)
        print(f"{name:<11}{accs}{res['params']:9d}{res['train_s']:9.1f}{res['test_s']:8.1f}")


if __name__ == "__main__":
    main()
