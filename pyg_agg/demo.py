"""The library's case in one run (``pyg-agg demo``, ``python -m pyg_agg.demo``): each of
our layers beside PyG's, with the same initial weights and the same budget.

Pairs: our ``GATv2Conv``, ``PNAConv``, ``DegreeScalerAggregation`` and
``LCMAggregation`` against PyG's, and our HISTOGRAPH readout against PyG's
``JumpingKnowledge``. Both networks of a pair are built the same way, PyG's first;
its weights are copied into ours (our layers take PyG's ``state_dict``), and both
train on the same batches in the same order. Each pair trains on a graph set the
library generates (no download) and on ogbg-molbace when the data root holds it.

The table shows, per pair, the last epoch's training loss and the test metric after
it (the same budget, no model selection), the median time of a training epoch and
the median peak memory of one (the rise of the resident set on CPU, see
:mod:`pyg_agg.memory`), each with ours / PyG's. Then a few things PyG's layers
cannot do, measured on the spot. Writes ``<out>/demo.json`` and ``<out>/demo.png``.
"""
from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional

import torch
from torch import nn

from pyg_agg.datasets import dataset_spec, load_dataset
from pyg_agg.datasets.root import data_root
from pyg_agg.datasets.task import TaskData
from pyg_agg.memory import peak_memory_mib, pin_malloc_threshold
from pyg_agg.pipelines.checkpoint import seed_everything
from pyg_agg.pipelines.config import TrainConfig
from pyg_agg.pipelines.distributed import DistContext
from pyg_agg.pipelines.models import PNA_AGGREGATORS, PNA_SCALERS, build_model, degree_histogram
from pyg_agg.pipelines.train import EpochRunner

DEFAULT_EPOCHS = 5
#: The training settings every network of the demo shares (dropout off: both
#: networks of a pair see exactly the same computation).
SETTINGS = dict(hidden=64, layers=3, heads=4, dropout=0.0, lr=3e-3, batch_size=64)


@dataclass(frozen=True)
class Network:
    """One side of a pair: a model of the registry and a readout; with
    ``our_degree_scaler`` PyG's ``PNAConv`` aggregates with our DegreeScalerAggregation."""

    model: str
    readout: str = "mean"
    our_degree_scaler: bool = False

    def build(self, cfg: TrainConfig, task: TaskData) -> nn.Module:
        net = build_model(replace(cfg, model=self.model, readout=self.readout), task)
        if self.our_degree_scaler:
            from pyg_agg.nn.aggr import DegreeScalerAggregation

            deg = degree_histogram(task)
            for conv in net.convs:
                conv.aggr_module = DegreeScalerAggregation(list(PNA_AGGREGATORS),
                                                           list(PNA_SCALERS), deg)
        return net


@dataclass(frozen=True)
class Pair:
    """Our layer and PyG's counterpart; ``same_layer`` is False where PyG has no such
    layer and the counterpart is its nearest one (then only the weights the two
    networks share are copied, and the metrics need not agree)."""

    ours_label: str
    pyg_label: str
    ours: Network
    pyg: Network
    same_layer: bool = True

    @property
    def label(self) -> str:
        if self.same_layer:
            return self.ours_label
        return f"{self.ours_label} vs {self.pyg_label}"


PAIRS = [
    Pair("GATv2Conv", "GATv2Conv", Network("gatv2"), Network("gatv2-pyg")),
    Pair("PNAConv", "PNAConv", Network("pna"), Network("pna-pyg")),
    Pair("DegreeScalerAggregation", "DegreeScalerAggregation",
         Network("pna-pyg", our_degree_scaler=True), Network("pna-pyg")),
    Pair("LCMAggregation", "LCMAggregation", Network("lcm"), Network("lcm-pyg")),
    Pair("HISTOGRAPH", "JumpingKnowledge", Network("gin", "histograph"), Network("gin", "jk-cat"),
         same_layer=False),
]


def molbace_available(root: Optional[str]) -> bool:
    try:
        dataset_spec("ogbg-molbace").locate(root)
    except FileNotFoundError:
        return False
    return True


def _sort_by_target(data: Any) -> Any:
    return data.sort(sort_by_row=False)


def load_sorted(dataset: str, root: Optional[str]) -> TaskData:
    """``dataset`` with every graph's edges sorted by target, which PyG's
    LCMAggregation requires (both networks of every pair get the same graphs)."""
    task = load_dataset(dataset, root)
    task.dataset.transform = _sort_by_target
    return task


