"""Dataset registry for the training pipeline: every name ``pyg-agg train`` accepts.

All loaders are offline: they read files already under the data root (``--root``,
``$PYG_AGG_DATA`` or ``./datasets``) and never call a download. Every root is used
through a private cached copy of its raw files: processed files are written there,
never into the root, and a ``processed/`` folder found under the root is ignored
(see :mod:`pyg_agg.datasets.root` for the trust model).

A loaded dataset is a :class:`TaskData`: the graphs (graph-level tasks) or the one
graph (node-level tasks), the train/valid/test indices, the task type and the
metric. OGB sets are scored with OGB's own ``Evaluator``.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from pyg_agg.datasets.root import (
    PathLike,
    data_root,
    find_dataset_dir,
    missing_dataset_error,
    private_dataset_dir,
    safe_loading,
)

GRAPH, NODE = "graph", "node"
BINARY, MULTICLASS, REGRESSION = "binary", "multiclass", "regression"


@dataclass
class TaskData:
    """A loaded dataset with everything the trainer needs.

    Attributes:
        name: registry name.
        level: ``"graph"`` (one label per graph) or ``"node"`` (one per node).
        dataset: a PyG dataset of graphs (graph level) or one ``Data`` (node level).
        split: ``{"train", "valid", "test"}`` -> index tensor (graph or node ids).
        num_features: input feature width (for OGB molecules: the 9 atom columns).
        num_outputs: output width (tasks for binary/regression, classes for multiclass).
        task: ``"binary"`` (multi-task, NaN = missing label), ``"multiclass"`` or
            ``"regression"``.
        metric: metric name (``rocauc``, ``ap``, ``rmse``, ``acc``).
        higher_is_better: whether a larger metric is better (model selection).
        evaluate: ``(y_true, y_pred) -> float``; ``y_pred`` are raw model outputs.
        ogb_mol: inputs are OGB atom/bond categorical features (use the encoders).
        edge_dim: edge feature width, or None when edges carry no features.
    """

    name: str
    level: str
    dataset: Any
    split: dict[str, Tensor]
    num_features: int
    num_outputs: int
    task: str
    metric: str
    higher_is_better: bool
    evaluate: Callable[[Tensor, Tensor], float]
    ogb_mol: bool = False
    edge_dim: Optional[int] = None


# --------------------------------------------------------------------------- OGB


def ogb_master(level: str) -> pd.DataFrame:
    """ogb's metadata table for ``"graph"`` or ``"node"`` property prediction."""
    import ogb

    path = Path(ogb.__file__).parent / f"{level}proppred" / "master.csv"
    return pd.read_csv(path, index_col=0, keep_default_na=False)


def _ogb_expected_files(meta: pd.Series, level: str) -> list[str]:
    raw = ["edge.csv.gz", "num-node-list.csv.gz", "num-edge-list.csv.gz"]
    if meta["has_node_attr"] == "True":
        raw.append("node-feat.csv.gz")
    if meta["has_edge_attr"] == "True":
        raw.append("edge-feat.csv.gz")
    raw.append("graph-label.csv.gz" if level == GRAPH else "node-label.csv.gz")
    extra = meta["additional node files"]
    if extra != "None":
        raw += [f"{f}.csv.gz" for f in extra.split(",")]
    split = [f"split/{meta['split']}/{s}.csv.gz" for s in ("train", "valid", "test")]
    return [f"RELEASE_v{meta['version']}.txt"] + [f"raw/{f}" for f in raw] + split


def _locate_ogb(name: str, level: str, root: Path) -> tuple[Path, pd.Series]:
    meta = ogb_master(level)[name]
    dir_name = name.replace("-", "_")
    candidates = [dir_name, f"ogb/{dir_name}"]
    expected = _ogb_expected_files(meta, level)
    for rel in candidates:
        path = root / rel
        if all((path / f).is_file() for f in expected):
            return path, meta
    raise missing_dataset_error(name, root, [f"{c}/{f}" for c in candidates for f in expected])


def _ogb_usable_root(src: Path) -> str:
    """The ``root`` to hand to ogb: the parent of a private copy named like OGB's."""
    return str(private_dataset_dir(src, f"ogb/{src.name}").parent)


def _ogb_evaluator(name: str, level: str, task: str) -> Callable[[Tensor, Tensor], float]:
    if level == GRAPH:
        from ogb.graphproppred import Evaluator
    else:
        from ogb.nodeproppred import Evaluator
    evaluator = Evaluator(name)

    def evaluate(y_true: Tensor, y_pred: Tensor) -> float:
        if task == MULTICLASS:
            y_pred = y_pred.argmax(dim=-1, keepdim=True)
            y_true = y_true.view(-1, 1)
        result = evaluator.eval({"y_true": y_true.cpu(), "y_pred": y_pred.detach().cpu()})
        return float(result[evaluator.eval_metric])

    return evaluate


