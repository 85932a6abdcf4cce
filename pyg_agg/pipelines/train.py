"""The training loop behind ``pyg-agg train``.

The job is split by concern: settings and their validation in
:mod:`~pyg_agg.pipelines.config`, networks in :mod:`~pyg_agg.pipelines.models`,
checkpoints and RNG state in :mod:`~pyg_agg.pipelines.checkpoint`, CSV, curves and
summary in :mod:`~pyg_agg.pipelines.report`, the ``--out`` folder in
:mod:`~pyg_agg.pipelines.run_folder`; this module is the loop.

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
import math
import time
from pathlib import Path
from typing import Any, Optional

import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from pyg_agg.datasets.task import BINARY, GRAPH, MULTICLASS, NODE, TaskData
from pyg_agg.pipelines import distributed as D
from pyg_agg.pipelines.checkpoint import resume_checkpoints, rng_state, save_atomic, seed_everything, set_rng_state
from pyg_agg.pipelines.config import TrainConfig
from pyg_agg.pipelines.models import build_model
from pyg_agg.pipelines.report import epoch_line, format_table, plot_curves, summarize, write_json, write_metrics_csv
from pyg_agg.pipelines.run_folder import claim_run_folder

#: ``plateau`` halves the learning rate after this many epochs without a better
#: validation metric (the PNA OGB recipe's setting).
PLATEAU_PATIENCE = 20



# ------------------------------------------------------------------ helpers


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


def _scheduler(cfg: TrainConfig, optimizer: torch.optim.Optimizer, higher_is_better: bool):
    if cfg.scheduler == "plateau":
        return torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer, mode="max" if higher_is_better else "min", factor=0.5,
            patience=PLATEAU_PATIENCE, min_lr=cfg.min_lr)
    if cfg.scheduler == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=cfg.epochs)
    return None


# ------------------------------------------------------------------ epochs


class EpochRunner:
    """Train/evaluate steps for one task level, DDP-aware (the demo trains with it too)."""

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
        set_rng_state(ckpt["rng"])
    if ctx.is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
        config = {**cfg.to_dict(), "run": run, "run_seed": seed, "world_size": ctx.world_size,
                  "num_parameters": sum(p.numel() for p in model.parameters())}
        write_json(run_dir / "config.json", config)
    net = model
    if ctx.distributed:
        ids = [ctx.device.index] if ctx.device.type == "cuda" else None
        net = nn.parallel.DistributedDataParallel(model, device_ids=ids)
    runner = EpochRunner(cfg, task, net, ctx)

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
                         "rng": rng_state(), "config": cfg.to_dict()}, last_path)
            write_metrics_csv(run_dir / "metrics.csv", history)
            tqdm.write(epoch_line(run, row, task.metric))
        D.barrier(ctx)
    if ctx.is_main and history:
        plot_curves(history, task.metric, run_dir / "curves.png")
    assert best is not None
    return {"run": run, "seed": seed, "best_epoch": best["epoch"], "train": best["train"],
            "valid": best["valid"], "test": best["test"], "epochs": len(history),
            "wall_s": round(wall, 2)}


def run_training(cfg: TrainConfig) -> dict[str, Any]:
    """Validates ``cfg``, trains all runs, writes ``summary.json``; returns the summary."""
    spec = cfg.validate()
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
            task = spec.load(cfg.root) if ctx.is_main else None
            D.barrier(ctx)
            if task is None:
                task = spec.load(cfg.root)
            results = [train_run(cfg, task, run, ctx, ckpt)
                       for run, ckpt in enumerate(checkpoints)]
            summary = summarize(results, task)
            summary["config"] = cfg.to_dict()
            if ctx.is_main:
                write_json(out / "summary.json", summary)
                print(format_table(summary))
            return summary
    finally:
        D.teardown(ctx)
        torch.use_deterministic_algorithms(was_deterministic)
