"""DegreeScalerAggregation: pyg_agg vs torch_geometric, forward + backward.

PNA's standalone aggregation (aggregators mean/min/max/std x scalers identity/
amplification/attenuation) on the same messages: a power-law graph (100k nodes,
1M edges, F=64) and a batch of 128 molecule-like graphs at the width of the
molhiv recipe (F=80). Timing: median of ``--repeat`` runs after a warm-up, both
implementations in one process. Peak memory: rise of the resident-set
high-water mark (CPU) or the allocator peak (CUDA) over one step, after a
warm-up step (see ``common.py``).

    python benchmarks/bench_degree_scaler.py
    python benchmarks/bench_degree_scaler.py --nodes 20000 --edges 200000 --repeat 3
"""
from __future__ import annotations

import argparse

import torch
from common import (
    add_graph_arguments,
    median_time_s,
    molecular_batch,
    peak_memory_mib,
    pin_malloc_threshold,
    power_law_graph,
    ratio_line,
)
from torch_geometric.data import Data
from torch_geometric.nn.aggr import DegreeScalerAggregation as PyGDegreeScalerAggregation

from pyg_agg.nn import PNAConv
from pyg_agg.nn.aggr import DegreeScalerAggregation

AGGREGATORS = ["mean", "min", "max", "std"]
SCALERS = ["identity", "amplification", "attenuation"]


def compare(name: str, edge_index: torch.Tensor, num_nodes: int, channels: int,
            repeat: int, device: torch.device) -> None:
    deg = PNAConv.get_degree_histogram(Data(edge_index=edge_index, num_nodes=num_nodes))
    source, target = edge_index.to(device)
    x = torch.randn(num_nodes, channels, device=device)
    msg = x.index_select(0, source).requires_grad_()
    modules = {"pyg": PyGDegreeScalerAggregation(AGGREGATORS, SCALERS, deg).to(device),
               "ours": DegreeScalerAggregation(AGGREGATORS, SCALERS, deg).to(device)}

    def step(module):
        def run():
            msg.grad = None
            module(msg, target, dim_size=num_nodes).square().mean().backward()
        return run

    outs = {k: m(msg, target, dim_size=num_nodes).detach() for k, m in modules.items()}
    diff = float((outs["ours"] - outs["pyg"]).abs().max())
    times = {k: median_time_s(step(m), repeats=repeat) for k, m in modules.items()}
    peaks = {k: peak_memory_mib(step(m), device) for k, m in modules.items()}
    print(f"{name} (E={source.numel():,}, F={channels}), max|diff| {diff:.1e}")
    print(ratio_line("  fwd+bwd time", times["ours"] * 1e3, times["pyg"] * 1e3, "ms"))
    print(ratio_line("  fwd+bwd peak memory", peaks["ours"], peaks["pyg"], "MiB"), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_graph_arguments(parser)
    parser.add_argument("--channels", type=int, default=64)
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cpu":
        pin_malloc_threshold()
    torch.manual_seed(0)
    print(f"DegreeScalerAggregation fwd+bwd on {device}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads; ratio = ours / pyg")
    compare(f"power-law N={args.nodes:,}", power_law_graph(args.nodes, args.edges), args.nodes,
            args.channels, args.repeat, device)
    edge_index, batch = molecular_batch()
    compare("molecules, 128 graphs", edge_index, batch.numel(), 80, args.repeat, device)


if __name__ == "__main__":
    main()
