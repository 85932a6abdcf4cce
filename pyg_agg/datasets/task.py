"""What a loaded dataset hands the trainer: :class:`TaskData`.

A loader turns its :class:`~pyg_agg.datasets.registry.DatasetSpec` (the registry
entry: level, task type, metric) and the files under the data root into a
:class:`TaskData`: the graphs (graph-level tasks) or the one graph (node-level
tasks), the train/valid/test indices and the scoring function.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

import torch
from torch import Tensor

if TYPE_CHECKING:
    from pyg_agg.datasets.registry import DatasetSpec

GRAPH, NODE = "graph", "node"
BINARY, MULTICLASS, REGRESSION = "binary", "multiclass", "regression"


@dataclass
class TaskData:
    """A loaded dataset with everything the trainer needs.

    Attributes:
        spec: the registry entry it was loaded from (name, level, task, metric).
        dataset: a PyG dataset of graphs (graph level) or one ``Data`` (node level).
        split: ``{"train", "valid", "test"}`` -> index tensor (graph or node ids).
        num_features: input feature width (for OGB molecules: the 9 atom columns).
        num_outputs: output width (tasks for binary/regression, classes for multiclass).
        evaluate: ``(y_true, y_pred) -> float``; ``y_pred`` are raw model outputs.
        edge_dim: edge feature width, or None when edges carry no features.
    """

    spec: DatasetSpec
    dataset: Any
    split: dict[str, Tensor]
    num_features: int
    num_outputs: int
    evaluate: Callable[[Tensor, Tensor], float]
    edge_dim: Optional[int] = None

    @property
    def name(self) -> str:
        """The registry name."""
        return self.spec.name

    @property
    def level(self) -> str:
        """``"graph"`` (one label per graph) or ``"node"`` (one per node)."""
        return self.spec.level

    @property
    def task(self) -> str:
        """``"binary"`` (multi-task, NaN = missing label), ``"multiclass"`` or
        ``"regression"``."""
        return self.spec.task

    @property
    def metric(self) -> str:
        """Metric name (``rocauc``, ``ap``, ``rmse``, ``acc``)."""
        return self.spec.metric

    @property
    def higher_is_better(self) -> bool:
        """Whether a larger metric is better (model selection)."""
        return self.spec.higher_is_better

    @property
    def ogb_mol(self) -> bool:
        """Inputs are OGB atom/bond categorical features (use the encoders)."""
        return self.spec.ogb_molecule


def accuracy(y_true: Tensor, y_pred: Tensor) -> float:
    """Share of rows whose largest output is the true class."""
    return float((y_pred.argmax(dim=-1) == y_true.view(-1)).float().mean())


def random_split(n: int, seed: int = 0) -> dict[str, Tensor]:
    """Fixed 80/10/10 split (TU and synthetic sets have no official one)."""
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    n_train, n_valid = int(0.8 * n), int(0.1 * n)
    return {"train": perm[:n_train], "valid": perm[n_train:n_train + n_valid],
            "test": perm[n_train + n_valid:]}