def train_network(net: nn.Module, cfg: TrainConfig, task: TaskData,
                  device: torch.device) -> dict[str, float]:
    """Trains ``net`` for ``cfg.epochs``; returns the last epoch's training loss, the
    valid/test metric after it, and the median time and peak memory of an epoch."""
    seed_everything(cfg.seed)
    runner = EpochRunner(cfg, task, net.to(device), DistContext(device=device))
    optimizer = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    seconds: list[float] = []
    peaks: list[float] = []
    losses: list[float] = []

    for epoch in range(1, cfg.epochs + 1):
        def train_epoch(epoch: int = epoch) -> None:
            start = time.perf_counter()
            losses.append(runner.train_epoch(optimizer, epoch, None)[0])
            seconds.append(time.perf_counter() - start)

        peaks.append(peak_memory_mib(train_epoch, device))
    scores = runner.evaluate()
    return {"loss": losses[-1], "valid": scores["valid"], "test": scores["test"],
            "seconds_per_epoch": statistics.median(seconds), "peak_mib": statistics.median(peaks)}


def _summary(result: dict[str, float]) -> str:
    return (f"loss {result['loss']:.4f}, test {result['test']:.3f}, "
            f"{result['seconds_per_epoch']:.2f} s/epoch, "
            f"{result['peak_mib']:.1f} MiB/epoch")


def copy_weights(source: nn.Module, target: nn.Module, strict: bool) -> None:
    """``source``'s weights into ``target``: all of them (``strict``), or those whose
    names and shapes the two networks share."""
    if strict:
        target.load_state_dict(source.state_dict())
        return
    wanted = target.state_dict()
    shared = {k: v for k, v in source.state_dict().items()
              if k in wanted and wanted[k].shape == v.shape}
    target.load_state_dict(shared, strict=False)


def run_pairs(dataset: str, epochs: int, root: Optional[str], seed: int,
              pairs: list[Pair], device: torch.device) -> list[dict[str, Any]]:
    """Trains every pair on ``dataset``; a network that two pairs share (PyG's
    ``PNAConv``) trains once."""
    task = load_sorted(dataset, root)
    cfg = TrainConfig(dataset=dataset, model="", epochs=epochs, seed=seed, root=root, **SETTINGS)
    results: dict[Network, dict[str, float]] = {}
    rows = []
    for pair in pairs:
        seed_everything(seed)
        pyg_net = pair.pyg.build(cfg, task)
        ours_net = pair.ours.build(cfg, task)
        copy_weights(pyg_net, ours_net, strict=pair.same_layer)
        for side, network, net in (("PyG's", pair.pyg, pyg_net), ("ours", pair.ours, ours_net)):
            if network not in results:
                results[network] = train_network(net, cfg, task, device)
                print(f"{task.name}, {pair.label}, {side}: {_summary(results[network])}",
                      flush=True)
        rows.append({"dataset": task.name, "metric": task.metric, "epochs": epochs,
                     "pair": pair.label, "same_layer": pair.same_layer,
                     "ours": results[pair.ours], "pyg": results[pair.pyg]})
    return rows


# ------------------------------------------------------- what PyG's layers cannot do


def lcm_batch_dependence(seed: int) -> dict[str, Any]:
    """How much a degree-3 node's LCM output changes when a degree-16 node joins its
    batch: PyG pads every neighbourhood to the batch's largest degree with zeros
    that enter the learnt operator; ours reduces each neighbourhood by itself (what changes is float rounding)."""
    from torch_geometric.nn.aggr import LCMAggregation as PyGLCMAggregation

    from pyg_agg.nn import LCMAggregation

    torch.manual_seed(seed)
    pyg = PyGLCMAggregation(16, 16)
    ours = LCMAggregation(16, 16)
    ours.load_state_dict(pyg.state_dict())
    small, large = torch.randn(3, 16), torch.randn(16, 16)
    alone = torch.zeros(3, dtype=torch.long)
    together = torch.cat([alone, torch.ones(16, dtype=torch.long)])
    change = {}
    with torch.no_grad():
        for name, aggr in (("pyg", pyg), ("ours", ours)):
            by_itself = aggr(small, alone, dim_size=1)[0]
            in_batch = aggr(torch.cat([small, large]), together, dim_size=2)[0]
            change[name] = float((by_itself - in_batch).abs().max())
    return {"finding": "lcm_batch_independence", **change,
            "line": (f"LCMAggregation: a degree-3 node's output moves by {change['pyg']:.3f} (PyG) "
                     f"vs {change['ours']:.1e} (ours) when a degree-16 node joins its batch")}


def random_edges(num_nodes: int, num_edges: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, num_nodes, (2, num_edges), generator=gen)


