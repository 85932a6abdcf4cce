"""GATv2Conv: pyg_agg vs torch_geometric, forward + backward, same weights.

Both layers run in one process on the same inputs, alternating, and each
time is the median of ``--repeat`` runs after a warm-up. Peak memory is the
rise of the resident-set high-water mark during one forward + backward
(``benchmarks/common.py``; CUDA allocator peak on GPU).

    python benchmarks/bench_gatv2.py                    # 100k nodes, 1M edges
    python benchmarks/bench_gatv2.py --nodes 20000 --edges 200000 --repeat 3
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
from common import (
    molecular_batch,
    peak_memory_mib,
    pin_malloc_threshold,
    power_law_graph,
    ratio_line,
)
from torch_geometric.nn import GATv2Conv as PyGGATv2Conv

from pyg_agg.nn import GATv2Conv


def alternating_median_times(steps: dict, repeat: int, inner: int) -> dict:
    """Median seconds per call of each step, interleaving the candidates so
    that load changes on a shared machine hit both alike."""
    for step in steps.values():
        step()  # warm-up
    times = {name: [] for name in steps}
    for _ in range(repeat):
        for name, step in steps.items():
            start = time.perf_counter()
            for _ in range(inner):
                step()
            times[name].append((time.perf_counter() - start) / inner)
    return {name: statistics.median(t) for name, t in times.items()}


def run_case(title: str, edge_index: torch.Tensor, num_nodes: int, args, inner: int) -> None:
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
    print(f"\n== {title}: {num_nodes} nodes, {edge_index.size(1)} edges, F={args.features}, "
          f"heads={args.heads}, concat=False (max |out diff| {max_diff:.1e})")
    steps = {"ours": step(ours), "pyg": step(ref)}
    times = alternating_median_times(steps, args.repeat, inner)
    memory = {name: peak_memory_mib(fn, device) for name, fn in steps.items()}
    print(ratio_line("forward+backward time (median)", times["ours"] * 1e3,
                     times["pyg"] * 1e3, "ms"))
    print(ratio_line("peak memory (forward+backward)", memory["ours"], memory["pyg"], "MiB"))
    print(f"speed-up {times['pyg'] / times['ours']:.2f}x, "
          f"memory ratio {memory['ours'] / memory['pyg']:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--edges", type=int, default=1_000_000)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--graphs", type=int, default=128, help="molecules in the small batch")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    if args.device == "cpu":
        pin_malloc_threshold()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, device {args.device}, threads {torch.get_num_threads()}")

    edge_index = power_law_graph(args.nodes, args.edges, device=args.device)
    run_case("power-law graph", edge_index, args.nodes, args, inner=1)
    edge_index, batch = molecular_batch(args.graphs, device=args.device)
    run_case(f"molecular batch ({args.graphs} graphs)", edge_index, batch.numel(), args,
             inner=20)


if __name__ == "__main__":
    main()