def _load_ogbg(name: str, root: Path) -> TaskData:
    from ogb.graphproppred import PygGraphPropPredDataset

    src, meta = _locate_ogb(name, GRAPH, root)
    with safe_loading():
        dataset = PygGraphPropPredDataset(name=name, root=_ogb_usable_root(src))
    split = {k: v.long() for k, v in dataset.get_idx_split().items()}
    task_type = meta["task type"]
    task = REGRESSION if task_type == "regression" else BINARY
    if task_type not in ("regression", "binary classification"):
        raise ValueError(f"{name}: task type {task_type!r} is not supported by this pipeline")
    metric = meta["eval metric"]
    is_mol = name.startswith("ogbg-mol")
    return TaskData(
        name=name, level=GRAPH, dataset=dataset, split=split,
        num_features=dataset.num_node_features, num_outputs=int(meta["num tasks"]),
        task=task, metric=metric, higher_is_better=metric != "rmse",
        evaluate=_ogb_evaluator(name, GRAPH, task), ogb_mol=is_mol,
        edge_dim=dataset.num_edge_features or None,
    )


def _load_ogbn(name: str, root: Path) -> TaskData:
    from ogb.nodeproppred import PygNodePropPredDataset

    src, meta = _locate_ogb(name, NODE, root)
    with safe_loading():
        dataset = PygNodePropPredDataset(name=name, root=_ogb_usable_root(src))
    split = {k: v.long() for k, v in dataset.get_idx_split().items()}
    data = dataset[0]
    if name == "ogbn-proteins":
        from pyg_agg.ops import scatter

        # proteins has no node features: the usual input is the mean of incident edge features
        data.x = scatter(data.edge_attr, data.edge_index[1], dim_size=data.num_nodes,
                         reduce="mean")
        data.edge_attr = None
        task, outputs = BINARY, int(meta["num tasks"])
        data.y = data.y.float()
    else:
        task, outputs = MULTICLASS, int(meta["num classes"])
        data.y = data.y.view(-1)
    if name == "ogbn-arxiv":
        from torch_geometric.utils import to_undirected

        data.edge_index = to_undirected(data.edge_index, num_nodes=data.num_nodes)
    metric = meta["eval metric"]
    return TaskData(
        name=name, level=NODE, dataset=data, split=split, num_features=data.num_features,
        num_outputs=outputs, task=task, metric=metric, higher_is_better=True,
        evaluate=_ogb_evaluator(name, NODE, task),
    )


# ---------------------------------------------------------------- Planetoid / TU


def _accuracy(y_true: Tensor, y_pred: Tensor) -> float:
    return float((y_pred.argmax(dim=-1) == y_true.view(-1)).float().mean())


def _load_planetoid(name: str, root: Path) -> TaskData:
    from torch_geometric.datasets import Planetoid

    raw = [f"ind.{name.lower()}.{s}" for s in ("x", "tx", "allx", "y", "ty", "ally", "graph",
                                                "test.index")]
    candidates = [f"planetoid/{name}", name]
    src = find_dataset_dir(root, *candidates)
    if src is None or not all((src / "raw" / f).is_file() for f in raw):
        raise missing_dataset_error(name, root, [f"{c}/raw/{f}" for c in candidates for f in raw])
    usable = private_dataset_dir(src, f"planetoid/{name}")
    with safe_loading():
        data = Planetoid(str(usable.parent), name)[0]
    split = {s: m.nonzero().view(-1) for s, m in
             (("train", data.train_mask), ("valid", data.val_mask), ("test", data.test_mask))}
    return TaskData(
        name=name, level=NODE, dataset=data, split=split, num_features=data.num_features,
        num_outputs=int(data.y.max()) + 1, task=MULTICLASS, metric="acc",
        higher_is_better=True, evaluate=_accuracy,
    )


def _random_split(n: int, seed: int = 0) -> dict[str, Tensor]:
    """Fixed 80/10/10 split (TU and synthetic sets have no official one)."""
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    n_train, n_valid = int(0.8 * n), int(0.1 * n)
    return {"train": perm[:n_train], "valid": perm[n_train:n_train + n_valid],
            "test": perm[n_train + n_valid:]}


def _load_tu(name: str, root: Path) -> TaskData:
    from pyg_agg.datasets.tu import load_tu

    dataset = load_tu(name, root=root)
    return TaskData(
        name=name, level=GRAPH, dataset=dataset, split=_random_split(len(dataset)),
        num_features=max(dataset.num_node_features, 1), num_outputs=dataset.num_classes,
        task=MULTICLASS, metric="acc", higher_is_better=True, evaluate=_accuracy,
        edge_dim=dataset.num_edge_features or None,
    )


# -------------------------------------------------------------------- synthetic


