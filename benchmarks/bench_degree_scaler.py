"""DegreeScalerAggregation: pyg_agg vs torch_geometric, forward + backward.

PNA's standalone aggregation (aggregators mean/min/max/std x scalers identity/
amplification/attenuation) on the same messages: a power-law graph
(``--nodes``/``--edges``, F=64) and a batch of 128 molecule-like graphs at the
width of the molhiv recipe (F=80). Timing and peak memory come from the
shared driver (``common.run_cases``). The ``floor`` step does only what any
aggregation must do in this benchmark (write the output, run the loss over it,
write the messages' gradient), so its speed-up bounds every aggregation's.

    python benchmarks/bench_degree_scaler.py
    python benchmarks/bench_degree_scaler.py --nodes 20000 --edges 200000 --case molecules
"""
from __future__ import annotations

import torch
from common import Case, molecular_batch, power_law_graph, run_cases
from torch_geometric.data import Data
from torch_geometric.nn.aggr import DegreeScalerAggregation as PyGDegreeScalerAggregation

from pyg_agg.nn import PNAConv
from pyg_agg.nn.aggr import DegreeScalerAggregation

AGGREGATORS = ["mean", "min", "max", "std"]
SCALERS = ["identity", "amplification", "attenuation"]


def aggregation_case(title: str, edge_index: torch.Tensor, num_nodes: int, channels: int,
                     inner: int, device: torch.device) -> Case:
    deg = PNAConv.get_degree_histogram(Data(edge_index=edge_index, num_nodes=num_nodes))
    torch.manual_seed(0)
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

    with torch.no_grad():
        outs = {k: m(msg, target, dim_size=num_nodes) for k, m in modules.items()}
    diff = float((outs["ours"] - outs["pyg"]).abs().max())
    width = outs["ours"].size(1)

    def floor():
        # What any aggregation must do in this benchmark, with no arithmetic:
        # write the [N, S*A*F] output, run the loss over it forward and
        # backward, write the [E, F] gradient of the messages.
        out = msg.new_empty(num_nodes, width).fill_(1.0).requires_grad_()
        out.square().mean().backward()
        msg.grad = torch.zeros_like(msg)

    steps = {name: step(module) for name, module in modules.items()}
    return Case(f"{title} (E={source.numel():,}, F={channels}), max|diff| {diff:.1e}",
                {**steps, "floor": floor}, inner=inner,
                notes=["floor: output written + the loss + the message gradient written, "
                       "no aggregation (the best speed-up any aggregation could show here)"])


def power_law(args) -> Case:
    return aggregation_case(f"power-law N={args.nodes:,}", power_law_graph(args.nodes, args.edges),
                            args.nodes, 64, 1, torch.device(args.device))


def molecules(args) -> Case:
    edge_index, batch = molecular_batch()
    return aggregation_case("molecules, 128 graphs", edge_index, batch.numel(), 80, 10,
                            torch.device(args.device))


if __name__ == "__main__":
    run_cases(__doc__, {"power_law": power_law, "molecules": molecules})
