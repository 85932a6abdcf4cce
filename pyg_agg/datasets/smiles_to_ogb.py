"""Builds any ``ogbg-mol*`` set's OGB-format folder from a SMILES CSV (``pyg-agg build-ogb``).

:func:`build_ogb` turns every SMILES into a graph with OGB's ``smiles2graph`` (9 atom
and 3 bond features, RDKit), splits by Bemis-Murcko scaffold and writes exactly the
files ``ogb.graphproppred.PygGraphPropPredDataset`` reads::

    ROOT/ogbg_molhiv/RELEASE_v1.txt
    ROOT/ogbg_molhiv/raw/{edge,edge-feat,node-feat,num-node-list,num-edge-list,graph-label}.csv.gz
    ROOT/ogbg_molhiv/split/scaffold/{train,valid,test}.csv.gz
    ROOT/ogbg_molhiv/mapping/mol.csv.gz     labels, SMILES and source row of every graph
    ROOT/ogbg_molhiv/build_report.json      counts, statistics, lenient and invalid rows

Scaffold split (as OGB / Hu et al., 2020): Murcko scaffold SMILES with chirality;
molecules grouped by scaffold; groups sorted by size, largest first (ties: larger
first index first); groups fill train up to 80%, then valid up to 90%, the rest test;
each split file lists its indices in ascending order. Rebuilt from their own SMILES,
the official ogbg-molbace, -molbbbp, -molesol and -molfreesolv folders come out with
the same raw and split files (tested).

Lenient fallback: a few SMILES that older RDKit versions accepted fail today's
default sanitization (e.g. hypervalent Al, ``[B-2]``). Such a row is parsed with
``sanitize=False``, its property cache updated non-strictly and ring, aromaticity,
conjugation and hybridisation perceived, then featurised with OGB's own atom/bond
feature functions. Their scaffold is the Murcko core of the unsanitized molecule;
on HIV each is unique, so each row is a scaffold group of its own (most likely as
in OGB's split, which cannot be checked offline). They are listed in the report.
Rows that do not parse
even so are *invalid*: reported with row number and text, and either an error
(default) or, with ``on_invalid="skip"``, left out of the dataset and listed.
"""
from __future__ import annotations

import gzip
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd

from pyg_agg.datasets.ogb import ogb_master
from pyg_agg.datasets.registry import DATASETS
from pyg_agg.datasets.root import PathLike
from pyg_agg.datasets.task import BINARY, GRAPH

SPLITS = ("scaffold",)


@dataclass
class BuildReport:
    """What :func:`build_ogb` did; also written as ``build_report.json``."""

    name: str
    path: str
    num_rows: int
    num_graphs: int
    mean_nodes: float
    mean_bonds: float
    split_sizes: dict[str, int]
    lenient_rows: list[dict[str, Any]] = field(default_factory=list)
    invalid_rows: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    rdkit_version: str = ""


class InvalidSmilesError(ValueError):
    """Rows that no parser accepted; ``rows`` holds ``{"row", "smiles", "error"}`` dicts."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows
        listing = "; ".join(f"row {r['row']}: {r['smiles']!r} ({r['error']})" for r in rows)
        super().__init__(f"{len(rows)} SMILES row(s) could not be parsed (0-based data rows; "
                         f"use on_invalid='skip' to leave them out): {listing}")


def _lenient_mol(smiles: str):
    """Parses without default sanitization, then perceives what OGB's features need."""
    from rdkit import Chem

    mol = Chem.MolFromSmiles(smiles, sanitize=False)
    if mol is None:
        return None
    mol.UpdatePropertyCache(strict=False)
    flags = (Chem.SanitizeFlags.SANITIZE_SYMMRINGS | Chem.SanitizeFlags.SANITIZE_SETAROMATICITY
             | Chem.SanitizeFlags.SANITIZE_SETCONJUGATION
             | Chem.SanitizeFlags.SANITIZE_SETHYBRIDIZATION)
    Chem.SanitizeMol(mol, flags, catchErrors=True)
    return mol


def mol_to_graph(mol) -> dict[str, Any]:
    """OGB's graph dict for an RDKit molecule: the body of ``smiles2graph`` after parsing."""
    from ogb.utils.features import atom_to_feature_vector, bond_to_feature_vector

    x = np.array([atom_to_feature_vector(a) for a in mol.GetAtoms()], dtype=np.int64)
    pairs, feats = [], []
    for bond in mol.GetBonds():
        i, j = bond.GetBeginAtomIdx(), bond.GetEndAtomIdx()
        feat = bond_to_feature_vector(bond)
        pairs += [(i, j), (j, i)]
        feats += [feat, feat]
    edge_index = np.array(pairs, dtype=np.int64).reshape(-1, 2).T
    edge_feat = np.array(feats, dtype=np.int64).reshape(-1, 3)
    return {"edge_index": edge_index, "edge_feat": edge_feat, "node_feat": x,
            "num_nodes": len(x)}