def _synthetic_degree_graphs(num_graphs: int = 600, seed: int = 0) -> TaskData:
    """Random graphs with constant features; label: is the mean degree above the median?

    Constant inputs make the label invisible to mean/max aggregation alone: a model
    has to count neighbours (sum aggregation or degree scalers), which is exactly
    where the aggregators of this library differ.
    """
    from torch_geometric.data import Data, InMemoryDataset
    from torch_geometric.utils import erdos_renyi_graph

    gen = torch.Generator().manual_seed(seed)
    torch_state = torch.get_rng_state()
    torch.manual_seed(seed)  # erdos_renyi_graph draws from the global generator
    graphs, mean_deg = [], []
    for _ in range(num_graphs):
        n = int(torch.randint(10, 31, (1,), generator=gen))
        p = float(torch.empty(1).uniform_(0.1, 0.3, generator=gen))
        edge_index = erdos_renyi_graph(n, p)
        graphs.append(Data(x=torch.ones(n, 1), edge_index=edge_index, num_nodes=n))
        mean_deg.append(edge_index.size(1) / n)
    torch.set_rng_state(torch_state)
    median = float(np.median(mean_deg))
    for g, d in zip(graphs, mean_deg, strict=True):
        g.y = torch.tensor([int(d > median)])

    class _Graphs(InMemoryDataset):
        def __init__(self) -> None:
            super().__init__()
            self.data, self.slices = self.collate(graphs)

    dataset = _Graphs()
    return TaskData(
        name="synthetic-degree", level=GRAPH, dataset=dataset, split=_random_split(num_graphs),
        num_features=1, num_outputs=2, task=MULTICLASS, metric="acc", higher_is_better=True,
        evaluate=_accuracy,
    )


def _synthetic_sbm_nodes(num_nodes: int = 400, seed: int = 0) -> TaskData:
    """Stochastic block model, 4 classes, noisy Gaussian features centred on the class."""
    from torch_geometric.data import Data

    gen = torch.Generator().manual_seed(seed)
    classes, dim = 4, 16
    y = torch.arange(num_nodes) % classes
    same = y.view(-1, 1) == y.view(1, -1)
    prob = torch.where(same, torch.tensor(0.05), torch.tensor(0.005))
    adj = torch.rand(num_nodes, num_nodes, generator=gen) < prob
    adj = torch.triu(adj, diagonal=1)
    edge_index = adj.nonzero().t()
    edge_index = torch.cat([edge_index, edge_index.flip(0)], dim=1)
    centres = torch.randn(classes, dim, generator=gen)
    x = centres[y] + 2.0 * torch.randn(num_nodes, dim, generator=gen)
    data = Data(x=x, edge_index=edge_index, y=y, num_nodes=num_nodes)
    return TaskData(
        name="synthetic-sbm", level=NODE, dataset=data, split=_random_split(num_nodes),
        num_features=dim, num_outputs=classes, task=MULTICLASS, metric="acc",
        higher_is_better=True, evaluate=_accuracy,
    )


# --------------------------------------------------------------------- registry

PLANETOID = ("Cora", "CiteSeer")
TU = ("MUTAG", "PROTEINS", "ENZYMES")
OGBN = ("ogbn-arxiv", "ogbn-products", "ogbn-proteins")
SYNTHETIC = {"synthetic-degree": _synthetic_degree_graphs, "synthetic-sbm": _synthetic_sbm_nodes}


def ogbg_mol_names() -> list[str]:
    """Every ``ogbg-mol*`` name ogb knows (the folder must still be under the root)."""
    master = ogb_master(GRAPH)
    return [n for n in master.columns
            if n.startswith("ogbg-mol") and master[n]["task type"] != "subtoken prediction"]


def dataset_names() -> list[str]:
    """All names accepted by :func:`load_dataset`."""
    return [*ogbg_mol_names(), *OGBN, *PLANETOID, *TU, *SYNTHETIC]


def canonical_name(name: str) -> str:
    """The registry spelling of ``name`` (case-insensitive); ValueError listing all if unknown."""
    by_lower = {n.lower(): n for n in dataset_names()}
    if name.lower() not in by_lower:
        raise ValueError(f"Unknown dataset {name!r}. Valid datasets: {', '.join(dataset_names())}")
    return by_lower[name.lower()]


def dataset_level(name: str) -> str:
    """``"graph"`` or ``"node"`` without loading anything."""
    name = canonical_name(name)
    if name in OGBN or name in PLANETOID or name == "synthetic-sbm":
        return NODE
    return GRAPH


def load_dataset(name: str, root: Optional[PathLike] = None) -> TaskData:
    """Loads ``name`` offline from the data root (see module docstring)."""
    name = canonical_name(name)
    if name in SYNTHETIC:
        return SYNTHETIC[name]()
    base = data_root(root)
    if name.startswith("ogbg-"):
        return _load_ogbg(name, base)
    if name in OGBN:
        return _load_ogbn(name, base)
    if name in PLANETOID:
        return _load_planetoid(name, base)
    return _load_tu(name, base)

