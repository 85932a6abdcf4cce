"""A data root is input only: pickles planted in its ``processed/`` never run (issue 19)."""
import shutil

import pytest

from pyg_agg.cli import main
from pyg_agg.datasets import load_dataset

OGB_PROCESSED = ("pre_transform.pt", "pre_filter.pt", "geometric_data_processed.pt")


@pytest.fixture
def writable_bace(shared_data, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(shared_data / "ogb" / "ogbg_molbace", root / "ogb" / "ogbg_molbace")
    return root


def test_planted_ogb_processed_files_never_run_during_train(writable_bace, plant_payload,
                                                            cache_dir, tmp_path, capsys):
    processed = writable_bace / "ogb" / "ogbg_molbace" / "processed"
    for name in OGB_PROCESSED:
        marker = plant_payload(processed / name)
    with pytest.warns(UserWarning, match="ignoring .*processed"):
        code = main(["train", "--dataset", "ogbg-molbace", "--model", "gin", "--epochs", "1",
                     "--hidden", "8", "--layers", "1", "--batch-size", "512",
                     "--root", str(writable_bace), "--out", str(tmp_path / "run")])
    assert code == 0, capsys.readouterr().err
    assert not marker.exists()
    # the planted files are left alone, and the dataset was processed from the raw files
    assert sorted(p.name for p in processed.iterdir()) == sorted(OGB_PROCESSED)


@pytest.mark.parametrize("layout", ["MUTAG", "tu/MUTAG"])
def test_planted_tu_data_pt_never_runs(layout, shared_data, plant_payload, cache_dir, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(shared_data / "tu" / "MUTAG" / "raw", root / layout / "raw")
    marker = plant_payload(root / layout / "processed" / "data.pt")
    plant_payload(root / layout / "processed" / "pre_transform.pt")
    task = load_dataset("MUTAG", root=root)
    assert not marker.exists()
    assert len(task.dataset) == 188


def test_planted_planetoid_files_never_run(shared_data, plant_payload, cache_dir, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(shared_data / "planetoid" / "Cora" / "raw", root / "planetoid" / "Cora" / "raw")
    for name in ("data.pt", "pre_transform.pt", "pre_filter.pt"):
        marker = plant_payload(root / "planetoid" / "Cora" / "processed" / name)
    task = load_dataset("Cora", root=root)
    assert not marker.exists()
    assert task.num_outputs == 7


def test_a_tampered_cache_cannot_run_code_either(shared_data, plant_payload, cache_dir):
    """Second line of defence: loading from the cache is weights-only, even where PyG
    asks for ``weights_only=False`` (its ``pre_transform.pt`` check)."""
    load_dataset("MUTAG", root=shared_data)
    [processed] = cache_dir.glob("*/tu/MUTAG/processed")
    marker = plant_payload(processed / "pre_transform.pt")
    with pytest.raises(Exception, match="[Ww]eights only load failed"):
        load_dataset("MUTAG", root=shared_data)
    assert not marker.exists()
