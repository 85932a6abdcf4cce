"""Kernel-layer benchmark: fused multi_aggregate vs PyG's per-statistic scatter.

On a power-law graph (default 100k nodes, 1M edges, F=64) times
``multi_aggregate(count, sum, std, min, max)`` against PyG's
``torch_geometric.utils.scatter`` called once per statistic, and against one
plain scatter-sum (the floor), on the default backend ("auto": native on
CPU) and on each other one. Prints a roofline line for the fused op: its
minimum memory traffic over its time, against the copy bandwidth measured in
the same run. Then, per reduction, each available backend.

    python benchmarks/bench_ops.py [--nodes N --edges E --features F --repeat R --threads T]
"""
from __future__ import annotations

import argparse

import torch
from common import (
    add_graph_arguments,
    copy_bandwidth_gb_s,
    median_time_s,
    peak_memory_mib,
    pin_malloc_threshold,
    power_law_graph,
    ratio_line,
    roofline_line,
)
from torch_geometric.utils import scatter as pyg_scatter

from pyg_agg.ops import HAS_NATIVE, HAS_TORCH_SCATTER, multi_aggregate, scatter, use_backend

STATS = ("count", "sum", "std", "min", "max")


def pyg_per_statistic(src: torch.Tensor, index: torch.Tensor, n: int) -> dict[str, torch.Tensor]:
    """What a PyG user writes for the same statistics: one scatter each (std as
    PyG's StdAggregation computes it, from two means)."""
    count = pyg_scatter(torch.ones_like(index, dtype=src.dtype), index, 0, n, "sum")
    total = pyg_scatter(src, index, 0, n, "sum")
    mean = pyg_scatter(src, index, 0, n, "mean")
    mean_sq = pyg_scatter(src * src, index, 0, n, "mean")
    std = (mean_sq - mean * mean).clamp(min=1e-5).sqrt()
    std = std.masked_fill(std <= 1e-5**0.5, 0.0)
    return {
        "count": count, "sum": total, "std": std,
        "min": pyg_scatter(src, index, 0, n, "min"),
        "max": pyg_scatter(src, index, 0, n, "max"),
    }


def main() -> None:
    pin_malloc_threshold()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_graph_arguments(parser)
    parser.add_argument("--features", type=int, default=64)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)

    edge_index = power_law_graph(args.nodes, args.edges, device=device)
    index, n = edge_index[1], args.nodes
    src = torch.randn(args.edges, args.features, device=device)
    print(f"power-law graph: {n} nodes, {args.edges} edges, F={args.features}, "
          f"max in-degree {int(torch.bincount(index).max())}, device {device}, "
          f"torch {torch.__version__}, torch_scatter {'yes' if HAS_TORCH_SCATTER else 'no'}, "
          f"threads {torch.get_num_threads()}")

    def fused():
        return multi_aggregate(src, index, n, stats=STATS)

    def pyg():
        return pyg_per_statistic(src, index, n)

    def floor():
        return scatter(src, index, 0, n, "sum")

    # checked against PyG's formulas in float64: in float32 PyG's E[x^2] - mean^2 loses
    # digits on the hubs that the stable variance keeps (a float32 sum over a
    # 48k-entry hub is itself only good to ~3e-3, for every backend)
    ours = fused()
    ref = pyg_per_statistic(src.double(), index, n)
    for name in STATS:
        torch.testing.assert_close(ours[name].to(ref[name].dtype), ref[name], atol=1e-2, rtol=1e-4,
                                   msg=name)

    t_fused = median_time_s(fused, args.repeat)
    t_pyg = median_time_s(pyg, args.repeat)
    t_floor = median_time_s(floor, args.repeat)
    m_fused = peak_memory_mib(fused, device)
    m_pyg = peak_memory_mib(pyg, device)
    m_floor = peak_memory_mib(floor, device)
    print("\n# forward, median of", args.repeat)
    print(ratio_line("multi_aggregate(count,sum,std,min,max)", t_fused, t_pyg, "s"))
    print(ratio_line("  peak memory", m_fused, m_pyg, "MiB"))
    print(f"{'fused / one scatter-sum (target <= 1.5x)':<42} {t_fused / t_floor:6.2f}x "
          f"(sum alone {t_floor:.3f} s, {m_floor:.0f} MiB)")

    backends = ["torch"] + (["native"] if HAS_NATIVE else [])
    print("\n# multi_aggregate forward per backend / one scatter-sum (target <= 1.5x)")
    for backend in backends:
        with use_backend(backend):
            t = median_time_s(fused, args.repeat)
        print(f"  {backend:<14} {t:8.4f} s  {t / t_floor:6.2f}x one scatter-sum")
    # at least: read the messages and the index once, write five [N, F] results
    min_bytes = (src.numel() * src.element_size() + index.numel() * index.element_size()
                 + 4 * n * args.features * src.element_size() + n * 8)
    bandwidth = copy_bandwidth_gb_s(device)
    print(roofline_line("roofline: multi_aggregate (auto)", min_bytes, t_fused, bandwidth))
    print(roofline_line("roofline: one scatter-sum", src.numel() * src.element_size()
                        + index.numel() * index.element_size() + n * args.features * src.element_size(),
                        t_floor, bandwidth))

    src.requires_grad_()

    def fused_bwd():
        out = multi_aggregate(src, index, n, stats=STATS)
        sum(v.sum() for k, v in out.items() if k != "count").backward()

    def pyg_bwd():
        out = pyg_per_statistic(src, index, n)
        sum(v.sum() for k, v in out.items() if k != "count").backward()

    print("\n# forward + backward, median of", args.repeat)
    print(ratio_line("multi_aggregate fwd+bwd", median_time_s(fused_bwd, args.repeat),
                     median_time_s(pyg_bwd, args.repeat), "s"))
    print(ratio_line("  peak memory", peak_memory_mib(fused_bwd, device),
                     peak_memory_mib(pyg_bwd, device), "MiB"))
    for backend in backends:
        with use_backend(backend):
            print(f"  {backend:<14} fwd+bwd {median_time_s(fused_bwd, args.repeat):8.4f} s, "
                  f"peak {peak_memory_mib(fused_bwd, device):7.1f} MiB")
    src.requires_grad_(False)

    backends = ["torch"] + (["torch_scatter"] if HAS_TORCH_SCATTER else [])
    print("\n# scatter per reduction and backend (forward), seconds")
    print(f"{'reduce':<8}" + "".join(f"{b:>16}" for b in backends))
    for reduce in ("sum", "mean", "min", "max"):
        row = []
        for backend in backends:
            with use_backend(backend):
                row.append(median_time_s(lambda r=reduce: scatter(src, index, 0, n, r), args.repeat))
        print(f"{reduce:<8}" + "".join(f"{t:16.4f}" for t in row))


if __name__ == "__main__":
    main()
