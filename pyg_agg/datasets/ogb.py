"""Open Graph Benchmark sets (``ogbg-*``, ``ogbn-*``), loaded offline.

A set's folder must already be under the data root, named as OGB names it on disk
(``ogbg_molbace``), directly or under ``ogb/``; the files it must hold come from
ogb's own metadata table (``master.csv``), read once per process. The folder is
used through a private cached copy (see :mod:`pyg_agg.datasets.root`), and the
set is scored with OGB's ``Evaluator``.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
from torch import Tensor

from pyg_agg.datasets.root import missing_dataset_error, private_dataset_dir, safe_loading
from pyg_agg.datasets.task import BINARY, GRAPH, MULTICLASS, NODE, TaskData

if TYPE_CHECKING:
    from pyg_agg.datasets.registry import DatasetSpec


@functools.cache
def ogb_master(level: str) -> pd.DataFrame:
    """ogb's metadata table for ``"graph"`` or ``"node"`` property prediction (read once)."""
    import ogb

    if level not in (GRAPH, NODE):
        raise ValueError(f"level must be {GRAPH!r} or {NODE!r}, got {level!r}")
    path = Path(ogb.__file__).parent / f"{level}proppred" / "master.csv"
    return pd.read_csv(path, index_col=0, keep_default_na=False)


def _expected_files(meta: pd.Series, level: str) -> list[str]:
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


def locate_ogb(spec: DatasetSpec, root: Path) -> Path:
    """The folder holding every file of ``spec``'s set; FileNotFoundError listing them."""
    dir_name = spec.name.replace("-", "_")
    candidates = [dir_name, f"ogb/{dir_name}"]
    expected = _expected_files(ogb_master(spec.level)[spec.name], spec.level)
    for rel in candidates:
        path = root / rel
        if all((path / f).is_file() for f in expected):
            return path
    raise missing_dataset_error(spec.name, root,
                                [f"{c}/{f}" for c in candidates for f in expected])


def _load(spec: DatasetSpec, root: Path):
    """ogb's PyG dataset for ``spec``, processed in the private cache."""
    if spec.level == GRAPH:
        from ogb.graphproppred import PygGraphPropPredDataset as OgbDataset
    else:
        from ogb.nodeproppred import PygNodePropPredDataset as OgbDataset
    src = locate_ogb(spec, root)
    usable = private_dataset_dir(src, f"ogb/{src.name}")
    with safe_loading():
        dataset = OgbDataset(name=spec.name, root=str(usable.parent))
    split = {k: v.long() for k, v in dataset.get_idx_split().items()}
    return dataset, split


def _evaluator(spec: DatasetSpec) -> Callable[[Tensor, Tensor], float]:
    if spec.level == GRAPH:
        from ogb.graphproppred import Evaluator
    else:
        from ogb.nodeproppred import Evaluator
    evaluator = Evaluator(spec.name)

    def evaluate(y_true: Tensor, y_pred: Tensor) -> float:
        if spec.task == MULTICLASS:
            y_pred = y_pred.argmax(dim=-1, keepdim=True)
            y_true = y_true.view(-1, 1)
        result = evaluator.eval({"y_true": y_true.cpu(), "y_pred": y_pred.detach().cpu()})
        return float(result[evaluator.eval_metric])

    return evaluate


def load_ogbg(spec: DatasetSpec, root: Path) -> TaskData:
    """An ``ogbg-*`` set: one label row per graph, OGB's split and metric."""
    dataset, split = _load(spec, root)
    return TaskData(
        spec=spec, dataset=dataset, split=split, num_features=dataset.num_node_features,
        num_outputs=int(ogb_master(GRAPH)[spec.name]["num tasks"]),
        evaluate=_evaluator(spec), edge_dim=dataset.num_edge_features or None,
    )


def load_ogbn(spec: DatasetSpec, root: Path) -> TaskData:
    """An ``ogbn-*`` set: one graph, OGB's node split and metric.

    A set without node features (ogbn-proteins) gets the usual input instead: the
    mean of each node's incident edge features, the edge features then dropped.
    """
    from pyg_agg.ops import scatter

    dataset, split = _load(spec, root)
    data = dataset[0]
    meta = ogb_master(NODE)[spec.name]
    if data.x is None:
        data.x = scatter(data.edge_attr, data.edge_index[1], dim_size=data.num_nodes,
                         reduce="mean")
        data.edge_attr = None
    if spec.task == BINARY:
        outputs = int(meta["num tasks"])
        data.y = data.y.float()
    else:
        outputs = int(meta["num classes"])
        data.y = data.y.view(-1)
    return TaskData(spec=spec, dataset=data, split=split, num_features=data.num_features,
                    num_outputs=outputs, evaluate=_evaluator(spec))


def load_ogbn_symmetrised(spec: DatasetSpec, root: Path) -> TaskData:
    """:func:`load_ogbn` with every edge also reversed (ogbn-arxiv ships directed
    citations; the usual recipe trains on the undirected graph)."""
    from torch_geometric.utils import to_undirected

    task = load_ogbn(spec, root)
    data = task.dataset
    data.edge_index = to_undirected(data.edge_index, num_nodes=data.num_nodes)
    return task
