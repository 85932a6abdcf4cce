"""LCMAggregation: pyg_agg vs torch_geometric, forward + backward, same weights.

(a) Molecule-like batches (128 graphs of ~25 nodes): both aggregators on the
    same messages (index sorted by destination, as PyG requires).
(b) A power-law graph (``--nodes``/``--edges``, F=64): PyG's zero padding to
    the maximum degree is infeasible, so its dense tensor size
    (N * max_degree * F floats) is reported; ours is run (unsorted index),
    with and without the projection, against a plain scatter-sum over the
    same messages.

Timing and peak memory come from the shared driver (``common.run_cases``).

    python benchmarks/bench_lcm.py
    python benchmarks/bench_lcm.py --nodes 20000 --edges 200000 --case molecules
"""
from __future__ import annotations

import argparse

import torch
from common import Case, molecular_batch, power_law_graph, run_cases
from torch_geometric.nn.aggr import LCMAggregation as PyGLCMAggregation

from pyg_agg.nn import LCMAggregation
from pyg_agg.ops import scatter


def aggregation_step(model, x: torch.Tensor, index: torch.Tensor, num_nodes: int):
    def step():
        model(x, index, dim_size=num_nodes).sum().backward()
        x.grad = None
        model.zero_grad(set_to_none=True)
    return step


def molecules(args) -> Case:
    torch.manual_seed(0)
    edge_index, batch = molecular_batch(args.graphs)
    num_nodes = batch.numel()
    index = edge_index[1].sort(stable=True).values
    x = torch.randn(index.numel(), args.channels, requires_grad=True)
    ours = LCMAggregation(args.channels, args.channels)
    reference = PyGLCMAggregation(args.channels, args.channels)
    reference.load_state_dict(ours.state_dict())
    degree = torch.bincount(index, minlength=num_nodes)
    return Case(f"(a) molecules: {args.graphs} graphs, {num_nodes} nodes, {index.numel()} "
                f"messages, max degree {int(degree.max())}, F={args.channels}",
                {"pyg": aggregation_step(reference, x, index, num_nodes),
                 "ours": aggregation_step(ours, x, index, num_nodes)}, inner=5)


def power_law(args) -> Case:
    torch.manual_seed(0)
    index = power_law_graph(args.nodes, args.edges)[1]
    x = torch.randn(index.numel(), args.channels, requires_grad=True)
    max_degree = int(torch.bincount(index, minlength=args.nodes).max())
    padded = args.nodes * max_degree * args.channels

    def scatter_sum():
        scatter(x, index, 0, args.nodes, reduce="sum").sum().backward()
        x.grad = None

    steps = {"scatter_sum": scatter_sum}
    for name, project in (("ours", True), ("ours_noproj", False)):
        model = LCMAggregation(args.channels, args.channels, project=project)
        steps[name] = aggregation_step(model, x, index, args.nodes)
    return Case(f"(b) power law: {args.nodes} nodes, {args.edges} messages, max degree "
                f"{max_degree}, F={args.channels}", steps, baseline="scatter_sum",
                notes=[f"PyG would pad to N*max_degree*F = {padded:.3g} floats = "
                       f"{padded * 4 / 2**30:,.0f} GiB for the dense input alone: not run"])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--channels", type=int, default=64)
    parser.add_argument("--graphs", type=int, default=128)


if __name__ == "__main__":
    run_cases(__doc__, {"molecules": molecules, "power_law": power_law}, add_arguments)
