"""Planetoid citation graphs (Cora, CiteSeer), offline, with their public split."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pyg_agg.datasets.root import (
    find_dataset_dir,
    missing_dataset_error,
    private_dataset_dir,
    safe_loading,
)
from pyg_agg.datasets.task import TaskData, accuracy

if TYPE_CHECKING:
    from pyg_agg.datasets.registry import DatasetSpec

RAW_PARTS = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")


def locate_planetoid(spec: DatasetSpec, root: Path) -> Path:
    """``root/planetoid/NAME`` or ``root/NAME`` holding every ``raw/ind.name.*`` file;
    FileNotFoundError listing them."""
    raw = [f"ind.{spec.name.lower()}.{part}" for part in RAW_PARTS]
    candidates = [f"planetoid/{spec.name}", spec.name]
    src = find_dataset_dir(root, *candidates)
    if src is None or not all((src / "raw" / f).is_file() for f in raw):
        raise missing_dataset_error(spec.name, root,
                                    [f"{c}/raw/{f}" for c in candidates for f in raw])
    return src


def load_planetoid(spec: DatasetSpec, root: Path) -> TaskData:
    """The one citation graph with its public train/valid/test masks as indices."""
    from torch_geometric.datasets import Planetoid

    usable = private_dataset_dir(locate_planetoid(spec, root), f"planetoid/{spec.name}")
    with safe_loading():
        data = Planetoid(str(usable.parent), spec.name)[0]
    split = {s: m.nonzero().view(-1) for s, m in
             (("train", data.train_mask), ("valid", data.val_mask), ("test", data.test_mask))}
    return TaskData(spec=spec, dataset=data, split=split, num_features=data.num_features,
                    num_outputs=int(data.y.max()) + 1, evaluate=accuracy)
