"""DegreeScalerAggregation: pyg_agg vs torch_geometric, forward + backward.

PNA's standalone aggregation (aggregators mean/min/max/std x scalers identity/
amplification/attenuation) on the same messages: a power-law graph
(``--nodes``/``--edges``, F=64) and a batch of 128 molecule-like graphs at the
width of the molhiv recipe (F=80). Timing and peak memory come from the
shared driver (``common.run_cases``). The ``floor`` step does only what any
aggregation must do in this benchmark (write the output, run the loss over it,
write the messages' gradient), so its speed-up bounds every aggregation's.
The ``bound`` step adds the least an aggregation of this unsorted index
must move beyond the floor: every message read through the sort order
forward and again backward, the output's gradient read once, the messages'
gradient written through the sort order (native kernels, sum and sum of
squares only, no autograd). An aggregation that reads the messages where
they lie cannot beat it.

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
from pyg_agg.ops import HAS_NATIVE
from pyg_agg.ops.graph import index_segments

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
    steps["floor"] = floor
    notes = ["floor: output written + the loss + the message gradient written, "
             "no aggregation (the best speed-up any aggregation could show here)"]
    if HAS_NATIVE and device.type == "cpu":
        steps["bound"] = access_bound(msg, target, num_nodes, width)
        notes.append("bound: the floor + the messages read through the sort order forward and "
                     "backward, the output gradient read once, the message gradient written "
                     "through the sort order (the least an aggregation reading the messages "
                     "where they lie can do)")
    return Case(f"{title} (E={source.numel():,}, F={channels}), max|diff| {diff:.1e}",
                steps, inner=inner, notes=notes)


def access_bound(msg: torch.Tensor, target: torch.Tensor, num_nodes: int, width: int):
    """The ``bound`` step: the floor's work plus the memory accesses that any
    aggregation of the unsorted ``target`` must make, through the native
    kernels with the fewest statistics that read every message (sum and sum
    of squares), and none of an aggregation's arithmetic or autograd."""
    ptr, order = index_segments(target, num_nodes)
    values = msg.detach()
    empty, empty_int = values.new_empty(0), torch.empty(0, dtype=torch.int32)
    channels = values.size(1)

    def bound():
        total, _, _, _, _, _ = torch.ops.pyg_agg.segment_stats(values, ptr, order, None, True, True,
                                                               False, False)
        out = values.new_empty(num_nodes, width).fill_(1.0).requires_grad_()
        out.square().mean().backward()
        grad = out.grad.view(num_nodes, -1, channels).sum(1)
        msg.grad = torch.ops.pyg_agg.segment_stats_backward(grad, grad, None, None, values, ptr, order,
                                                            None, total, empty, empty, empty_int,
                                                            empty_int, order)
    return bound


def power_law(args) -> Case:
    return aggregation_case(f"power-law N={args.nodes:,}", power_law_graph(args.nodes, args.edges),
                            args.nodes, 64, 1, torch.device(args.device))


def molecules(args) -> Case:
    edge_index, batch = molecular_batch()
    return aggregation_case("molecules, 128 graphs", edge_index, batch.numel(), 80, 10,
                            torch.device(args.device))


if __name__ == "__main__":
    run_cases(__doc__, {"power_law": power_law, "molecules": molecules})
