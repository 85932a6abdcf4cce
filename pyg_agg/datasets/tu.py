"""TU graph-classification datasets (MUTAG, PROTEINS, ENZYMES, ...), offline."""
from __future__ import annotations

from typing import Any, Optional

from torch_geometric.datasets import TUDataset

from pyg_agg.datasets.root import (
    PathLike,
    data_root,
    find_dataset_dir,
    missing_dataset_error,
    private_dataset_dir,
    safe_loading,
)

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
    base = data_root(root)
    candidates = [name, f"tu/{name}"]
    required = [f"{name}_{suffix}.txt" for suffix in TU_REQUIRED_FILES]
    for rel in candidates:
        found = find_dataset_dir(base, rel)
        if found is not None and all((found / "raw" / f).is_file() for f in required):
            break
    else:
        raise missing_dataset_error(name, base, [f"{rel}/raw/{required[0]}" for rel in candidates])
    usable = private_dataset_dir(found, f"tu/{name}")
    with safe_loading():
        return TUDataset(root=str(usable.parent), name=name, **kwargs)
