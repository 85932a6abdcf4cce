import shutil

import pytest
import torch

from pyg_agg.datasets import load_tu


def test_loads_mutag_offline_from_read_only_root(shared_data, cache_dir):
    dataset = load_tu("MUTAG", root=shared_data)
    assert len(dataset) == 188
    assert dataset.num_classes == 2 and dataset.num_features == 7
    counts = torch.bincount(dataset.y)
    assert counts.tolist() == [63, 125]
    assert len(list(cache_dir.glob("*/tu/MUTAG/processed"))) == 1
    assert not (shared_data / "tu" / "MUTAG" / "processed").exists()


def test_root_name_layout(shared_data, cache_dir, tmp_path):
    root = tmp_path / "data"
    shutil.copytree(shared_data / "tu" / "MUTAG" / "raw", root / "MUTAG" / "raw")
    dataset = load_tu("MUTAG", root=root)
    assert len(dataset) == 188
    # a writable root is not written to either: processed files go to the private cache
    assert not (root / "MUTAG" / "processed").exists()
    assert len(list(cache_dir.glob("*/tu/MUTAG/processed"))) == 1


def test_missing_dataset_names_the_places_searched(tmp_path, cache_dir):
    with pytest.raises(FileNotFoundError) as err:
        load_tu("PROTEINS", root=tmp_path)
    message = str(err.value)
    assert str(tmp_path / "PROTEINS" / "raw" / "PROTEINS_A.txt") in message
    assert str(tmp_path / "tu" / "PROTEINS" / "raw" / "PROTEINS_A.txt") in message
