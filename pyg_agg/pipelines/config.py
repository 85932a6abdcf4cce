"""The settings of a training job (:class:`TrainConfig`) and their one validation.

:meth:`TrainConfig.validate` runs once, at the start of
:func:`pyg_agg.pipelines.train.run_training`, before anything is loaded or written:
it names the first bad setting, and resolves the dataset name in the registry
(:mod:`pyg_agg.datasets.registry`) once for the whole run. Model, readout and head constraints come from the
model registry (:func:`pyg_agg.pipelines.models.check_architecture`).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import torch

from pyg_agg.datasets.registry import DatasetSpec, dataset_spec
from pyg_agg.datasets.task import GRAPH
from pyg_agg.pipelines.models import check_architecture, model_spec
from pyg_agg.pipelines.run_folder import check_out_path

SCHEDULERS = ("none", "plateau", "cosine")


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

    def validate(self) -> DatasetSpec:
        """Raises ValueError naming the first bad setting; normalises names in place.

        Returns the dataset's registry entry: the run loads from it, without
        resolving the name again.
        """
        spec = dataset_spec(self.dataset)
        self.dataset, level = spec.name, spec.level
        model_spec(self.model)  # an unknown model is the first thing to report
        if level == GRAPH:
            self.readout = self.readout or "mean"
            if self.num_neighbors is not None:
                raise ValueError("num_neighbors applies to node-level datasets only")
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
        check_architecture(self.model, graph_level=level == GRAPH, hidden=self.hidden,
                           heads=self.heads, towers=self.towers, readout=self.readout,
                           head=self.head)
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
        return spec

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
