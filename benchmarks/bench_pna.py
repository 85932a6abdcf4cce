"""PNAConv: pyg_agg vs torch_geometric, forward + backward, same weights.

Timing: both layers in one process, alternating, median of ``--repeat`` runs
after a warm-up. Peak memory: each layer's first forward + backward in a
fresh subprocess, as the rise of the RSS high-water mark ``VmHWM`` after
resetting it (CPU, Linux) or ``torch.cuda.max_memory_allocated``
(CUDA) above the level after the inputs and the model were built.

    python benchmarks/bench_pna.py                        # full size
    python benchmarks/bench_pna.py --nodes 20000 --edges 200000 --repeat 3
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import torch
from common import add_graph_arguments, molecular_batch
from torch_geometric.nn import PNAConv as PyGPNAConv

from pyg_agg.nn import PNAConv

AGGREGATORS = ["mean", "min", "max", "std"]
SCALERS = ["identity", "amplification", "attenuation"]


def power_law_graph(num_nodes: int, num_edges: int, exponent: float = 2.5,
                    seed: int = 0) -> torch.Tensor:
    """Chung-Lu style graph: endpoints drawn with probability ~ rank^(-1/(exponent-1))."""
    gen = torch.Generator().manual_seed(seed)
    weight = torch.arange(1, num_nodes + 1, dtype=torch.float64).pow(-1.0 / (exponent - 1))
    ends = torch.multinomial(weight, 2 * num_edges, replacement=True, generator=gen)
    perm = torch.randperm(num_nodes, generator=gen)  # hubs scattered over the ids
    return perm[ends].view(2, num_edges)


def make_inputs(args: argparse.Namespace, graph: str) -> str:
    """Builds a graph's inputs once and saves them, so that the memory workers
    only load them (building can peak above the layer and hide it from
    ``ru_maxrss``)."""
    torch.manual_seed(0)
    if graph == "powerlaw":
        edge_index, num_nodes = power_law_graph(args.nodes, args.edges), args.nodes
    else:
        edge_index, batch = molecular_batch()
        num_nodes = batch.numel()
    path = os.path.join(args.tmp, f"{graph}.pt")
    torch.save({"edge_index": edge_index, "x": torch.randn(num_nodes, args.channels),
                "edge_attr": torch.randn(edge_index.size(1), args.edge_dim)}, path)
    return path


def build(args: argparse.Namespace, case: dict, device: torch.device):
    data = torch.load(case["path"])
    edge_index, x = data["edge_index"], data["x"]
    edge_attr = data["edge_attr"] if case["edge"] else None
    del data
    deg = PNAConv.get_degree_histogram([_Graph(edge_index, x.size(0))])
    torch.manual_seed(0)
    kwargs = dict(aggregators=AGGREGATORS, scalers=SCALERS, deg=deg, towers=case["towers"],
                  edge_dim=args.edge_dim if case["edge"] else None)
    reference = PyGPNAConv(args.channels, args.channels, **kwargs)
    ours = PNAConv(args.channels, args.channels, **kwargs)
    ours.load_state_dict(reference.state_dict())
    inputs = [t.to(device) if t is not None else None for t in (x, edge_index, edge_attr)]
    inputs[0].requires_grad_()
    return reference.to(device), ours.to(device), inputs


class _Graph:
    def __init__(self, edge_index: torch.Tensor, num_nodes: int):
        self.edge_index, self.num_nodes = edge_index, num_nodes


def step(model, inputs) -> torch.Tensor:
    out = model(*inputs)
    out.square().mean().backward()
    return out


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


def peak_worker(args: argparse.Namespace) -> None:
    """Runs in a subprocess: peak extra memory of one forward + backward."""
    case, device = json.loads(args.case), torch.device(args.device)
    reference, ours, inputs = build(args, case, device)
    model = reference if args.worker == "pyg" else ours
    del reference, ours
    if device.type == "cuda":
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        step(model, inputs)
        sync(device)
        peak = torch.cuda.max_memory_allocated() - base
    else:
        # Reset the kernel's RSS high-water mark (VmHWM) to the current RSS.
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        base = _status_kb("VmRSS")
        step(model, inputs)
        peak = (_status_kb("VmHWM") - base) * 1024
    print(json.dumps({"peak_mb": peak / 2**20}))


def peak_mb(args: argparse.Namespace, case: dict, impl: str) -> float:
    cmd = [sys.executable, __file__, "--worker", impl, "--case", json.dumps(case),
           "--channels", str(args.channels), "--edge-dim", str(args.edge_dim),
           "--device", args.device]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])["peak_mb"]


def time_both(args: argparse.Namespace, case: dict) -> tuple[float, float, float]:
    device = torch.device(args.device)
    reference, ours, inputs = build(args, case, device)
    times: dict[str, list[float]] = {"pyg": [], "ours": []}
    outputs = {}
    for run in range(args.repeat + 1):
        for name, model in (("pyg", reference), ("ours", ours)):
            inputs[0].grad = None
            model.zero_grad(set_to_none=True)
            sync(device)
            start = time.perf_counter()
            outputs[name] = step(model, inputs).detach()
            sync(device)
            if run > 0:  # the first run is a warm-up
                times[name].append(time.perf_counter() - start)
    max_diff = float((outputs["pyg"] - outputs["ours"]).abs().max())
    return statistics.median(times["pyg"]), statistics.median(times["ours"]), max_diff


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_graph_arguments(parser)
    parser.add_argument("--channels", type=int, default=64)
    parser.add_argument("--edge-dim", type=int, default=16)
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory runs")
    parser.add_argument("--worker", choices=["pyg", "ours"], help=argparse.SUPPRESS)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        peak_worker(args)
        return

    print(f"PNAConv fwd+bwd on {args.device}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads; aggregators {AGGREGATORS}, scalers {SCALERS}, "
          f"F={args.channels}, edge_dim={args.edge_dim}, median of {args.repeat}")
    header = (f"{'graph':<28}{'towers':>7}{'edges':>6}{'pyg ms':>10}{'ours ms':>10}"
              f"{'speedup':>9}{'pyg MB':>9}{'ours MB':>9}{'mem ratio':>10}{'max|diff|':>11}")
    print(header)
    args.tmp = tempfile.mkdtemp(prefix="bench_pna_")
    paths = {g: make_inputs(args, g) for g in ("powerlaw", "molecules")}
    cases = [dict(graph=g, path=paths[g], towers=t, edge=e) for g in paths
             for t in (1, 4) for e in (False, True)]
    for case in cases:
        t_ref, t_ours, diff = time_both(args, case)
        if args.no_memory:
            mem = ["-"] * 3
        else:
            m_ref, m_ours = peak_mb(args, case, "pyg"), peak_mb(args, case, "ours")
            mem = [f"{m_ref:.0f}", f"{m_ours:.0f}", f"{m_ours / m_ref:.2f}x"]
        name = (f"powerlaw N={args.nodes // 1000}k E={args.edges // 1000}k"
                if case["graph"] == "powerlaw" else "molecules 128 graphs")
        print(f"{name:<28}{case['towers']:>7}{'yes' if case['edge'] else 'no':>6}"
              f"{t_ref * 1e3:>10.1f}{t_ours * 1e3:>10.1f}{t_ref / t_ours:>8.2f}x"
              f"{mem[0]:>9}{mem[1]:>9}{mem[2]:>10}{diff:>11.1e}", flush=True)
    shutil.rmtree(args.tmp)


if __name__ == "__main__":
    main()
