"""The library's main job: train our four operators and PyG baselines side by
side and print a comparison table (``python -m pyg_agg.demo``).

Runs on a graph-classification set the library generates itself (no
download), plus ogbg-molbace when the data root holds it. Writes
``<out>/demo.png`` (test metric and wall time per model) and
``<out>/demo.json``; every training run also leaves its own artefacts
(metrics.csv, curves.png, checkpoints) under ``<out>/<dataset>/<model>``. Those
folders belong to the demo, and running it again regenerates them (``overwrite``).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, Optional

import torch

from pyg_agg.datasets import dataset_spec
from pyg_agg.datasets.root import data_root
from pyg_agg.pipelines.config import TrainConfig
from pyg_agg.pipelines.train import run_training

#: (label, model, readout, family): ours first, then PyG's baselines.
LINEUP = [
    ("GATv2 (ours)", "gatv2", "mean", "ours"),
    ("PNA (ours)", "pna", "mean", "ours"),
    ("LCM (ours)", "lcm", "mean", "ours"),
    ("GIN + HISTOGRAPH (ours)", "gin", "histograph", "ours"),
    ("GAT (PyG)", "gat", "mean", "pyg"),
    ("GCN (PyG)", "gcn", "mean", "pyg"),
    ("GIN (PyG)", "gin", "mean", "pyg"),
    ("GIN + JK-cat (PyG)", "gin", "jk-cat", "pyg"),
]


def _molbace_available(root: Optional[str]) -> bool:
    base = data_root(root)
    return any((base / rel / "raw").is_dir() for rel in ("ogbg_molbace", "ogb/ogbg_molbace"))


def run_demo(out: Path, epochs: int, root: Optional[str], seed: int = 0) -> list[dict[str, Any]]:
    datasets = [("synthetic-degree", epochs)]
    if _molbace_available(root):
        datasets.append(("ogbg-molbace", max(1, epochs // 2)))
    else:
        print(f"ogbg-molbace not under data root {data_root(root)}: skipping it "
              "(set PYG_AGG_DATA or --root to include it)")
    rows = []
    for dataset, n_epochs in datasets:
        for label, model, readout, family in LINEUP:
            cfg = TrainConfig(
                dataset=dataset, model=model, readout=readout, hidden=64, layers=3,
                dropout=0.0, lr=3e-3, batch_size=64, epochs=n_epochs, seed=seed, root=root,
                out=str(out / dataset_spec(dataset).name / f"{model}-{readout}"), overwrite=True,
            )
            start = time.perf_counter()
            summary = run_training(cfg)
            rows.append({
                "dataset": summary["dataset"], "model": label, "family": family,
                "metric": summary["metric"], "higher_is_better": summary["higher_is_better"],
                "valid": summary["valid"]["mean"], "test": summary["test"]["mean"],
                "seconds": time.perf_counter() - start,
            })
    return rows


def format_rows(rows: list[dict[str, Any]]) -> str:
    lines = []
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        group = [r for r in rows if r["dataset"] == dataset]
        metric = group[0]["metric"]
        best = (max if group[0]["higher_is_better"] else min)(r["test"] for r in group)
        lines += ["", f"{dataset} ({metric}, best-validation epoch)",
                  f"{'model':<26} {'valid':>8} {'test':>8} {'time s':>8}"]
        for r in group:
            mark = "  <- best test" if r["test"] == best else ""
            lines.append(f"{r['model']:<26} {r['valid']:8.4f} {r['test']:8.4f} {r['seconds']:8.1f}{mark}")
    return "\n".join(lines)


def plot_rows(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    fig, axes = plt.subplots(len(datasets), 2, figsize=(11, 3.2 * len(datasets)), squeeze=False)
    for axis_row, dataset in zip(axes, datasets, strict=True):
        group = [r for r in rows if r["dataset"] == dataset]
        labels = [r["model"] for r in group]
        colours = ["tab:blue" if r["family"] == "ours" else "tab:gray" for r in group]
        axis_row[0].barh(labels, [r["test"] for r in group], color=colours)
        axis_row[0].set_title(f"{dataset}: test {group[0]['metric']}")
        axis_row[1].barh(labels, [r["seconds"] for r in group], color=colours)
        axis_row[1].set_title("wall time (s)")
        for ax in axis_row:
            ax.invert_yaxis()
        axis_row[1].set_yticklabels([])
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--root", default=None, help="data root (default $PYG_AGG_DATA or ./datasets)")
    parser.add_argument("--out", default="runs/demo")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.epochs < 1:
        parser.error("--epochs must be >= 1")
    torch.set_num_threads(max(1, torch.get_num_threads()))
    out = Path(args.out)
    start = time.perf_counter()
    rows = run_demo(out, args.epochs, args.root, args.seed)
    out.mkdir(parents=True, exist_ok=True)
    (out / "demo.json").write_text(json.dumps(rows, indent=2))
    plot_rows(rows, out / "demo.png")
    print(format_rows(rows))
    print(f"\nwrote {out / 'demo.png'} and {out / 'demo.json'} in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
