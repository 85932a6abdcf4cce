"""PNAConv: pyg_agg vs torch_geometric, forward + backward, same weights.

Aggregators mean/min/max/std, scalers identity/amplification/attenuation,
F = 64, on a power-law graph (``--nodes``/``--edges``) and a batch of 128
molecule-like graphs, with 1 and 4 towers, without and with edge features
(``--edge-dim``). Timing and peak memory come from the shared driver
(``common.run_cases``); the roofline line is the fused statistics op alone.

    python benchmarks/bench_pna.py                            # every case
    python benchmarks/bench_pna.py --case molecules_t1 --case power_law_t1
"""
from __future__ import annotations

import argparse
import functools

import torch
from common import Case, molecular_batch, power_law_graph, run_cases
from torch_geometric.data import Data
from torch_geometric.nn import PNAConv as PyGPNAConv

from pyg_agg.nn import PNAConv
from pyg_agg.ops import read_edges, segment_statistics, target_csr

AGGREGATORS = ["mean", "min", "max", "std"]
SCALERS = ["identity", "amplification", "attenuation"]


def statistics_roofline(edge_index: torch.Tensor, num_nodes: int, channels: int):
    """The gather-form statistics pass alone, forward: at least it reads the
    node values and the CSR once and writes the four statistics once."""
    graph = target_csr(read_edges(edge_index, num_nodes, num_nodes))
    src = torch.randn(num_nodes, channels, device=edge_index.device)
    min_bytes = (5 * num_nodes * channels * src.element_size()
                 + graph.col.numel() * 8 + graph.ptr.numel() * 8)

    def forward():
        segment_statistics(src, graph.ptr, graph.col, stats=("sum", "std", "min", "max"))

    return "roofline: segment_statistics forward", min_bytes, forward


def pna_case(args, graph: str, towers: int, edge_features: bool) -> Case:
    if graph == "power_law":
        edge_index, num_nodes = power_law_graph(args.nodes, args.edges), args.nodes
        title, inner = f"power-law graph {num_nodes} nodes, {edge_index.size(1)} edges", 1
    else:
        edge_index, batch = molecular_batch()
        num_nodes = batch.numel()
        title, inner = f"128 molecules ({num_nodes} nodes, {edge_index.size(1)} edges)", 10
    device = torch.device(args.device)
    deg = PNAConv.get_degree_histogram(Data(edge_index=edge_index, num_nodes=num_nodes))
    torch.manual_seed(0)
    edge_dim = args.edge_dim if edge_features else None
    kwargs = dict(aggregators=AGGREGATORS, scalers=SCALERS, deg=deg, towers=towers,
                  edge_dim=edge_dim)
    reference = PyGPNAConv(args.channels, args.channels, **kwargs).to(device)
    ours = PNAConv(args.channels, args.channels, **kwargs).to(device)
    ours.load_state_dict(reference.state_dict())
    edge_index = edge_index.to(device)
    x = torch.randn(num_nodes, args.channels, device=device, requires_grad=True)
    edge_attr = (torch.randn(edge_index.size(1), args.edge_dim, device=device)
                 if edge_features else None)

    def step(model):
        def run():
            x.grad = None
            model.zero_grad(set_to_none=True)
            model(x, edge_index, edge_attr).square().mean().backward()
        return run

    with torch.no_grad():
        diff = float((ours(x, edge_index, edge_attr) - reference(x, edge_index, edge_attr))
                     .abs().max())
    return Case(f"{title}, towers={towers}, edge features {'yes' if edge_features else 'no'}, "
                f"F={args.channels} (max |out diff| {diff:.1e})",
                {"pyg": step(reference), "ours": step(ours)}, inner=inner,
                roofline=[statistics_roofline(edge_index, num_nodes, args.channels)])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--channels", type=int, default=64)
    parser.add_argument("--edge-dim", type=int, default=16)


CASES = {f"{graph}_t{towers}{'_edges' if edges else ''}":
         functools.partial(pna_case, graph=graph, towers=towers, edge_features=edges)
         for graph in ("power_law", "molecules") for towers in (1, 4) for edges in (False, True)}

if __name__ == "__main__":
    run_cases(__doc__, CASES, add_arguments)
