"""Shared helpers for the side-by-side benchmarks: graphs, timing, peak memory.

Peak memory (:func:`peak_memory_mib`, :func:`pin_malloc_threshold`) comes from
:mod:`pyg_agg.memory`, which the demo shares; see there how it is measured.
"""
from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from pyg_agg.memory import peak_memory_mib, pin_malloc_threshold  # noqa: F401  (for the benchmarks)


def median_time_s(fn: Callable[[], object], repeats: int = 5, warmup: int = 1) -> float:
    """Median wall time of ``fn`` over ``repeats`` runs after ``warmup``."""
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def power_law_graph(
    num_nodes: int = 100_000,
    num_edges: int = 1_000_000,
    exponent: float = 2.1,
    seed: int = 0,
    device: str | torch.device = "cpu",
) -> torch.Tensor:
    """A directed ``[2, E]`` edge index whose in-degrees follow a power law.

    Targets are drawn with probability proportional to ``rank^(-1/(exponent-1))``
    (a Zipf-like tail with hub nodes), sources uniformly.
    """
    gen = torch.Generator().manual_seed(seed)
    weights = torch.arange(1, num_nodes + 1, dtype=torch.float64).pow(-1.0 / (exponent - 1))
    dst = torch.multinomial(weights, num_edges, replacement=True, generator=gen)
    dst = torch.randperm(num_nodes, generator=gen)[dst]  # hubs spread over ids
    src = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    return torch.stack([src, dst]).to(device)


def molecular_batch(
    num_graphs: int = 128, seed: int = 0, device: str | torch.device = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of molecule-like graphs: a random tree of 15-35 atoms plus two
    ring-closing bonds each, both directions (about 25 atoms and 54 directed
    edges per graph). Returns ``(edge_index, batch)``."""
    gen = torch.Generator().manual_seed(seed)
    edges, batch, offset = [], [], 0
    for g in range(num_graphs):
        n = int(torch.randint(15, 36, (1,), generator=gen))
        parent = (torch.rand(n - 1, generator=gen) * torch.arange(1, n)).long()
        rings = torch.randint(0, n, (2, 2), generator=gen)
        und = torch.cat([torch.stack([parent, torch.arange(1, n)]), rings], dim=1)
        edges.append(torch.cat([und, und.flip(0)], dim=1) + offset)
        batch.append(torch.full((n,), g))
        offset += n
    return torch.cat(edges, 1).to(device), torch.cat(batch).to(device)


def add_graph_arguments(parser: argparse.ArgumentParser, device: bool = True) -> None:
    """The options every side-by-side benchmark shares: graph size, repeats, device."""
    parser.add_argument("--nodes", type=int, default=100_000, help="power-law graph nodes")
    parser.add_argument("--edges", type=int, default=1_000_000, help="power-law graph edges")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs (median)")
    if device:
        parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")


def ratio_line(name: str, ours: float, theirs: float, unit: str) -> str:
    return f"{name:<42} ours {ours:10.3f} {unit:<4} pyg {theirs:10.3f} {unit:<4} ratio {ours / theirs:6.2f}x"


def copy_bandwidth_gb_s(device: torch.device, mib: int = 256, repeats: int = 5) -> float:
    """The machine's memory copy bandwidth, measured now: read + write bytes of
    one large ``copy_`` over its median time (GB/s)."""
    src = torch.empty(mib * 2**20 // 4, device=device).normal_()
    dst = torch.empty_like(src)
    seconds = median_time_s(lambda: dst.copy_(src), repeats)
    return 2 * src.numel() * src.element_size() / seconds / 1e9


def roofline_line(name: str, min_bytes: int, seconds: float, bandwidth_gb_s: float) -> str:
    """How close an op runs to the memory limit: the bytes it must move at least
    (each input read once, each output written once) over its time, against the
    measured copy bandwidth."""
    achieved = min_bytes / seconds / 1e9
    return (f"{name:<42} {min_bytes / 2**20:8.1f} MiB min traffic in {seconds * 1e3:8.2f} ms = "
            f"{achieved:6.2f} GB/s, {100 * achieved / bandwidth_gb_s:5.1f}% of copy {bandwidth_gb_s:.1f} GB/s")
