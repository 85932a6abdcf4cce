"""Shared helpers for the side-by-side benchmarks: graphs, timing, peak memory.

Peak memory (:func:`peak_memory_mib`, :func:`pin_malloc_threshold`) comes from
:mod:`pyg_agg.memory`, which the demo shares; see there how it is measured.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch

from pyg_agg.memory import peak_memory_mib, pin_malloc_threshold


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


def add_graph_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every side-by-side benchmark shares: graph size, repeats,
    threads, device, and a competing job."""
    parser.add_argument("--nodes", type=int, default=100_000, help="power-law graph nodes")
    parser.add_argument("--edges", type=int, default=1_000_000, help="power-law graph edges")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs (median, >= 5)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--contend", action="store_true",
                        help="time while a second 2-thread job runs on the same cores")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")


def ratio_line(name: str, ours: float, theirs: float, unit: str, baseline: str = "pyg") -> str:
    return (f"{name:<42} ours {ours:10.3f} {unit:<4} {baseline} {theirs:10.3f} {unit:<4} "
            f"ratio {ours / theirs:6.2f}x")


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


@dataclass
class Case:
    """One side-by-side comparison.

    ``steps`` maps a name to a closure running one forward + backward; every
    step is timed and its peak memory measured, and each one but the
    ``baseline`` is printed as a ratio against it. ``roofline`` lists fused
    ops to set against the copy bandwidth: (label, minimum bytes, closure).
    """

    title: str
    steps: dict[str, Callable[[], object]]
    baseline: str = "pyg"
    inner: int = 1  # calls per timed run, for cases of a few milliseconds
    notes: list[str] = field(default_factory=list)
    roofline: list[tuple[str, int, Callable[[], object]]] = field(default_factory=list)


def alternating_median_times(steps: dict[str, Callable[[], object]], repeat: int,
                             inner: int = 1) -> dict[str, float]:
    """Median seconds per call of each step after a warm-up, interleaving the
    steps so that load changes on a shared machine hit all of them alike."""
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    for step in steps.values():
        step()
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(repeat):
        for name, step in steps.items():
            sync()
            start = time.perf_counter()
            for _ in range(inner):
                step()
            sync()
            times[name].append((time.perf_counter() - start) / inner)
    return {name: statistics.median(t) for name, t in times.items()}


@contextlib.contextmanager
def competing_job(enabled: bool) -> Iterator[None]:
    """Runs a 2-thread matrix-multiply loop in another process meanwhile."""
    if not enabled:
        yield
        return
    code = ("import torch; torch.set_num_threads(2); a = torch.randn(1024, 1024)\n"
            "while True: a = (a @ a).tanh_()")
    job = subprocess.Popen([sys.executable, "-c", code])
    time.sleep(2)  # let it reach its loop
    try:
        yield
    finally:
        job.kill()
        job.wait()


def run_cases(description: str, cases: dict[str, Callable[[argparse.Namespace], Case]],
              add_arguments: Callable[[argparse.ArgumentParser], None] | None = None) -> None:
    """The shared driver of the side-by-side benchmarks.

    Times every step of every case in this process (alternating, median of
    ``--repeat``), then measures each step's peak memory in a fresh
    subprocess whose glibc mmap threshold is pinned, so that one step's
    allocator state never flatters another's. ``--case`` picks cases.
    """
    parser = argparse.ArgumentParser(description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_graph_arguments(parser)
    parser.add_argument("--case", action="append", choices=list(cases),
                        help="run only these cases (default: all)")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory runs")
    parser.add_argument("--memory-worker", help=argparse.SUPPRESS)
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if args.memory_worker:
        pin_malloc_threshold()
        case_name, step_name = args.memory_worker.split(":")
        step = cases[case_name](args).steps[step_name]
        print(json.dumps({"peak_mib": peak_memory_mib(step, device)}))
        return
    bandwidth = copy_bandwidth_gb_s(device)
    print(f"torch {torch.__version__}, device {device}, {torch.get_num_threads()} threads, "
          f"median of {args.repeat}, copy bandwidth {bandwidth:.1f} GB/s"
          + (", with a competing 2-thread job" if args.contend else "")
          # huge pages for large tensors: fewer page faults on fresh outputs (both sides)
          + f", THP_MEM_ALLOC_ENABLE={os.environ.get('THP_MEM_ALLOC_ENABLE', 'unset')}")
    for case_name in args.case or list(cases):
        case = cases[case_name](args)
        print(f"\n== {case.title}")
        for note in case.notes:
            print(note)
        with competing_job(args.contend):
            times = alternating_median_times(case.steps, args.repeat, case.inner)
            rooflines = [(label, min_bytes, median_time_s(fn, args.repeat))
                         for label, min_bytes, fn in case.roofline]
        step_names, baseline = list(case.steps), case.baseline
        del case  # the memory workers build their own
        peaks = {} if args.no_memory else {
            name: memory_in_subprocess(f"{case_name}:{name}") for name in step_names}
        for name in step_names:
            if name == baseline:
                continue
            print(ratio_line(f"{name}: fwd+bwd time (median)", times[name] * 1e3,
                             times[baseline] * 1e3, "ms", baseline))
            if peaks:
                print(ratio_line(f"{name}: peak memory (fwd+bwd)", peaks[name], peaks[baseline],
                                 "MiB", baseline))
            print(f"{name}: speed-up {times[baseline] / times[name]:.2f}x"
                  + (f", memory ratio {peaks[name] / peaks[baseline]:.2f}x" if peaks else ""))
        for label, min_bytes, seconds in rooflines:
            print(roofline_line(label, min_bytes, seconds, bandwidth))
        sys.stdout.flush()


def memory_in_subprocess(worker: str) -> float:
    """Peak MiB of one step (``CASE:STEP``), measured by this script re-run as a
    worker that pins its mmap threshold first (see :func:`pin_malloc_threshold`)."""
    argv = [a for a in sys.argv[1:] if a != "--contend"]
    done = subprocess.run([sys.executable, os.path.abspath(sys.argv[0]), *argv,
                           "--memory-worker", worker], check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])["peak_mib"]
