"""Reporting: the per-epoch CSV and line, the curves, and the summary over runs."""
from __future__ import annotations

import csv
import json
import os
import statistics
from pathlib import Path
from typing import Any

from pyg_agg.datasets.task import TaskData


def write_metrics_csv(path: Path, history: list[dict[str, Any]]) -> None:
    """``metrics.csv``: one row per epoch, replaced atomically."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(history[0]))
        writer.writeheader()
        writer.writerows(history)
    os.replace(tmp, path)


def epoch_line(run: int, row: dict[str, Any], metric: str) -> str:
    """The progress line printed after each epoch."""
    return (f"run {run} epoch {row['epoch']:3d} | loss {row['loss']:.4f} | {metric} "
            f"train {row['train']:.4f} valid {row['valid']:.4f} test {row['test']:.4f} | "
            f"{row['epoch_time_s']:.1f}s")


def plot_curves(history: list[dict[str, Any]], metric: str, path: Path) -> None:
    """Loss and train/valid/test metric per epoch, saved as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = [row["epoch"] for row in history]
    fig, (ax_loss, ax_metric) = plt.subplots(1, 2, figsize=(10, 4))
    ax_loss.plot(epochs, [row["loss"] for row in history])
    ax_loss.set(xlabel="epoch", ylabel="training loss")
    for split in ("train", "valid", "test"):
        ax_metric.plot(epochs, [row[split] for row in history], label=split)
    ax_metric.set(xlabel="epoch", ylabel=metric)
    ax_metric.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_by_epoch(curves: dict[str, list[float]], ylabel: str, path: Path) -> None:
    """One line per model of its value by epoch (from 1), saved as a PNG: the
    validation curves of a study, so that a reader sees whether a run had
    converged when its budget ended."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    for model, curve in curves.items():
        axes.plot(range(1, len(curve) + 1), curve, label=model)
    axes.set(xlabel="epoch", ylabel=ylabel)
    axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def summarize(results: list[dict[str, Any]], task: TaskData) -> dict[str, Any]:
    """Mean and (sample) standard deviation over runs of the best-validation metrics."""
    summary: dict[str, Any] = {"dataset": task.name, "metric": task.metric,
                               "higher_is_better": task.higher_is_better, "runs": results}
    for split in ("train", "valid", "test"):
        values = [r[split] for r in results]
        summary[split] = {"mean": statistics.fmean(values),
                          "std": statistics.stdev(values) if len(values) > 1 else 0.0}
    return summary


def format_table(summary: dict[str, Any]) -> str:
    runs = summary["runs"]
    lines = [f"{summary['dataset']}: {summary['metric']} at best validation epoch, "
             f"{len(runs)} run(s)",
             f"{'split':<6} {'mean':>8}   {'std':>7}"]
    for split in ("train", "valid", "test"):
        s = summary[split]
        lines.append(f"{split:<6} {s['mean']:8.4f} ± {s['std']:7.4f}")
    return "\n".join(lines)


def write_json(path: Path, obj: Any) -> None:
    """``config.json`` or ``summary.json``, written to a temporary file and renamed."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj, indent=2))
    os.replace(tmp, path)
