"""Planetoid citation graphs offline, with their public split."""
import pytest

from pyg_agg.datasets import load_dataset


def test_cora_public_split(shared_data, cache_dir):
    task = load_dataset("cora", root=shared_data)
    assert task.name == "Cora" and task.level == "node"
    assert [task.split[s].numel() for s in ("train", "valid", "test")] == [140, 500, 1000]
    assert (task.num_features, task.num_outputs) == (1433, 7)


def test_missing_planetoid_names_its_raw_files(tmp_path, cache_dir):
    with pytest.raises(FileNotFoundError) as err:
        load_dataset("CiteSeer", root=tmp_path)
    assert "planetoid/CiteSeer/raw/ind.citeseer.graph" in str(err.value)