def murcko_scaffold(smiles: str) -> str:
    """Bemis-Murcko scaffold SMILES with chirality (empty for acyclic molecules)."""
    from rdkit.Chem.Scaffolds import MurckoScaffold

    return MurckoScaffold.MurckoScaffoldSmiles(smiles=smiles, includeChirality=True)


def _lenient_scaffold(mol) -> str:
    """Murcko core SMILES of a leniently parsed molecule; it skips the sanitization
    that :func:`murcko_scaffold` needs and these molecules fail."""
    from rdkit import Chem

    return Chem.MolToSmiles(Chem.MurckoDecompose(mol))


def scaffold_split(scaffolds: list[str], frac_train: float = 0.8,
                   frac_valid: float = 0.1) -> dict[str, list[int]]:
    """OGB's deterministic scaffold split of positions ``0..len(scaffolds)-1``.

    Groups of equal size are taken in descending order of their first index, as OGB
    (and Hu et al.'s ``scaffold_split``) did; each part is returned sorted ascending,
    as in OGB's split files.
    """
    groups: dict[str, list[int]] = {}
    for i, scaffold in enumerate(scaffolds):
        groups.setdefault(scaffold, []).append(i)
    ordered = sorted(groups.values(), key=lambda g: (len(g), g[0]), reverse=True)
    n = len(scaffolds)
    train_cut, valid_cut = frac_train * n, (frac_train + frac_valid) * n
    split: dict[str, list[int]] = {"train": [], "valid": [], "test": []}
    for group in ordered:
        if len(split["train"]) + len(group) <= train_cut:
            split["train"] += group
        elif len(split["train"]) + len(split["valid"]) + len(group) <= valid_cut:
            split["valid"] += group
        else:
            split["test"] += group
    return {part: sorted(idx) for part, idx in split.items()}


def _featurise(smiles_list: list[str]):
    """Graphs, scaffolds, lenient and invalid rows for every SMILES (None for invalid)."""
    from ogb.utils.mol import smiles2graph
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")  # failures are collected and reported instead
    graphs: list[Optional[dict[str, Any]]] = []
    scaffolds: list[Optional[str]] = []
    lenient, invalid = [], []
    for row, smiles in enumerate(smiles_list):
        if not isinstance(smiles, str) or not smiles.strip():
            invalid.append({"row": row, "smiles": str(smiles), "error": "empty SMILES"})
            graphs.append(None)
            scaffolds.append(None)
        elif Chem.MolFromSmiles(smiles) is not None:
            graphs.append(smiles2graph(smiles))
            scaffolds.append(murcko_scaffold(smiles))
        else:
            mol = _lenient_mol(smiles)
            if mol is None:
                invalid.append({"row": row, "smiles": smiles, "error": "RDKit cannot parse"})
                graphs.append(None)
                scaffolds.append(None)
            else:
                lenient.append({"row": row, "smiles": smiles})
                graphs.append(mol_to_graph(mol))
                scaffolds.append(_lenient_scaffold(mol))
    return graphs, scaffolds, lenient, invalid


def _read_smiles_table(path: PathLike, limit: Optional[int]) -> pd.DataFrame:
    """The CSV as a table; ValueError naming the file when it cannot be one."""
    try:
        table = pd.read_csv(path, nrows=limit)
    except FileNotFoundError:
        raise FileNotFoundError(f"smiles_csv {path} does not exist") from None
    except gzip.BadGzipFile:
        raise ValueError(f"smiles_csv {path} is named like a gzip file but is not "
                         "gzip-compressed") from None
    except pd.errors.EmptyDataError:
        raise ValueError(f"smiles_csv {path} is empty") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as err:
        reason = (str(err).strip().splitlines() or [""])[0]
        raise ValueError(f"smiles_csv {path} is not a readable CSV ({reason})") from None
    if table.empty:
        raise ValueError(f"smiles_csv {path} has a header but no data rows")
    return table


def _check_labels(table: pd.DataFrame, labels: list[str], task: str,
                  path: PathLike) -> None:
    """Labels must be numbers (empty = missing), and 0/1 for binary classification."""
    for column in labels:
        values = pd.to_numeric(table[column], errors="coerce")
        bad = values.isna() & table[column].notna()
        if task == BINARY:
            bad |= values.notna() & ~values.isin((0, 1))
        if bad.any():
            row = int(bad.to_numpy().nonzero()[0][0])
            expected = "0, 1" if task == BINARY else "a number"
            raise ValueError(f"label column {column!r} of {path} must hold {expected} or be empty; "
                             f"data row {row} holds {table[column].tolist()[row]!r}")


def _write_csv(frame: Any, path: Path) -> None:
    pd.DataFrame(frame).to_csv(path, header=False, index=False, compression="gzip")


