"""GATv2Conv: pyg_agg vs torch_geometric, forward + backward, same weights.

Cases: a power-law graph (``--nodes``/``--edges``, default 100k / 1M) and a
batch of 128 molecule-like graphs, F = 64, 4 heads, ``concat=False``. Timing,
peak memory and the roofline of the fused attention op come from the shared
driver (``common.run_cases``).

    python benchmarks/bench_gatv2.py                         # both cases
    python benchmarks/bench_gatv2.py --nodes 30000 --edges 300000 --contend
"""
from __future__ import annotations

import argparse

import torch
from common import Case, molecular_batch, power_law_graph, run_cases
from torch_geometric.nn import GATv2Conv as PyGGATv2Conv

from pyg_agg.nn import GATv2Conv
from pyg_agg.ops import dynamic_attention, read_edges, target_csr


def attention_roofline(edge_index: torch.Tensor, num_nodes: int, args) -> tuple[str, int, object]:
    """The fused op alone, forward: at least it reads both node projections,
    the attention vector and the CSR once, and writes the output and the
    per-row log-sum-exp once."""
    heads, channels = args.heads, args.features
    h_src, h_dst = (torch.randn(num_nodes, heads, channels, device=edge_index.device)
                    for _ in range(2))
    att = torch.randn(heads, channels, device=edge_index.device)
    graph = target_csr(read_edges(edge_index, num_nodes, num_nodes))
    element = h_src.element_size()
    min_bytes = (3 * num_nodes * heads * channels * element  # h_src, h_dst read; out written
                 + num_nodes * heads * element + att.numel() * element  # lse written, att read
                 + graph.col.numel() * 8 + graph.ptr.numel() * 8)

    def forward():
        with torch.no_grad():
            dynamic_attention(h_src, h_dst, att, graph)

    return "roofline: dynamic_attention forward", min_bytes, forward


def gatv2_case(title: str, edge_index: torch.Tensor, num_nodes: int, inner: int, args) -> Case:
    torch.manual_seed(0)
    device = edge_index.device
    x = torch.randn(num_nodes, args.features, device=device, requires_grad=True)
    ref = PyGGATv2Conv(args.features, args.features, heads=args.heads, concat=False).to(device)
    ours = GATv2Conv(args.features, args.features, heads=args.heads, concat=False).to(device)
    ours.load_state_dict(ref.state_dict())
    grad = torch.randn(num_nodes, args.features, device=device)

    def step(conv):
        def run():
            x.grad = None
            conv.zero_grad(set_to_none=True)
            conv(x, edge_index).backward(grad)
        return run

    with torch.no_grad():
        max_diff = (ours(x, edge_index) - ref(x, edge_index)).abs().max().item()
    return Case(f"{title}: {num_nodes} nodes, {edge_index.size(1)} edges, F={args.features}, "
                f"heads={args.heads}, concat=False (max |out diff| {max_diff:.1e})",
                {"pyg": step(ref), "ours": step(ours)}, inner=inner,
                roofline=[attention_roofline(edge_index, num_nodes, args)])


def power_law(args) -> Case:
    edge_index = power_law_graph(args.nodes, args.edges, device=args.device)
    return gatv2_case("power-law graph", edge_index, args.nodes, 1, args)


def molecules(args) -> Case:
    edge_index, batch = molecular_batch(args.graphs, device=args.device)
    return gatv2_case(f"molecular batch ({args.graphs} graphs)", edge_index, batch.numel(), 20,
                      args)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--graphs", type=int, default=128, help="molecules in the small batch")


if __name__ == "__main__":
    run_cases(__doc__, {"power_law": power_law, "molecules": molecules}, add_arguments)
