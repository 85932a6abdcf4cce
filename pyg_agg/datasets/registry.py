"""The dataset registry: one table, :data:`DATASETS`, from name to :class:`DatasetSpec`.

Every name ``pyg-agg train`` accepts is one entry here: its level, task type and
metric, the function that loads (or generates) it and the one that finds its files
under the data root. A name is resolved once per run (:func:`dataset_spec`, a
lookup in the table, reading no file); the spec then travels with the job.

Adding a dataset is one entry in :data:`DATASETS`; a new family of files also needs
its ``locate_*``/``load_*`` pair in a module of this package.

All loaders are offline: they read files already under the data root (``--root``,
``$PYG_AGG_DATA`` or ``./datasets``) and never call a download. Every root is used
through a private cached copy of its raw files (see :mod:`pyg_agg.datasets.root`).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from pyg_agg.datasets.ogb import load_ogbg, load_ogbn, load_ogbn_symmetrised, locate_ogb
from pyg_agg.datasets.planetoid import load_planetoid, locate_planetoid
from pyg_agg.datasets.root import PathLike, data_root
from pyg_agg.datasets.synthetic import block_model_nodes, degree_graphs
from pyg_agg.datasets.task import BINARY, GRAPH, MULTICLASS, NODE, REGRESSION, TaskData
from pyg_agg.datasets.tu import load_tu_task, locate_tu

#: Metrics where a smaller value is better; every other metric is maximised.
LOWER_IS_BETTER = ("rmse",)


@dataclass(frozen=True)
class DatasetSpec:
    """One registry entry.

    Attributes:
        name: the registry spelling (names are matched case-insensitively).
        level: ``"graph"`` (one label per graph) or ``"node"`` (one per node).
        task: ``"binary"``, ``"multiclass"`` or ``"regression"``.
        metric: ``rocauc``, ``ap``, ``rmse`` or ``acc``.
        loader: ``(spec, data root) -> TaskData``; loads the files or generates the set.
        locator: ``(spec, data root) -> folder``, FileNotFoundError naming the expected
            files when they are missing; None for a set generated in memory.
        ogb_molecule: inputs are OGB's categorical atom/bond features, and
            ``pyg-agg build-ogb`` can build the folder from SMILES.
    """

    name: str
    level: str
    task: str
    metric: str
    loader: Callable[[DatasetSpec, Path], TaskData]
    locator: Optional[Callable[[DatasetSpec, Path], Path]] = None
    ogb_molecule: bool = False

    @property
    def higher_is_better(self) -> bool:
        """Whether a larger metric is better (model selection)."""
        return self.metric not in LOWER_IS_BETTER

    def load(self, root: Optional[PathLike] = None) -> TaskData:
        """Loads the set offline from the data root (argument > ``$PYG_AGG_DATA`` >
        ``./datasets``)."""
        return self.loader(self, data_root(root))

    def locate(self, root: Optional[PathLike] = None) -> Optional[Path]:
        """The set's folder under the data root, or None for a generated set;
        FileNotFoundError when its files are missing."""
        return None if self.locator is None else self.locator(self, data_root(root))


def _molecules(name: str, task: str, metric: str) -> DatasetSpec:
    """An ``ogbg-mol*`` entry: OGB's molecule graphs, loadable or buildable from SMILES."""
    return DatasetSpec(name, GRAPH, task, metric, load_ogbg, locate_ogb, ogb_molecule=True)


#: The registry: name -> spec. Adding a dataset is one entry here.
DATASETS: dict[str, DatasetSpec] = {spec.name: spec for spec in (
    _molecules("ogbg-molbace", BINARY, "rocauc"),
    _molecules("ogbg-molbbbp", BINARY, "rocauc"),
    _molecules("ogbg-molclintox", BINARY, "rocauc"),
    _molecules("ogbg-molmuv", BINARY, "ap"),
    _molecules("ogbg-molpcba", BINARY, "ap"),
    _molecules("ogbg-molsider", BINARY, "rocauc"),
    _molecules("ogbg-moltox21", BINARY, "rocauc"),
    _molecules("ogbg-moltoxcast", BINARY, "rocauc"),
    _molecules("ogbg-molhiv", BINARY, "rocauc"),
    _molecules("ogbg-molesol", REGRESSION, "rmse"),
    _molecules("ogbg-molfreesolv", REGRESSION, "rmse"),
    _molecules("ogbg-mollipo", REGRESSION, "rmse"),
    _molecules("ogbg-molchembl", BINARY, "rocauc"),
    DatasetSpec("ogbn-arxiv", NODE, MULTICLASS, "acc", load_ogbn_symmetrised, locate_ogb),
    DatasetSpec("ogbn-products", NODE, MULTICLASS, "acc", load_ogbn, locate_ogb),
    DatasetSpec("ogbn-proteins", NODE, BINARY, "rocauc", load_ogbn, locate_ogb),
    DatasetSpec("Cora", NODE, MULTICLASS, "acc", load_planetoid, locate_planetoid),
    DatasetSpec("CiteSeer", NODE, MULTICLASS, "acc", load_planetoid, locate_planetoid),
    DatasetSpec("MUTAG", GRAPH, MULTICLASS, "acc", load_tu_task, locate_tu),
    DatasetSpec("PROTEINS", GRAPH, MULTICLASS, "acc", load_tu_task, locate_tu),
    DatasetSpec("ENZYMES", GRAPH, MULTICLASS, "acc", load_tu_task, locate_tu),
    DatasetSpec("synthetic-degree", GRAPH, MULTICLASS, "acc", degree_graphs),
    DatasetSpec("synthetic-sbm", NODE, MULTICLASS, "acc", block_model_nodes),
)}


def dataset_names() -> list[str]:
    """Every name :func:`load_dataset` accepts, in table order."""
    return list(DATASETS)


def dataset_spec(name: str) -> DatasetSpec:
    """The entry for ``name`` (case-insensitive); ValueError listing every name if unknown."""
    by_lower = {key.lower(): spec for key, spec in DATASETS.items()}
    if not isinstance(name, str) or name.lower() not in by_lower:
        raise ValueError(f"Unknown dataset {name!r}. Valid datasets: "
                         f"{', '.join(dataset_names())}")
    return by_lower[name.lower()]


def load_dataset(name: str, root: Optional[PathLike] = None) -> TaskData:
    """Loads ``name`` offline from the data root (argument > ``$PYG_AGG_DATA`` >
    ``./datasets``); see :meth:`DatasetSpec.load`."""
    return dataset_spec(name).load(root)
