"""Offline dataset registry: OGB/Planetoid loading, scoped safe globals, clear errors."""
import pickle

import pytest
import torch

from pyg_agg.datasets.root import safe_loading
from pyg_agg.pipelines.data import dataset_names, load_dataset


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


def test_cora_public_split(shared_data, cache_dir):
    task = load_dataset("cora", root=shared_data)
    assert task.name == "Cora" and task.level == "node"
    assert [task.split[s].numel() for s in ("train", "valid", "test")] == [140, 500, 1000]
    assert (task.num_features, task.num_outputs) == (1433, 7)


def test_missing_node_dataset_names_expected_files(tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        load_dataset("ogbn-arxiv", root=tmp_path)
    message = str(err.value)
    for expected in ("ogbn_arxiv/raw/edge.csv.gz", "ogb/ogbn_arxiv/split/time/train.csv.gz",
                     "ogbn_arxiv/RELEASE_v1.txt", str(tmp_path)):
        assert expected in message


def test_unknown_dataset_lists_valid_names():
    with pytest.raises(ValueError) as err:
        load_dataset("ogbg-molnope")
    for name in ("ogbg-molhiv", "ogbn-products", "Cora", "MUTAG", "synthetic-degree"):
        assert name in str(err.value)
    assert "ogbg-molesol" in dataset_names()
