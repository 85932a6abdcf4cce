"""DictionaryLookup (Brody et al., 2022): static GAT vs dynamic GATv2 attention.

Trains a one-layer, one-head model with (a) PyG's ``GATConv`` and (b)
``pyg_agg.nn.GATv2Conv`` for each ``k`` and prints train/test node accuracy
and the wall time. As in the paper's setup the layer adds no self-loops, so a
query node sees its own key only through the attention scores.

    python examples/dictionary_lookup.py --k 5 10 15 20
    python examples/dictionary_lookup.py --k 5 10 15 20 --samples 8000 --steps 150 --threads 1

Training stops once the whole training set is classified correctly (checked
every ``--eval-every`` steps) or after ``--steps`` optimizer steps.
"""
from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.loader import DataLoader
from torch_geometric.nn import GATConv

from pyg_agg.datasets import DictionaryLookup
from pyg_agg.nn import GATv2Conv

CONVS = {"GAT (PyG)": GATConv, "GATv2 (pyg_agg)": GATv2Conv}


class LookupModel(nn.Module):
    """Key + value embeddings, one attention layer, a linear classifier on
    the query nodes."""

    def __init__(self, conv_class: type, k: int, hidden: int):
        super().__init__()
        self.key_embedding = nn.Embedding(k, hidden)
        self.value_embedding = nn.Embedding(k + 1, hidden)
        self.conv = conv_class(hidden, hidden, heads=1, add_self_loops=False)
        self.classifier = nn.Linear(hidden, k, bias=False)

    def forward(self, batch) -> torch.Tensor:
        h = F.relu(self.key_embedding(batch.x[:, 0]) + self.value_embedding(batch.x[:, 1]))
        h = self.conv(h, batch.edge_index)
        return self.classifier(h[batch.query_mask])


@torch.no_grad()
def accuracy(model: nn.Module, loader: DataLoader) -> float:
    model.eval()
    correct = total = 0
    for batch in loader:
        correct += int((model(batch).argmax(-1) == batch.y).sum())
        total += batch.y.numel()
    return correct / total


def train_one(conv_class: type, k: int, args: argparse.Namespace) -> dict:
    torch.manual_seed(args.seed)
    train_set = DictionaryLookup(k, "train", num_samples=args.samples)
    test_set = DictionaryLookup(k, "test", num_samples=args.samples)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
    eval_train = DataLoader(train_set, batch_size=4 * args.batch_size)
    eval_test = DataLoader(test_set, batch_size=4 * args.batch_size)
    model = LookupModel(conv_class, k, args.hidden)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    start = time.perf_counter()
    steps = 0
    while steps < args.steps:
        for batch in train_loader:
            model.train()
            optimizer.zero_grad()
            F.cross_entropy(model(batch), batch.y).backward()
            optimizer.step()
            steps += 1
            if steps == args.steps or (
                    steps % args.eval_every == 0 and accuracy(model, eval_train) == 1.0):
                break
        else:
            continue
        break  # step budget spent, or the training set is fitted
    train_acc, test_acc = accuracy(model, eval_train), accuracy(model, eval_test)
    return {"train": train_acc, "test": test_acc, "steps": steps,
            "seconds": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, nargs="+", default=[5, 10, 15, 20])
    parser.add_argument("--samples", type=int, default=32000,
                        help="most permutations per k (the paper uses 32000)")
    parser.add_argument("--steps", type=int, default=1000, help="most optimizer steps per model")
    parser.add_argument("--eval-every", type=int, default=25,
                        help="check the train accuracy (and stop at 100%%) every this many steps")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    print(f"{'k':>3} {'model':<16} {'train acc':>9} {'test acc':>9} {'steps':>6} {'time (s)':>8}")
    total = time.perf_counter()
    for k in args.k:
        for name, conv_class in CONVS.items():
            r = train_one(conv_class, k, args)
            print(f"{k:>3} {name:<16} {r['train']:>9.4f} {r['test']:>9.4f} "
                  f"{r['steps']:>6} {r['seconds']:>8.1f}", flush=True)
    print(f"total wall time: {time.perf_counter() - total:.1f} s")


if __name__ == "__main__":
    main()
