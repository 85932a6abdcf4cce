"""The example recipes run through the same pipeline on offline data."""
import json
import runpy
import shlex
import sys
from pathlib import Path

import pytest
import torch_geometric.typing as pyg_typing

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _run_example(name, argv, monkeypatch):
    monkeypatch.setattr(sys, "argv", [name, *argv])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(EXAMPLES / name), run_name="__main__")
    return done.value.code


def _cora_argv(shared_data, out):
    return ["--dataset", "Cora", "--root", str(shared_data), "--epochs", "2",
            "--hidden", "16", "--layers", "2", "--out", str(out)]


@pytest.mark.parametrize("example", ["ogbn_arxiv_gatv2.py", "ogbn_products_gatv2.py"])
def test_gatv2_node_recipes_run_on_cora(example, shared_data, cache_dir, tmp_path,
                                         monkeypatch):
    argv = _cora_argv(shared_data, tmp_path)
    if example == "ogbn_products_gatv2.py":
        argv.append("--full-batch")
    assert _run_example(example, argv, monkeypatch) == 0
    config = json.loads((tmp_path / "run0" / "config.json").read_text())
    assert config["model"] == "gatv2" and config["dataset"] == "Cora"
    assert config["heads"] == (8 if "arxiv" in example else 1)  # the recipe's heads survive


def test_products_recipe_trains_on_neighbor_loader_minibatches(shared_data, cache_dir,
                                                              tmp_path, monkeypatch):
    if not (pyg_typing.WITH_PYG_LIB or pyg_typing.WITH_TORCH_SPARSE):
        pytest.skip("NeighborLoader needs pyg-lib or torch-sparse (make fast builds torch-sparse)")
    argv = _cora_argv(shared_data, tmp_path) + ["--num-neighbors", "5,5", "--batch-size", "64",
                                                "--epochs", "6", "--lr", "0.01"]
    assert _run_example("ogbn_products_gatv2.py", argv, monkeypatch) == 0
    config = json.loads((tmp_path / "run0" / "config.json").read_text())
    assert config["num_neighbors"] == [5, 5] and config["batch_size"] == 64
    rows = (tmp_path / "run0" / "metrics.csv").read_text().splitlines()
    assert len(rows) == 7  # header + 6 epochs
    # 140 Cora training nodes in batches of 64 (3 steps an epoch): well above
    # the 1/7 of chance after 18 sampled steps
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["test"]["mean"] > 0.4


def test_pna_molhiv_recipe_runs_on_a_small_mol_set(shared_data, cache_dir, tmp_path,
                                                   monkeypatch):
    argv = ["--dataset", "ogbg-molbace", "--root", str(shared_data), "--epochs", "1",
            "--hidden", "20", "--layers", "1", "--batch-size", "256", "--out", str(tmp_path)]
    assert _run_example("ogbg_molhiv_pna.py", argv, monkeypatch) == 0
    config = json.loads((tmp_path / "run0" / "config.json").read_text())
    recipe = ("model", "head", "dropout", "dropout_after_residual", "lr", "scheduler", "min_lr")
    assert tuple(config[k] for k in recipe) == (
        "pna-simple", "halving", 0.3, True, 0.01, "plateau", 1e-4)
    assert 0.0 <= json.loads((tmp_path / "summary.json").read_text())["test"]["mean"] <= 1.0


@pytest.mark.parametrize("example,argv,offline_data", [
    ("lcm_second_min.py", ["--models", "LCM"], False),
    ("dictionary_lookup.py", ["--models", "GATv2, 1 head", "--k", "5"], False),
    ("pna_multitask.py", ["--models", "MPNN (sum)"], False),
    ("histograph_deep_gcn.py",
     ["--models", "GCN+HISTOGRAPH", "--datasets", "Cora", "--depths", "2"], True),
    ("histograph_tu.py", ["--models", "HISTOGRAPH", "--datasets", "MUTAG"], True),
])
def test_study_examples_run_their_small_budget(example, argv, offline_data, tmp_path,
                                               monkeypatch, single_thread, request):
    if offline_data:
        request.getfixturevalue("cache_dir")
        argv = ["--root", str(request.getfixturevalue("shared_data")), *argv]
    argv = ["--budget", "small", "--out", str(tmp_path / "run"), *argv]
    assert _run_example(example, argv, monkeypatch) == 0
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["budget"] == "small"
    assert results["command"] == shlex.join(["python", f"examples/{example}", *argv])
