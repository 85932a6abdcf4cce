"""GATv2Conv: pyg_agg vs torch_geometric, forward + backward, same weights.

Both layers run in one process on the same inputs, alternating, and each
time is the median of ``--repeat`` runs after a warm-up, with the default
allocator. Peak memory is the rise of the resident-set high-water mark
during one forward + backward, measured in a subprocess whose glibc mmap
threshold is pinned (``benchmarks/common.py``; CUDA allocator peak on GPU).
The pinned threshold is kept out of the timings: it turns every allocation
above 64 KiB into fresh, page-faulting memory, which no real run pays.

    python benchmarks/bench_gatv2.py                    # 100k nodes, 1M edges
    python benchmarks/bench_gatv2.py --nodes 20000 --edges 200000 --repeat 3
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch
from common import (
    add_graph_arguments,
    molecular_batch,
    peak_memory_mib,
    pin_malloc_threshold,
    power_law_graph,
    ratio_line,
)
from torch_geometric.nn import GATv2Conv as PyGGATv2Conv

from pyg_agg.nn import GATv2Conv

CASES = ("power_law", "molecular")

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


def make_case(case: str, args) -> tuple[str, torch.Tensor, int, int]:
    """(title, edge_index, number of nodes, calls per timed run) of a case."""
    if case == "power_law":
        edge_index = power_law_graph(args.nodes, args.edges, device=args.device)
        return "power-law graph", edge_index, args.nodes, 1
    edge_index, batch = molecular_batch(args.graphs, device=args.device)
    return f"molecular batch ({args.graphs} graphs)", edge_index, batch.numel(), 20


def make_steps(edge_index: torch.Tensor, num_nodes: int, args) -> tuple[dict, float]:
    """Forward + backward closures for ours and PyG, and their max output gap."""
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
    return {"ours": step(ours), "pyg": step(ref)}, max_diff


def memory_worker(case: str, args) -> None:
    """Prints the peak memory of each layer as JSON (run in a subprocess)."""
    pin_malloc_threshold()
    _, edge_index, num_nodes, _ = make_case(case, args)
    steps, _ = make_steps(edge_index, num_nodes, args)
    print(json.dumps({name: peak_memory_mib(fn, edge_index.device)
                      for name, fn in steps.items()}))


def run_case(case: str, args) -> None:
    title, edge_index, num_nodes, inner = make_case(case, args)
    steps, max_diff = make_steps(edge_index, num_nodes, args)
    print(f"\n== {title}: {num_nodes} nodes, {edge_index.size(1)} edges, F={args.features}, "
          f"heads={args.heads}, concat=False (max |out diff| {max_diff:.1e})")
    times = alternating_median_times(steps, args.repeat, inner)
    del steps
    worker = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--memory-worker", case, *sys.argv[1:]],
        check=True, capture_output=True, text=True)
    memory = json.loads(worker.stdout.strip().splitlines()[-1])
    print(ratio_line("forward+backward time (median)", times["ours"] * 1e3,
                     times["pyg"] * 1e3, "ms"))
    print(ratio_line("peak memory (forward+backward)", memory["ours"], memory["pyg"], "MiB"))
    print(f"speed-up {times['pyg'] / times['ours']:.2f}x, "
          f"memory ratio {memory['ours'] / memory['pyg']:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_graph_arguments(parser)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--graphs", type=int, default=128, help="molecules in the small batch")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--memory-worker", choices=CASES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.memory_worker:
        memory_worker(args.memory_worker, args)
        return
    print(f"torch {torch.__version__}, device {args.device}, threads {torch.get_num_threads()}")
    for case in CASES:
        run_case(case, args)


if __name__ == "__main__":
    main()
