"""The training loop behind ``pyg-agg train``.

:func:`run_training` trains ``cfg.runs`` independent runs (seeds ``seed``,
``seed + 1``, ...) and writes, under ``cfg.out``::

    run0/config.json   the configuration and which library provided each layer
    run0/metrics.csv   one row per epoch: loss, train/valid/test metric, lr, time
    run0/best.pt       weights at the best validation metric
    run0/last.pt       everything needed to resume (model, optimizer, scheduler,
                       epoch, history, RNG states)
    run0/curves.png    loss and metrics per epoch
    summary.json       per-run results at the best validation epoch, mean and std

A folder that already holds a run is refused unless ``cfg.resume`` or
``cfg.overwrite`` is set, and a lock keeps a second job out while one writes (see
:mod:`pyg_agg.pipelines.run_folder`).

Resuming (``cfg.resume``) restarts every run from its ``last.pt``; an unfinished
epoch is redone from the saved state. Shuffling uses a generator seeded by
``(seed, epoch)`` and the global RNG states are restored, so on CPU a killed and
resumed run ends with exactly the metrics of an uninterrupted one. Checkpoints are
written to a temporary file and renamed (a crash never leaves a torn ``last.pt``)
and loaded with ``torch.load(weights_only=True)``. Every checkpoint is read and
checked against the settings before the dataset is loaded: a corrupt one, or a
changed setting, fails at once and names the file and the setting.

The train metric is computed from the predictions made during the training epoch
(train mode, dropout on), which avoids a second pass over the training set.
"""
from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import math
import os
import random
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from pyg_agg.pipelines import distributed as D
from pyg_agg.pipelines.data import (
    BINARY,
    GRAPH,
    MULTICLASS,
    NODE,
    TaskData,
    canonical_name,
    dataset_level,
    load_dataset,
)
from pyg_agg.pipelines.models import (
    DEGREE_MODELS,
    HEADS,
    MODELS,
    READOUTS,
    GraphNet,
    NodeNet,
)
from pyg_agg.pipelines.run_folder import check_out_path, claim_run_folder

SCHEDULERS = ("none", "plateau", "cosine")
#: ``plateau`` halves the learning rate after this many epochs without a better
#: validation metric (the PNA OGB recipe's setting).
PLATEAU_PATIENCE = 20
#: Settings that may change between a run and its resumption.
RESUMABLE_CHANGES = {"epochs", "runs", "resume", "overwrite", "out", "workers", "device",
                     "root"}
#: What ``last.pt`` holds; a file without all of these is not a usable checkpoint.
CHECKPOINT_KEYS = {"model", "optimizer", "scheduler", "epoch", "history", "best", "wall_s",
                   "rng", "config"}