def gatv2_memory(num_nodes: int, num_edges: int, seed: int, device: torch.device) -> dict[str, Any]:
    """Peak memory and time of one forward+backward of GATv2Conv(64, 16, heads=4) on
    a random graph: PyG stores the E x heads x channels intermediate, ours recomputes it."""
    from torch_geometric.nn import GATv2Conv as PyGGATv2Conv

    from pyg_agg.nn import GATv2Conv

    torch.manual_seed(seed)
    pyg = PyGGATv2Conv(64, 16, heads=4).to(device)
    ours = GATv2Conv(64, 16, heads=4).to(device)
    ours.load_state_dict(pyg.state_dict())
    edge_index = random_edges(num_nodes, num_edges, seed).to(device)
    x = torch.randn(num_nodes, 64, device=device, requires_grad=True)
    measured = {}
    for name, conv in (("pyg", pyg), ("ours", ours)):
        start = time.perf_counter()
        mib = peak_memory_mib(lambda conv=conv: conv(x, edge_index).sum().backward(), device)
        measured[name] = {"peak_mib": mib, "seconds": time.perf_counter() - start}
    ratio = ratio_of(measured["pyg"]["peak_mib"], measured["ours"]["peak_mib"])
    return {"finding": "gatv2_memory", "nodes": num_nodes, "edges": num_edges, **measured,
            "line": (f"GATv2Conv(64, 16, heads=4), forward+backward on {num_nodes:,} nodes and "
                     f"{num_edges:,} edges: PyG {measured['pyg']['peak_mib']:.0f} MiB, ours "
                     f"{measured['ours']['peak_mib']:.0f} MiB ({ratio:.1f}x less); "
                     f"{measured['pyg']['seconds']:.2f} s vs {measured['ours']['seconds']:.2f} s")}


def lcm_hub_padding(num_nodes: int, seed: int, device: torch.device) -> dict[str, Any]:
    """Ours on a graph with one hub that every other node points to: measured. PyG's
    LCMAggregation pads every node to the hub's degree: its dense input alone is
    computed, not run."""
    from pyg_agg.nn import LCMAggregation

    torch.manual_seed(seed)
    channels = 16
    ours = LCMAggregation(channels, channels).to(device)
    index = torch.cat([torch.zeros(num_nodes - 1, dtype=torch.long), torch.arange(1, num_nodes)])
    index = index.to(device)
    x = torch.randn(index.numel(), channels, device=device, requires_grad=True)
    start = time.perf_counter()
    mib = peak_memory_mib(lambda: ours(x, index, dim_size=num_nodes).sum().backward(), device)
    seconds = time.perf_counter() - start
    pyg_padding_gib = num_nodes * (num_nodes - 1) * channels * 4 / 2**30
    return {"finding": "lcm_hub_padding", "nodes": num_nodes, "ours_peak_mib": mib,
            "ours_seconds": seconds, "pyg_padding_gib": pyg_padding_gib,
            "line": (f"LCMAggregation(16, 16), {num_nodes:,} nodes, one hub of degree "
                     f"{num_nodes - 1:,}: ours {mib:.0f} MiB, {seconds:.2f} s forward+backward; "
                     f"PyG pads every node to degree {num_nodes - 1:,}: "
                     f"{pyg_padding_gib:.0f} GiB for its dense input alone (computed, not run)")}


def what_pyg_cannot_do(seed: int, device: torch.device, full_size: bool = True) -> list[dict[str, Any]]:
    """The findings; ``full_size=False`` measures them on small graphs (for tests)."""
    nodes, edges, hub = (20_000, 400_000, 20_000) if full_size else (500, 5_000, 500)
    return [lcm_batch_dependence(seed), gatv2_memory(nodes, edges, seed, device),
            lcm_hub_padding(hub, seed, device)]


# ------------------------------------------------------------------- report


def ratio_of(numerator: float, denominator: float) -> float:
    """``numerator / denominator``; NaN when the denominator measured zero (a peak
    below the resolution of the resident-set figures)."""
    return numerator / denominator if denominator > 0 else float("nan")


def _ratio(row: dict[str, Any], key: str) -> float:
    return ratio_of(row["ours"][key], row["pyg"][key])


