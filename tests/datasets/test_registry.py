"""The dataset registry: one table, a name resolved once per run, ogb's metadata read once."""
import sys
from functools import partial

import pandas as pd
import pytest

from pyg_agg.cli import main
from pyg_agg.datasets import DatasetSpec, dataset_names, dataset_spec, load_dataset
from pyg_agg.datasets import registry
from pyg_agg.datasets.ogb import locate_ogb, ogb_master
from pyg_agg.datasets.synthetic import degree_graphs
from pyg_agg.datasets.task import BINARY, GRAPH, MULTICLASS, REGRESSION
from pyg_agg.pipelines import config
from pyg_agg.pipelines.config import TrainConfig
from pyg_agg.pipelines.train import run_training

OGB_TASK_TYPES = {"binary classification": BINARY, "multiclass classification": MULTICLASS,
                  "regression": REGRESSION}


def _tiny_run(tmp_path, dataset, **settings) -> TrainConfig:
    return TrainConfig(dataset=dataset, model="gin", hidden=8, layers=1, epochs=1,
                       batch_size=512, out=str(tmp_path / "run"), **settings)


def test_unknown_dataset_lists_valid_names():
    with pytest.raises(ValueError) as err:
        load_dataset("ogbg-molnope")
    for name in ("ogbg-molhiv", "ogbn-products", "Cora", "MUTAG", "synthetic-degree"):
        assert name in str(err.value)
    assert "ogbg-molesol" in dataset_names()


def test_names_resolve_case_insensitively_to_the_table_spelling():
    assert dataset_spec("cora").name == "Cora"
    assert dataset_spec("OGBG-MOLHIV") is registry.DATASETS["ogbg-molhiv"]


def test_every_ogb_entry_agrees_with_ogbs_own_metadata():
    for spec in registry.DATASETS.values():
        if spec.locator is not locate_ogb:
            continue
        meta = ogb_master(spec.level)[spec.name]
        assert (spec.task, spec.metric) == (OGB_TASK_TYPES[meta["task type"]],
                                            meta["eval metric"]), spec.name
        assert spec.ogb_molecule == spec.name.startswith("ogbg-mol"), spec.name


def test_a_run_reads_ogbs_metadata_once(shared_data, cache_dir, tmp_path, monkeypatch):
    """The name used to be resolved at every hop, each time re-reading master.csv (4 reads)."""
    reads = []
    read_csv = pd.read_csv

    def counting_read_csv(path, *args, **kwargs):
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if str(path).endswith("master.csv") and caller.startswith("pyg_agg"):
            reads.append(caller)  # ogb's own reads inside its loader do not count
        return read_csv(path, *args, **kwargs)

    monkeypatch.setattr(pd, "read_csv", counting_read_csv)
    ogb_master.cache_clear()
    run_training(_tiny_run(tmp_path, "ogbg-molbace", root=str(shared_data)))
    assert len(reads) == 1


def test_a_run_resolves_the_dataset_name_once(tmp_path, monkeypatch):
    calls = []

    def counting_spec(name):
        calls.append(name)
        return dataset_spec(name)

    monkeypatch.setattr(registry, "dataset_spec", counting_spec)
    monkeypatch.setattr(config, "dataset_spec", counting_spec)
    summary = run_training(_tiny_run(tmp_path, "SYNTHETIC-DEGREE", readout="sum"))
    assert calls == ["SYNTHETIC-DEGREE"]
    assert summary["dataset"] == "synthetic-degree"


def test_one_table_entry_adds_a_dataset(tmp_path, monkeypatch, capsys):
    spec = DatasetSpec("tiny-degree", GRAPH, MULTICLASS, "acc",
                       partial(degree_graphs, num_graphs=40))
    monkeypatch.setitem(registry.DATASETS, spec.name, spec)
    assert "tiny-degree" in dataset_names()
    summary = run_training(_tiny_run(tmp_path, "tiny-degree", readout="sum"))
    assert summary["dataset"] == "tiny-degree" and summary["metric"] == "acc"
    assert main(["datasets", "--root", str(tmp_path)]) == 0
    assert "tiny-degree" in capsys.readouterr().out


def test_synthetic_sets_need_no_root(tmp_path):
    for name in ("synthetic-degree", "synthetic-sbm"):
        spec = dataset_spec(name)
        assert spec.locate(tmp_path / "absent") is None
        assert spec.load(tmp_path / "absent").name == name