@dataclass
class TrainConfig:
    """Everything a training job needs; :meth:`validate` checks it before any work."""

    dataset: str
    model: str
    readout: Optional[str] = None
    hidden: int = 64
    layers: int = 3
    heads: int = 1
    towers: int = 1
    head: str = "mlp"
    dropout: float = 0.5
    dropout_after_residual: bool = False
    lr: float = 1e-3
    weight_decay: float = 0.0
    batch_size: int = 32
    num_neighbors: Optional[list[int]] = None
    epochs: int = 100
    runs: int = 1
    seed: int = 0
    scheduler: str = "none"
    min_lr: float = 1e-5
    device: str = "auto"
    workers: int = 0
    root: Optional[str] = None
    out: str = "runs/default"
    resume: bool = False
    overwrite: bool = False
    deterministic: bool = False

    def validate(self) -> TrainConfig:
        """Raises ValueError naming the first bad setting; normalises names in place."""
        self.dataset = canonical_name(self.dataset)
        level = dataset_level(self.dataset)
        if self.model not in MODELS:
            raise ValueError(f"Unknown model {self.model!r}. Valid models: {', '.join(MODELS)}")
        if level == GRAPH:
            self.readout = self.readout or "mean"
            if self.readout not in READOUTS:
                raise ValueError(f"Unknown readout {self.readout!r}. "
                                 f"Valid readouts: {', '.join(READOUTS)}")
            if self.num_neighbors is not None:
                raise ValueError("num_neighbors applies to node-level datasets only")
            if self.head not in HEADS:
                raise ValueError(f"Unknown head {self.head!r}. Valid heads: {', '.join(HEADS)}")
            if self.head == "halving" and self.hidden < 4:
                raise ValueError(f"head 'halving' needs hidden >= 4 (widths h/2, h/4), got "
                                 f"{self.hidden}")
        elif self.readout is not None:
            raise ValueError(f"readout applies to graph-level datasets; {self.dataset} is "
                             "node-level")
        positive = {"hidden": self.hidden, "layers": self.layers, "heads": self.heads,
                    "towers": self.towers, "batch_size": self.batch_size,
                    "epochs": self.epochs, "runs": self.runs}
        for name, value in positive.items():
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name in ("dropout", "lr", "min_lr", "weight_decay"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"{name} must be a finite number, got {getattr(self, name)}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if not self.lr > 0:
            raise ValueError(f"lr must be a positive number, got {self.lr}")
        if not 0 <= self.min_lr <= self.lr:
            raise ValueError(f"min_lr must be in [0, lr={self.lr}], got {self.min_lr}")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if self.workers < 0:
            raise ValueError(f"workers must be >= 0, got {self.workers}")
        if self.scheduler not in SCHEDULERS:
            raise ValueError(f"Unknown scheduler {self.scheduler!r}. "
                             f"Valid schedulers: {', '.join(SCHEDULERS)}")
        if self.model in ("gat", "gatv2") and self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be divisible by heads ({self.heads})")
        if self.readout == "histograph" and self.hidden % 4:
            raise ValueError(f"hidden ({self.hidden}) must be divisible by the 4 heads of the "
                             "histograph readout")
        if self.model == "pna" and self.hidden % self.towers:
            raise ValueError(f"hidden ({self.hidden}) must be divisible by towers "
                             f"({self.towers})")
        if self.num_neighbors is not None:
            if len(self.num_neighbors) != self.layers:
                raise ValueError(f"num_neighbors needs one fan-out per layer ({self.layers}), "
                                 f"got {self.num_neighbors}")
            import torch_geometric.typing as pyg_typing

            if not (pyg_typing.WITH_PYG_LIB or pyg_typing.WITH_TORCH_SPARSE):
                raise ImportError("num_neighbors (NeighborLoader mini-batches) needs pyg-lib "
                                  "or torch-sparse; neither is installed")
        if self.device not in ("auto", "cpu") and not self.device.startswith("cuda"):
            raise ValueError(f"device must be 'auto', 'cpu' or 'cuda[:N]', got {self.device!r}")
        if self.device.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(f"device {self.device!r} requested but CUDA is not available")
        if self.resume and self.overwrite:
            raise ValueError("resume and overwrite exclude each other: continue the runs in "
                             f"{self.out} or replace them, not both")
        check_out_path(Path(self.out))
        return self

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# ------------------------------------------------------------------ helpers


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _rng_state() -> dict[str, Any]:
    _, keys, pos, has_gauss, gauss = np.random.get_state()
    state = {"torch": torch.get_rng_state(), "python": random.getstate(),
             "numpy": {"keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                       "has_gauss": int(has_gauss), "gauss": float(gauss)}}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    np_state = state["numpy"]
    np.random.set_state(("MT19937", np_state["keys"].numpy().astype(np.uint32),
                         np_state["pos"], np_state["has_gauss"], np_state["gauss"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_atomic(obj: Any, path: Path) -> None:
    """``torch.save`` to a temporary file in the same folder, then rename over ``path``."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class CheckpointError(ValueError):
    """A ``last.pt`` that cannot be resumed from: unreadable, or from other settings."""


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Loads a checkpoint written by this module (``weights_only=True``).

    Raises:
        CheckpointError: the file is truncated, empty or garbage; the message names it.
    """
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except PermissionError:
        raise  # its message names the file, and the file may well be fine
    # torch reports a damaged file as OSError, EOFError, RuntimeError, UnpicklingError
    # and more, depending on where the damage is: any of them means "not resumable".
    # Their messages run to paragraphs, so the type alone is kept, for one line.
    except Exception as err:  # noqa: BLE001
        raise CheckpointError(f"{path} is truncated, empty or not a checkpoint (torch.load: "
                              f"{type(err).__name__}); pass --overwrite to start the runs "
                              "over") from err
    return ckpt


def _loss(task: str, out: Tensor, y: Tensor) -> Tensor:
    """Task loss; NaN labels (missing tasks of OGB multi-task sets) are ignored."""
    if task == MULTICLASS:
        return nn.functional.cross_entropy(out, y.view(-1))
    y = y.view(out.shape).float()
    mask = ~torch.isnan(y)
    if task == BINARY:
        return nn.functional.binary_cross_entropy_with_logits(out[mask], y[mask])
    return nn.functional.mse_loss(out[mask], y[mask])


def _improved(value: float, best: Optional[float], higher_is_better: bool) -> bool:
    if best is None:
        return True
    return value > best if higher_is_better else value < best


# ------------------------------------------------------------------ model


def build_model(cfg: TrainConfig, task: TaskData) -> nn.Module:
    """The network for ``cfg.model`` on ``task`` (PNA's degree histogram from train data)."""
    deg = None
    if cfg.model in DEGREE_MODELS:
        from pyg_agg.nn import PNAConv

        graphs = task.dataset[task.split["train"]] if task.level == GRAPH else [task.dataset]
        deg = PNAConv.get_degree_histogram(graphs)
    if task.level == GRAPH:
        return GraphNet(cfg.model, task.num_features, cfg.hidden, task.num_outputs, cfg.layers,
                        cfg.dropout, cfg.readout, task.ogb_mol, task.edge_dim, heads=cfg.heads,
                        deg=deg, towers=cfg.towers, head=cfg.head,
                        dropout_after_residual=cfg.dropout_after_residual)
    return NodeNet(cfg.model, task.num_features, cfg.hidden, task.num_outputs, cfg.layers,
                   cfg.dropout, heads=cfg.heads, deg=deg, towers=cfg.towers)


def _scheduler(cfg: TrainConfig, optimizer: torch.optim.Optimizer, higher_is_better: bool):
    if cfg.scheduler == "plateau":
        return torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer, mode="max" if higher_is_better else "min", factor=0.5,
            patience=PLATEAU_PATIENCE, min_lr=cfg.min_lr)
    if cfg.scheduler == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=cfg.epochs)
    return None


# ------------------------------------------------------------------ epochs


class _Runner:
    """Train/evaluate steps for one task level, DDP-aware."""

    def __init__(self, cfg: TrainConfig, task: TaskData, model: nn.Module,
                 ctx: D.DistContext) -> None:
        self.cfg, self.task, self.model, self.ctx = cfg, task, model, ctx
        self.device = ctx.device
        if task.level == NODE:
            self.data = task.dataset.to(self.device)

    # graph level -------------------------------------------------------
    def _graph_loader(self, index: Tensor, epoch: Optional[int]):
        from torch.utils.data.distributed import DistributedSampler
        from torch_geometric.loader import DataLoader

        subset = self.task.dataset[index]
        kwargs: dict[str, Any] = {"batch_size": self.cfg.batch_size,
                                  "num_workers": self.cfg.workers}
        if epoch is None:  # evaluation: this rank's shard, fixed order
            return DataLoader(self.task.dataset[D.shard(index, self.ctx)], shuffle=False,
                              **kwargs)
        if self.ctx.distributed:
            sampler = DistributedSampler(subset, num_replicas=self.ctx.world_size,
                                         rank=self.ctx.rank, shuffle=True, seed=self.cfg.seed)
            sampler.set_epoch(epoch)
            return DataLoader(subset, sampler=sampler, **kwargs)
        gen = torch.Generator().manual_seed(self.cfg.seed * 100_003 + epoch)
        return DataLoader(subset, shuffle=True, generator=gen, **kwargs)

    def _graph_steps(self, index: Tensor, epoch: int):
        for batch in self._graph_loader(index, epoch):
            batch = batch.to(self.device)
            yield self.model(batch), batch.y

    def _predict_graphs(self, index: Tensor) -> tuple[Tensor, Tensor]:
        outs, ys = [], []
        for batch in self._graph_loader(index, None):
            batch = batch.to(self.device)
            outs.append(self.model(batch))
            ys.append(batch.y)
        if not outs:  # more ranks than graphs in this split
            return torch.empty(0, self.task.num_outputs), torch.empty(0)
        return D.gather_outputs(self.ctx, torch.cat(outs), torch.cat(ys))

    # node level --------------------------------------------------------
    def _node_batches(self, index: Tensor, epoch: int):
        """(out, y) over this rank's training nodes: one full batch or sampled ones."""
        if self.cfg.num_neighbors is None:
            index = index.to(self.device)
            yield self.model(self.data.x, self.data.edge_index)[index], self.data.y[index]
            return
        from torch_geometric.loader import NeighborLoader

        gen = torch.Generator().manual_seed(self.cfg.seed * 100_003 + epoch)
        loader = NeighborLoader(self.data, num_neighbors=self.cfg.num_neighbors,
                                input_nodes=index, batch_size=self.cfg.batch_size,
                                shuffle=True, generator=gen, num_workers=self.cfg.workers)
        for batch in loader:
            batch = batch.to(self.device)
            size = batch.batch_size
            yield self.model(batch.x, batch.edge_index)[:size], batch.y[:size]

    # shared ------------------------------------------------------------
    def train_epoch(self, optimizer: torch.optim.Optimizer, epoch: int,
                    bar: Optional[tqdm]) -> tuple[float, float]:
        """One epoch; returns (mean loss, train metric over the epoch's predictions)."""
        self.model.train()
        index = self.task.split["train"]
        total, count, outs, ys = 0.0, 0, [], []
        if self.task.level == GRAPH:
            steps = self._graph_steps(index, epoch)
        else:
            steps = self._node_batches(D.shard(index, self.ctx), epoch)
        for out, y in steps:
            loss = _loss(self.task.task, out, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * y.size(0)
            count += y.size(0)
            outs.append(out.detach())
            ys.append(y)
            if bar is not None:
                bar.set_postfix(loss=f"{total / count:.4f}")
                bar.update(1)
        total, count = D.all_sum(self.ctx, total, count)
        out_all, y_all = D.gather_outputs(self.ctx, torch.cat(outs), torch.cat(ys))
        return total / max(count, 1), self.task.evaluate(y_all, out_all)

    def num_steps(self) -> int:
        if self.task.level == NODE and self.cfg.num_neighbors is None:
            return 1
        n = self.task.split["train"].numel() // self.ctx.world_size
        return math.ceil(n / self.cfg.batch_size)

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Validation and test metrics (eval mode)."""
        self.model.eval()
        result = {}
        if self.task.level == NODE:
            # full-graph inference, identical on every rank
            out = self.model(self.data.x, self.data.edge_index)
            for split in ("valid", "test"):
                idx = self.task.split[split].to(self.device)
                result[split] = self.task.evaluate(self.data.y[idx], out[idx])
            return result
        for split in ("valid", "test"):
            out, y = self._predict_graphs(self.task.split[split])
            result[split] = self.task.evaluate(y, out)
        return result


# ------------------------------------------------------------------ runs


def _write_csv(path: Path, history: list[dict[str, Any]]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(history[0]))
        writer.writeheader()
        writer.writerows(history)
    os.replace(tmp, path)


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


def _check_resumable(saved: dict[str, Any], cfg: TrainConfig, path: Path) -> None:
    now = cfg.to_dict()
    # Settings added after the checkpoint was written count as their defaults.
    defaults = TrainConfig(dataset="", model="").to_dict()
    changed = [f"{k} was {saved.get(k, defaults[k])!r}, now {now[k]!r}" for k in now
               if k not in RESUMABLE_CHANGES and saved.get(k, defaults[k]) != now[k]]
    if changed:
        raise CheckpointError(f"cannot resume from {path}: settings differ ({'; '.join(changed)}); "
                              "use the same settings, or --overwrite to start over")


def resume_checkpoints(cfg: TrainConfig) -> list[Optional[dict[str, Any]]]:
    """Each run's ``last.pt`` (None where there is none yet), read and checked up front."""
    checkpoints: list[Optional[dict[str, Any]]] = []
    for run in range(cfg.runs):
        path = Path(cfg.out) / f"run{run}" / "last.pt"
        ckpt = load_checkpoint(path) if cfg.resume and path.exists() else None
        if ckpt is not None:
            missing = CHECKPOINT_KEYS - set(ckpt) if isinstance(ckpt, dict) else CHECKPOINT_KEYS
            if missing:
                raise CheckpointError(f"{path} is not a training checkpoint (missing "
                                      f"{', '.join(sorted(missing))}); pass --overwrite to "
                                      "start the runs over")
            _check_resumable(ckpt["config"], cfg, path)
        checkpoints.append(ckpt)
    return checkpoints


def train_run(cfg: TrainConfig, task: TaskData, run: int, ctx: D.DistContext,
              ckpt: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """Trains one run, or resumes it from ``ckpt`` (see :func:`resume_checkpoints`);
    returns its result at the best validation epoch."""
    run_dir = Path(cfg.out) / f"run{run}"
    last_path, best_path = run_dir / "last.pt", run_dir / "best.pt"
    seed = cfg.seed + run
    seed_everything(seed)  # identical initial weights on every rank
    model = build_model(cfg, task).to(ctx.device)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    scheduler = _scheduler(cfg, optimizer, task.higher_is_better)
    history: list[dict[str, Any]] = []
    best: Optional[dict[str, Any]] = None
    start = 1
    wall = 0.0
    if ctx.distributed:
        seed_everything(seed + 7919 * ctx.rank)  # different dropout masks per rank
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        if scheduler is not None:
            scheduler.load_state_dict(ckpt["scheduler"])
        history, best, wall = ckpt["history"], ckpt["best"], ckpt["wall_s"]
        start = ckpt["epoch"] + 1
        _set_rng_state(ckpt["rng"])
    if ctx.is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
        config = {**cfg.to_dict(), "run": run, "run_seed": seed, "world_size": ctx.world_size,
                  "num_parameters": sum(p.numel() for p in model.parameters())}
        (run_dir / "config.json").write_text(json.dumps(config, indent=2))
    net = model
    if ctx.distributed:
        ids = [ctx.device.index] if ctx.device.type == "cuda" else None
        net = nn.parallel.DistributedDataParallel(model, device_ids=ids)
    runner = _Runner(cfg, task, net, ctx)

    for epoch in range(start, cfg.epochs + 1):
        t0 = time.perf_counter()
        bar = tqdm(total=runner.num_steps(), desc=f"run {run} epoch {epoch}/{cfg.epochs}",
                   leave=False, disable=not ctx.is_main, dynamic_ncols=True)
        loss, train_metric = runner.train_epoch(optimizer, epoch, bar)
        scores = runner.evaluate()
        bar.close()
        if isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
            scheduler.step(scores["valid"])
        elif scheduler is not None:
            scheduler.step()
        seconds = time.perf_counter() - t0
        wall += seconds
        row = {"epoch": epoch, "loss": loss, "train": train_metric, "valid": scores["valid"],
               "test": scores["test"], "lr": optimizer.param_groups[0]["lr"],
               "epoch_time_s": round(seconds, 3)}
        history.append(row)
        improved = _improved(row["valid"], best and best["valid"], task.higher_is_better)
        if improved:
            best = dict(row)
        if ctx.is_main:
            if improved:
                save_atomic({"model": model.state_dict(), "epoch": epoch, "metrics": row},
                            best_path)
            save_atomic({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                         "scheduler": None if scheduler is None else scheduler.state_dict(),
                         "epoch": epoch, "history": history, "best": best, "wall_s": wall,
                         "rng": _rng_state(), "config": cfg.to_dict()}, last_path)
            _write_csv(run_dir / "metrics.csv", history)
            tqdm.write(f"run {run} epoch {epoch:3d} | loss {loss:.4f} | {task.metric} "
                       f"train {train_metric:.4f} valid {scores['valid']:.4f} "
                       f"test {scores['test']:.4f} | {seconds:.1f}s")
        D.barrier(ctx)
    if ctx.is_main and history:
        plot_curves(history, task.metric, run_dir / "curves.png")
    assert best is not None
    return {"run": run, "seed": seed, "best_epoch": best["epoch"], "train": best["train"],
            "valid": best["valid"], "test": best["test"], "epochs": len(history),
            "wall_s": round(wall, 2)}


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


def run_training(cfg: TrainConfig) -> dict[str, Any]:
    """Validates ``cfg``, trains all runs, writes ``summary.json``; returns the summary."""
    cfg.validate()
    was_deterministic = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(cfg.deterministic or was_deterministic)
    ctx = D.setup(cfg.device)
    out = Path(cfg.out)
    # only rank 0 writes, so only rank 0 locks; the others wait for its checks
    claim = (claim_run_folder(out, cfg.resume, cfg.overwrite) if ctx.is_main
             else contextlib.nullcontext())
    try:
        with claim:
            D.barrier(ctx)
            checkpoints = resume_checkpoints(cfg)  # a bad checkpoint fails before the data load
            # rank 0 first: it may write the cached copy and processed files the others read
            task = load_dataset(cfg.dataset, cfg.root) if ctx.is_main else None
            D.barrier(ctx)
            if task is None:
                task = load_dataset(cfg.dataset, cfg.root)
            results = [train_run(cfg, task, run, ctx, ckpt)
                       for run, ckpt in enumerate(checkpoints)]
            summary = summarize(results, task)
            summary["config"] = cfg.to_dict()
            if ctx.is_main:
                (out / "summary.json").write_text(json.dumps(summary, indent=2))
                print(format_table(summary))
            return summary
    finally:
        D.teardown(ctx)
        torch.use_deterministic_algorithms(was_deterministic)