def format_table(rows: list[dict[str, Any]]) -> str:
    """Per dataset: the training loss and test metric of both networks, then time and
    memory with ours / PyG's."""
    lines = []
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        group = [r for r in rows if r["dataset"] == dataset]
        first = group[0]
        both, three = f"{'ours':>6} {'PyG':>6}", f"{'ours':>6} {'PyG':>6} {'ratio':>6}"
        lines += ["", f"{dataset} after {first['epochs']} epochs; ratio = ours / PyG's",
                  f"{'':<31} | {'train loss':<13} | {'test ' + first['metric']:<13} | "
                  f"{'s/epoch':<20} | peak MiB/epoch",
                  f"{'layer (ours vs PyG)':<31} | {both} | {both} | {three} | {three}"]
        for r in group:
            ours, pyg = r["ours"], r["pyg"]
            lines.append(f"{r['pair']:<31} | {ours['loss']:6.4f} {pyg['loss']:6.4f} | "
                         f"{ours['test']:6.3f} {pyg['test']:6.3f} | "
                         f"{ours['seconds_per_epoch']:6.2f} {pyg['seconds_per_epoch']:6.2f} "
                         f"{_ratio(r, 'seconds_per_epoch'):5.2f}x | {ours['peak_mib']:6.1f} "
                         f"{pyg['peak_mib']:6.1f} {_ratio(r, 'peak_mib'):5.2f}x")
    return "\n".join(lines)


def plot_rows(rows: list[dict[str, Any]], path: Path) -> None:
    """Per dataset: metric, time per epoch and peak memory, ours beside PyG's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    panels = [("test", "test {metric}"), ("seconds_per_epoch", "s / training epoch"),
              ("peak_mib", "peak MiB / training epoch")]
    fig, axes = plt.subplots(len(datasets), 3, figsize=(14, 3.4 * len(datasets)), squeeze=False)
    for axis_row, dataset in zip(axes, datasets, strict=True):
        group = [r for r in rows if r["dataset"] == dataset]
        positions = torch.arange(len(group)).tolist()
        for ax, (key, title) in zip(axis_row, panels, strict=True):
            ax.barh([p - 0.2 for p in positions], [r["ours"][key] for r in group], height=0.4,
                    color="tab:blue", label="ours")
            ax.barh([p + 0.2 for p in positions], [r["pyg"][key] for r in group], height=0.4,
                    color="tab:gray", label="PyG")
            ax.set_yticks(positions, [r["pair"] for r in group] if ax is axis_row[0] else [])
            ax.invert_yaxis()
            ax.set_title(f"{dataset}: {title.format(metric=group[0]['metric'])}")
    fig.legend(*axes[0][0].get_legend_handles_labels(), loc="upper center", ncol=2)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / fig.get_figheight()))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def machine_line() -> str:
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    return (f"machine: {os.cpu_count()} CPUs, torch {torch.get_num_threads()} threads, "
            f"load average {load} (1, 5, 15 min)")


def run_demo(out: Path, epochs: int, root: Optional[str], seed: int = 0,
             full_size: bool = True) -> dict[str, Any]:
    """Trains every pair on each dataset, measures the findings, writes
    ``<out>/demo.json`` and ``<out>/demo.png``; returns what it wrote."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    datasets = ["synthetic-degree"]
    if molbace_available(root):
        datasets.append("ogbg-molbace")
    else:
        print(f"ogbg-molbace not under data root {data_root(root)}: skipping it "
              "(set PYG_AGG_DATA or --root to include it)")
    result: dict[str, Any] = {"machine_at_start": machine_line(), "device": str(device)}
    rows = []
    for dataset in datasets:
        rows += run_pairs(dataset, epochs, root, seed, PAIRS, device)
    result["rows"] = rows
    result["findings"] = what_pyg_cannot_do(seed, device, full_size)
    result["machine_at_end"] = machine_line()
    out.mkdir(parents=True, exist_ok=True)
    (out / "demo.json").write_text(json.dumps(result, indent=2))
    plot_rows(rows, out / "demo.png")
    return result


def report(result: dict[str, Any]) -> str:
    """The table, the findings and the machine's load, as printed."""
    return "\n".join([
        format_table(result["rows"]), "", "What PyG's layers cannot do (measured now):",
        *(f"- {f['line']}" for f in result["findings"]), "",
        f"device {result['device']}; at start {result['machine_at_start']}",
        f"at end {result['machine_at_end']}"])


def main(epochs: int, root: Optional[str], out: str, seed: int, threads: int) -> None:
    """``pyg-agg demo``: runs the demo on ``threads`` torch threads and prints its
    report and wall time."""
    for name, value in (("epochs", epochs), ("threads", threads)):
        if value < 1:
            raise ValueError(f"--{name} must be >= 1, got {value}")
    torch.set_num_threads(threads)
    pin_malloc_threshold()  # before the data loads: the memory figures need it
    start = time.perf_counter()
    result = run_demo(Path(out), epochs, root, seed)
    print(report(result))
    print(f"wrote {Path(out) / 'demo.png'} and {Path(out) / 'demo.json'} in "
          f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    import sys

    from pyg_agg.cli import main as cli_main

    sys.exit(cli_main(["demo", *sys.argv[1:]]))
