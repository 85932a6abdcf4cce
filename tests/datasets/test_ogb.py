"""OGB sets offline: the shared ogbg folders, and ogbn-* on folders in OGB's layout.

The real ogbn sets cannot be downloaded here, so these tests write small
random graphs in exactly the layout OGB's zip files unpack to (raw CSVs, split
CSVs, release marker) and run them through the same loader and trainer.
"""
import gzip
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from pyg_agg.datasets import load_dataset
from pyg_agg.datasets.ogb import ogb_master
from pyg_agg.datasets.root import safe_loading
from pyg_agg.pipelines.config import TrainConfig
from pyg_agg.pipelines.train import run_training


def _write_csv(path: Path, rows: np.ndarray, fmt: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = rows.reshape(len(rows), -1)
    with gzip.open(path, "wt") as f:
        f.writelines(",".join(fmt % v for v in row) + "\n" for row in rows)


def write_ogbn_layout(root: Path, name: str, num_nodes: int = 60, num_edges: int = 240,
                      seed: int = 0) -> Path:
    """A random graph in the folder layout of OGB's ``name`` download."""
    meta = ogb_master("node")[name]
    rng = np.random.default_rng(seed)
    folder = root / name.replace("-", "_")
    (folder / f"RELEASE_v{meta['version']}.txt").parent.mkdir(parents=True)
    (folder / f"RELEASE_v{meta['version']}.txt").write_text("test layout\n")
    raw = folder / "raw"
    _write_csv(raw / "edge.csv.gz", rng.integers(0, num_nodes, (num_edges, 2)), "%d")
    _write_csv(raw / "num-node-list.csv.gz", np.array([num_nodes]), "%d")
    _write_csv(raw / "num-edge-list.csv.gz", np.array([num_edges]), "%d")
    if meta["has_node_attr"] == "True":
        _write_csv(raw / "node-feat.csv.gz", rng.normal(size=(num_nodes, 8)), "%.6f")
    if meta["has_edge_attr"] == "True":
        _write_csv(raw / "edge-feat.csv.gz", rng.random((num_edges, 8)), "%.6f")
    tasks, classes = int(meta["num tasks"]), int(meta["num classes"])
    labels = rng.integers(0, classes, (num_nodes, tasks))
    _write_csv(raw / "node-label.csv.gz", labels, "%d")
    for extra in meta["additional node files"].split(","):
        if extra != "None":
            _write_csv(raw / f"{extra}.csv.gz", rng.integers(0, 3, num_nodes), "%d")
    order = rng.permutation(num_nodes)
    cut = [int(num_nodes * 0.6), int(num_nodes * 0.8)]
    for split, idx in zip(("train", "valid", "test"), np.split(order, cut), strict=True):
        _write_csv(folder / "split" / meta["split"] / f"{split}.csv.gz", np.sort(idx), "%d")
    return folder


def test_arxiv_layout_loads_undirected_with_time_split(tmp_path, cache_dir):
    write_ogbn_layout(tmp_path, "ogbn-arxiv")
    task = load_dataset("ogbn-arxiv", root=tmp_path)
    data = task.dataset
    assert (task.level, task.task, task.metric) == ("node", "multiclass", "acc")
    assert (data.num_nodes, task.num_features, task.num_outputs) == (60, 8, 40)
    assert [task.split[s].numel() for s in ("train", "valid", "test")] == [36, 12, 12]
    # arxiv ships directed citations; the pipeline trains on the symmetrised graph
    pairs = set(map(tuple, data.edge_index.t().tolist()))
    assert all((j, i) in pairs for i, j in pairs)
    assert data.y.shape == (60,)


def test_proteins_layout_gets_node_inputs_from_edge_features(tmp_path, cache_dir):
    folder = write_ogbn_layout(tmp_path, "ogbn-proteins")
    task = load_dataset("ogbn-proteins", root=tmp_path)
    data = task.dataset
    assert (task.task, task.metric, task.num_outputs, task.num_features) == (
        "binary", "rocauc", 112, 8)
    assert data.edge_attr is None and data.y.dtype == torch.float
    # x is the mean of incoming edge features (OGB adds the inverse edges)
    edges = np.loadtxt(folder / "raw" / "edge.csv.gz", delimiter=",", dtype=np.int64)
    feats = np.loadtxt(folder / "raw" / "edge-feat.csv.gz", delimiter=",")
    node = int(edges[0, 1])
    incident = np.concatenate([feats[edges[:, 1] == node], feats[edges[:, 0] == node]])
    assert torch.allclose(data.x[node], torch.from_numpy(incident.mean(0)).float(), atol=1e-5)


@pytest.mark.parametrize("name,extra", [("ogbn-arxiv", {}), ("ogbn-proteins", {}),
                                        ("ogbn-products", {"num_neighbors": [4, 4]})])
def test_ogbn_layouts_train_end_to_end(name, extra, tmp_path, cache_dir):
    import torch_geometric.typing as pyg_typing

    if extra and not (pyg_typing.WITH_PYG_LIB or pyg_typing.WITH_TORCH_SPARSE):
        pytest.skip("NeighborLoader needs pyg-lib or torch-sparse (make fast builds torch-sparse)")
    write_ogbn_layout(tmp_path / "data", name)
    cfg = TrainConfig(dataset=name, model="gatv2", hidden=8, layers=2, heads=2, epochs=2,
                      batch_size=16, root=str(tmp_path / "data"), out=str(tmp_path / "out"),
                      **extra)
    summary = run_training(cfg)
    assert summary["runs"][0]["epochs"] == 2
    assert 0.0 <= summary["test"]["mean"] <= 1.0
    assert (tmp_path / "out" / "run0" / "best.pt").is_file()


def test_ogbg_molbace_loads_offline_into_the_cache(shared_data, cache_dir):
    task = load_dataset("ogbg-molbace", root=shared_data)
    assert len(task.dataset) == 1513
    assert {k: v.numel() for k, v in task.split.items()} == {
        "train": 1210, "valid": 151, "test": 152}
    assert (task.level, task.task, task.metric, task.num_features, task.edge_dim) == (
        "graph", "binary", "rocauc", 9, 3)
    graph = task.dataset[0]
    assert graph.x.dtype == torch.long and graph.edge_attr.shape[1] == 3
    # processed files went to the private cache, never into the read-only shared root
    assert len(list(cache_dir.glob("*/ogb/ogbg_molbace/processed"))) == 1
    assert not (shared_data / "ogb" / "ogbg_molbace" / "processed").exists()
    y = torch.tensor([[0.0], [1.0], [1.0], [0.0]])
    assert task.evaluate(y, torch.tensor([[0.1], [0.9], [0.8], [0.2]])) == 1.0


def test_weights_only_safety_stays_on_outside_the_loader(shared_data, cache_dir):
    load_dataset("ogbg-molbace", root=shared_data)
    [processed] = cache_dir.glob("*/ogb/ogbg_molbace/processed/geometric_data_processed.pt")
    with pytest.raises(pickle.UnpicklingError):
        torch.load(processed, weights_only=True)
    with safe_loading():
        data, slices = torch.load(processed, weights_only=True)
    assert slices["x"].numel() == 1514


def test_missing_node_dataset_names_expected_files(tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        load_dataset("ogbn-arxiv", root=tmp_path)
    message = str(err.value)
    for expected in ("ogbn_arxiv/raw/edge.csv.gz", "ogb/ogbn_arxiv/split/time/train.csv.gz",
                     "ogbn_arxiv/RELEASE_v1.txt", str(tmp_path)):
        assert expected in message
