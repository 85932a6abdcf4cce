"""LCMAggregation: pyg_agg vs torch_geometric, forward + backward, same weights.

(a) Molecule-like batches (128 graphs of ~25 nodes): both aggregators on the
    same messages (index sorted by destination, as PyG requires), median time
    and peak memory, and the ratios.
(b) A power-law graph (~100k nodes, 1M edges, F=64): PyG's zero padding to
    the maximum degree is infeasible, so its dense tensor size
    (N * max_degree * F floats) is reported; ours is run (unsorted index) and
    its peak memory compared with a plain scatter-sum over the same messages.

Timing: variants alternate in one process, median of ``--repeat`` runs after
a warm-up. Peak memory: each variant in a fresh subprocess, after one warm-up
step, as the rise of the resident-set high-water mark (VmHWM, reset through
/proc/self/clear_refs) over the resident size before the step; glibc's mmap
threshold is pinned so freed tensors really leave the resident set.

    python benchmarks/bench_lcm.py
    python benchmarks/bench_lcm.py --nodes 20000 --edges 200000 --repeat 3
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import re
import statistics
import subprocess
import sys
import time

import torch
from common import add_graph_arguments, molecular_batch, power_law_graph
from torch_geometric.nn.aggr import LCMAggregation as PyGLCMAggregation

from pyg_agg.nn import LCMAggregation
from pyg_agg.ops import scatter

MMAP_THRESHOLD = "65536"


def build(args: argparse.Namespace, case: str, impl: str):
    """Returns (step, description); step() runs one forward + backward."""
    torch.manual_seed(0)
    channels = args.channels
    if case == "molecules":
        edge_index, batch = molecular_batch(args.graphs)
        num_nodes = batch.numel()
        index = edge_index[1].sort(stable=True).values
    else:
        num_nodes = args.nodes
        index = power_law_graph(args.nodes, args.edges)[1]
    x = torch.randn(index.numel(), channels, requires_grad=True)

    if impl == "scatter_sum":
        def step():
            scatter(x, index, 0, num_nodes, reduce="sum").sum().backward()
            x.grad = None
        return step

    ours = LCMAggregation(channels, channels, project=impl != "ours_noproj")
    if impl == "pyg":
        model = PyGLCMAggregation(channels, channels)
        model.load_state_dict(ours.state_dict())
    else:
        model = ours

    def step():
        model(x, index, dim_size=num_nodes).sum().backward()
        x.grad = None
        model.zero_grad(set_to_none=True)
    return step


def status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        return int(re.search(field + r":\s+(\d+)", f.read()).group(1))


def peak_worker(args: argparse.Namespace) -> None:
    case, impl = args.worker.split(":")
    step = build(args, case, impl)
    step()  # warm-up: thread pools, allocator caches
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current VmRSS
    base = status_kib("VmRSS")
    step()
    print(json.dumps({"peak_mib": (status_kib("VmHWM") - base) / 1024}))


def peak_mib(args: argparse.Namespace, case: str, impl: str) -> float:
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_=MMAP_THRESHOLD)
    cmd = [sys.executable, __file__, "--worker", f"{case}:{impl}",
           *[f"--{k}={v}" for k, v in (("channels", args.channels), ("graphs", args.graphs),
                                       ("nodes", args.nodes), ("edges", args.edges))]]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["peak_mib"]


def median_times(steps: dict, repeat: int) -> dict:
    for step in steps.values():
        step()
    times = {name: [] for name in steps}
    for _ in range(repeat):
        for name, step in steps.items():  # alternate so load spikes hit all alike
            start = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--channels", type=int, default=64)
    parser.add_argument("--graphs", type=int, default=128)
    add_graph_arguments(parser, device=False)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        peak_worker(args)
        return

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, F={args.channels}")
    edge_index, batch = molecular_batch(args.graphs)
    num_nodes = batch.numel()
    degree = torch.bincount(edge_index[1], minlength=num_nodes)
    print(f"\n(a) molecules: {args.graphs} graphs, {num_nodes} nodes, "
          f"{edge_index.size(1)} messages, max degree {int(degree.max())}")
    times = median_times({impl: build(args, "molecules", impl) for impl in ("ours", "pyg")},
                         args.repeat)
    peaks = {impl: peak_mib(args, "molecules", impl) for impl in ("ours", "pyg")}
    ours_ms, pyg_ms = times["ours"] * 1e3, times["pyg"] * 1e3
    print(f"  fwd+bwd median   ours {ours_ms:8.2f} ms   pyg {pyg_ms:8.2f} ms"
          f"   speed-up {pyg_ms / ours_ms:.2f}x")
    print(f"  peak memory      ours {peaks['ours']:8.1f} MiB  pyg {peaks['pyg']:8.1f} MiB"
          f"  ratio {peaks['ours'] / peaks['pyg']:.2f}x")

    index = power_law_graph(args.nodes, args.edges)[1]
    max_degree = int(torch.bincount(index, minlength=args.nodes).max())
    dense_gib = args.nodes * max_degree * args.channels * 4 / 2**30
    message_mib = args.edges * args.channels * 4 / 2**20
    print(f"\n(b) power law: {args.nodes} nodes, {args.edges} messages "
          f"({message_mib:.0f} MiB), max degree {max_degree}")
    print(f"  PyG would pad to N*max_degree*F = {args.nodes * max_degree * args.channels:.3g} "
          f"floats = {dense_gib:,.0f} GiB for the dense input alone: not run")
    impls = ("ours", "ours_noproj", "scatter_sum")
    times = median_times({impl: build(args, "power_law", impl) for impl in impls},
                         max(1, args.repeat // 2))
    peaks = {impl: peak_mib(args, "power_law", impl) for impl in impls}
    for impl, label in (("scatter_sum", "scatter-sum"), ("ours", "ours (project=True)"),
                        ("ours_noproj", "ours (project=False)")):
        print(f"  {label:<22} fwd+bwd median {times[impl]:7.2f} s   peak {peaks[impl]:8.1f} MiB"
              f"   {peaks[impl] / peaks['scatter_sum']:.2f}x scatter-sum")


if __name__ == "__main__":
    main()
