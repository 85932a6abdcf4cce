"""TU graph-classification datasets (MUTAG, PROTEINS, ENZYMES, ...), offline."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from torch_geometric.datasets import TUDataset

from pyg_agg.datasets.root import (
    PathLike,
    data_root,
    find_dataset_dir,
    missing_dataset_error,
    private_dataset_dir,
    safe_loading,
)
from pyg_agg.datasets.task import TaskData, accuracy, random_split

if TYPE_CHECKING:
    from pyg_agg.datasets.registry import DatasetSpec

TU_REQUIRED_FILES = ("A", "graph_indicator", "graph_labels")


def load_tu(name: str, root: Optional[PathLike] = None, **kwargs: Any) -> TUDataset:
    r"""Loads the TU dataset ``name`` from the data root, never downloading.

    The raw files (``NAME_A.txt``, ``NAME_graph_indicator.txt``,
    ``NAME_graph_labels.txt``, and the optional label/attribute files) are
    looked for in ``root/NAME/raw`` and then ``root/tu/NAME/raw``. They are
    copied once to the private cache (``$PYG_AGG_CACHE``), where
    :class:`~torch_geometric.datasets.TUDataset` writes its ``processed/`` files;
    a ``processed/`` folder under the root is ignored, never unpickled (see
    :mod:`pyg_agg.datasets.root`).

    Args:
        name: The dataset name as TU spells it, e.g. ``"MUTAG"``.
        root: The data root (default ``$PYG_AGG_DATA`` or ``./datasets``).
        **kwargs: Passed to :class:`~torch_geometric.datasets.TUDataset`
            (``transform``, ``use_node_attr``, ...).

    Raises:
        FileNotFoundError: No folder with ``name``'s raw files was found;
            the message lists the places searched.
    """
    found = tu_folder(name, data_root(root))
    usable = private_dataset_dir(found, f"tu/{name}")
    with safe_loading():
        return TUDataset(root=str(usable.parent), name=name, **kwargs)


def tu_folder(name: str, root: Path) -> Path:
    """``root/NAME`` or ``root/tu/NAME`` holding the required raw files;
    FileNotFoundError naming the places searched."""
    candidates = [name, f"tu/{name}"]
    required = [f"{name}_{suffix}.txt" for suffix in TU_REQUIRED_FILES]
    for rel in candidates:
        found = find_dataset_dir(root, rel)
        if found is not None and all((found / "raw" / f).is_file() for f in required):
            return found
    raise missing_dataset_error(name, root, [f"{rel}/raw/{required[0]}" for rel in candidates])


def locate_tu(spec: DatasetSpec, root: Path) -> Path:
    """The registry's presence check: :func:`tu_folder` for ``spec``'s name."""
    return tu_folder(spec.name, root)


def load_tu_task(spec: DatasetSpec, root: Path) -> TaskData:
    """:func:`load_tu` for training: a fixed 80/10/10 split (seed 0), accuracy."""
    dataset = load_tu(spec.name, root=root)
    return TaskData(
        spec=spec, dataset=dataset, split=random_split(len(dataset)),
        num_features=max(dataset.num_node_features, 1), num_outputs=dataset.num_classes,
        evaluate=accuracy, edge_dim=dataset.num_edge_features or None,
    )