def build_ogb(smiles_csv: PathLike, name: str = "ogbg-molhiv", root: PathLike = "datasets",
              split: str = "scaffold", smiles_column: str = "smiles",
              label_columns: Optional[list[str]] = None, on_invalid: str = "error",
              overwrite: bool = False, limit: Optional[int] = None) -> BuildReport:
    """Builds ``ROOT/<name with underscores>`` in OGB's raw format (see module docstring).

    Args:
        smiles_csv: CSV (optionally gzipped) with a SMILES column and label columns.
        name: an ``ogbg-mol*`` name of the registry (ogb's metadata gives its task count).
        root: data root to write into.
        split: split type; only ``"scaffold"``.
        smiles_column: column holding SMILES.
        label_columns: label columns (default: every other column); empty cells = NaN.
        on_invalid: ``"error"`` (raise :class:`InvalidSmilesError`) or ``"skip"``.
        overwrite: replace an existing folder.
        limit: use only the first ``limit`` rows (quick trials).
    """
    from rdkit import rdBase

    start = time.perf_counter()
    buildable = [spec.name for spec in DATASETS.values() if spec.ogb_molecule]
    if name not in buildable:
        raise ValueError(f"name must be an ogbg-mol* dataset of the registry, got {name!r}. "
                         f"Valid names: {', '.join(buildable)}")
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if on_invalid not in ("error", "skip"):
        raise ValueError(f"on_invalid must be 'error' or 'skip', got {on_invalid!r}")
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be a positive integer, got {limit}")
    table = _read_smiles_table(smiles_csv, limit)
    if smiles_column not in table.columns:
        raise ValueError(f"smiles_column {smiles_column!r} not in the CSV columns "
                         f"{list(table.columns)}")
    labels = label_columns or [c for c in table.columns if c != smiles_column]
    missing = [c for c in labels if c not in table.columns]
    if missing or not labels:
        raise ValueError(f"label_columns {missing or labels} not usable; CSV columns: "
                         f"{list(table.columns)}")
    meta = ogb_master(GRAPH)[name]
    num_tasks = int(meta["num tasks"])
    if len(labels) != num_tasks:
        raise ValueError(f"{name} has {num_tasks} task(s) but label_columns gives "
                         f"{len(labels)}: {labels}")
    _check_labels(table, labels, DATASETS[name].task, smiles_csv)
    out = Path(root) / name.replace("-", "_")
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} exists; pass overwrite=True (--overwrite) to rebuild it")

    graphs, scaffolds, lenient, invalid = _featurise(table[smiles_column].tolist())
    if invalid and on_invalid == "error":
        raise InvalidSmilesError(invalid)
    keep = [i for i, g in enumerate(graphs) if g is not None]
    kept_graphs = [graphs[i] for i in keep]
    split_idx = scaffold_split([scaffolds[i] for i in keep])
    if not all(split_idx.values()):
        sizes = " / ".join(f"{part} {len(idx)}" for part, idx in split_idx.items())
        raise ValueError(f"the {split} split of {len(keep)} molecule(s) leaves a split empty "
                         f"({sizes}); every split needs a molecule: use more rows (limit)")

    tmp = out.with_name(out.name + ".building")
    shutil.rmtree(tmp, ignore_errors=True)
    for sub in ("raw", f"split/{split}", "mapping"):
        (tmp / sub).mkdir(parents=True)
    # OGB raw format stores each bond once; the loader adds the reverse edges
    _write_csv(np.concatenate([g["edge_index"][:, ::2].T for g in kept_graphs]),
               tmp / "raw/edge.csv.gz")
    _write_csv(np.concatenate([g["edge_feat"][::2] for g in kept_graphs]),
               tmp / "raw/edge-feat.csv.gz")
    _write_csv(np.concatenate([g["node_feat"] for g in kept_graphs]),
               tmp / "raw/node-feat.csv.gz")
    num_nodes = np.array([g["num_nodes"] for g in kept_graphs])
    num_bonds = np.array([g["edge_index"].shape[1] // 2 for g in kept_graphs])
    _write_csv(num_nodes, tmp / "raw/num-node-list.csv.gz")
    _write_csv(num_bonds, tmp / "raw/num-edge-list.csv.gz")
    _write_csv(table[labels].iloc[keep].to_numpy(), tmp / "raw/graph-label.csv.gz")
    for part, idx in split_idx.items():
        _write_csv(np.array(idx, dtype=np.int64), tmp / f"split/{split}/{part}.csv.gz")
    mapping = table[labels + [smiles_column]].iloc[keep].copy()
    mapping["source_row"] = keep
    mapping.to_csv(tmp / "mapping/mol.csv.gz", index=False, compression="gzip")
    (tmp / "RELEASE_v1.txt").write_text(f"# {name} built by pyg_agg.datasets.smiles_to_ogb from "
                                        f"{Path(smiles_csv).name}\n")
    report = BuildReport(
        name=name, path=os.fspath(out), num_rows=len(table), num_graphs=len(keep),
        mean_nodes=float(num_nodes.mean()), mean_bonds=float(num_bonds.mean()),
        split_sizes={k: len(v) for k, v in split_idx.items()}, lenient_rows=lenient,
        invalid_rows=invalid, seconds=round(time.perf_counter() - start, 1),
        rdkit_version=rdBase.rdkitVersion)
    (tmp / "build_report.json").write_text(json.dumps(report.__dict__, indent=2))
    if out.exists():
        shutil.rmtree(out)
    tmp.replace(out)
    return report
