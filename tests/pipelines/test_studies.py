"""The paper studies: small budgets end to end, exact resumption, refusals, docs tables."""
import json
import math
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from pyg_agg.pipelines import (
    dictionary_lookup,
    histograph_deep_gcn,
    histograph_tu,
    lcm_second_min,
    pna_multitask,
    study,
)
from pyg_agg.pipelines.study import docs_table, merge_results, render_table, update_docs_table

pytestmark = pytest.mark.usefixtures("single_thread")

DOCS = Path(__file__).resolve().parents[2] / "docs"
#: The studies on synthetic data, run whole at their small budget.
STUDIES = {"lcm_second_min": (lcm_second_min, "lcm.md"),
           "dictionary_lookup": (dictionary_lookup, "gatv2.md"),
           "pna_multitask": (pna_multitask, "pna.md")}
#: The studies on the offline datasets (``--root``), run on a part of their small budget.
DATA_STUDIES = {"histograph_deep_gcn": (histograph_deep_gcn, "histograph.md"),
                "histograph_tu": (histograph_tu, "histograph.md")}
#: Two models each, one of them order-sensitive or multi-head, to keep the resume tests short.
FEW_MODELS = {"lcm_second_min": ["LCM + permutation", "LCM (PyG)"],
              "dictionary_lookup": ["GATv2, 1 head", "GAT (PyG), 8 heads"],
              "pna_multitask": ["PNA", "MPNN (max)"]}


def run(name, tmp_path, *extra, out="run", results="results.json"):
    module, page = {**STUDIES, **DATA_STUDIES}[name]
    docs = tmp_path / page
    if not docs.exists():
        shutil.copy(DOCS / page, docs)
    code = module.main(["--budget", "small", "--out", str(tmp_path / out),
                        "--results", str(tmp_path / results), "--docs", str(docs), *extra])
    assert code == 0
    path = tmp_path / results
    return json.loads(path.read_text()) if path.exists() else None


@pytest.mark.parametrize("name", STUDIES)
def test_small_budget_writes_results_and_docs_table(name, tmp_path):
    results = run(name, tmp_path)
    assert {"paper", "ours", "command", "budget", "commit"} <= results.keys()
    assert results["budget"] == "small" and "--budget small" in results["command"]
    module, page = STUDIES[name]
    small = module.BUDGETS["small"]
    if name == "pna_multitask":
        assert list(results["ours"]) == [pna_multitask.MEAN_PREDICTOR, *module.MODELS]
        conditions = [*pna_multitask.TASKS, "average",
                      *map(pna_multitask.extrapolation_key, small.extrapolation_sizes)]
    else:
        assert list(results["ours"]) == list(module.MODELS)
        conditions = ([f"n={n}" for n in small.eval_sizes] if name == "lcm_second_min" else
                      [f"k={k}" for k in small.ks])
    for model, values in results["ours"].items():
        assert list(values) == conditions
        for value in values.values():
            for score in value.values() if isinstance(value, dict) else [value]:
                # accuracies, or log10 MSEs of labels at most 1 in absolute value
                assert 0.0 <= score <= 1.0 if name != "pna_multitask" else score < 0.5
        for condition, value in results["paper"].get(model, {}).items():
            assert type(value) is type(values[condition])  # nested the same way
    assert docs_table(tmp_path / page, name) == render_table(results)


@pytest.mark.parametrize("name", STUDIES)
def test_paused_and_resumed_run_gives_the_same_numbers(name, tmp_path):
    models = ["--models", *FEW_MODELS[name]]
    straight = run(name, tmp_path, *models, out="straight", results="straight.json")
    # the first pause falls inside the first unit, the second inside the next one
    for session in (["--stop-after-epochs", "1"], ["--resume", "--stop-after-epochs", "2"]):
        assert run(name, tmp_path, *models, *session, out="paused", results="paused.json") is None
    resumed = run(name, tmp_path, *models, "--resume", out="paused", results="paused.json")
    assert resumed["ours"] == straight["ours"]
    assert resumed["details"] == straight["details"]
    assert len(resumed["sessions"]) == 3
    assert resumed["command"] == resumed["sessions"][0]["command"]


def test_wall_time_sums_every_session_and_says_which_units_were_not_timed(tmp_path):
    models = ["--models", *FEW_MODELS["dictionary_lookup"]]
    assert run("dictionary_lookup", tmp_path, *models, "--stop-after-epochs", "1") is None
    resumed = run("dictionary_lookup", tmp_path, *models, "--resume")
    wall = resumed["wall_time"]
    units = len(FEW_MODELS["dictionary_lookup"]) * len(dictionary_lookup.BUDGETS["small"].ks)
    assert wall["units"] == units and wall["untimed_units"] == 0 and wall["seconds"] > 0
    assert f"of training over {units} units." in render_table(resumed)
    # a checkpoint from before the timing: that unit is counted as untimed, not as 0 s
    checkpoint = next((tmp_path / "run").glob("*.pt"))
    state = torch.load(checkpoint, weights_only=False)
    del state["seconds"]
    torch.save(state, checkpoint)
    again = run("dictionary_lookup", tmp_path, *models, "--resume")
    assert again["wall_time"]["untimed_units"] == 1
    assert "(1 of them ran before the harness timed them)" in render_table(again)


def test_run_killed_inside_an_epoch_resumes_to_the_same_numbers(tmp_path, monkeypatch):
    models = ["--models", "LCM + permutation"]
    straight = run("lcm_second_min", tmp_path, *models, out="straight", results="straight.json")
    score = lcm_second_min.exact_match
    calls = []

    def crash_in_second_epoch(*args):
        calls.append(1)
        if len(calls) == 2:  # epoch 2 trained, its checkpoint not yet written
            raise KeyboardInterrupt
        return score(*args)

    monkeypatch.setattr(lcm_second_min, "exact_match", crash_in_second_epoch)
    with pytest.raises(KeyboardInterrupt):
        run("lcm_second_min", tmp_path, *models, out="killed", results="killed.json")
    monkeypatch.setattr(lcm_second_min, "exact_match", score)
    resumed = run("lcm_second_min", tmp_path, *models, "--resume", out="killed",
                  results="killed.json")
    assert resumed["ours"] == straight["ours"] and resumed["details"] == straight["details"]


def test_resume_refuses_changed_settings_in_one_line(tmp_path):
    run("dictionary_lookup", tmp_path, "--stop-after-epochs", "1")
    with pytest.raises(ValueError) as err:
        run("dictionary_lookup", tmp_path, "--resume", "--seed", "1", "--k", "5")
    message = str(err.value)
    assert "\n" not in message
    assert message.endswith("settings differ: seed (checkpoint 0, now 1)")  # ks is a selection


def test_resume_with_another_selection_reads_the_finished_units(tmp_path):
    models = ["--models", *FEW_MODELS["dictionary_lookup"]]
    whole = run("dictionary_lookup", tmp_path, *models, results="whole.json")
    subset = run("dictionary_lookup", tmp_path, *models[:2], "--k", "5", "--resume", results="subset.json")
    model = FEW_MODELS["dictionary_lookup"][0]
    assert subset["ours"] == {model: {"k=5": whole["ours"][model]["k=5"]}}
    assert subset["settings"]["ks"] == [5] and len(subset["sessions"]) == 2
    assert subset["wall_time"]["units"] == 1 and subset["wall_time"]["seconds"] > 0


def test_existing_run_needs_resume(tmp_path):
    run("dictionary_lookup", tmp_path, "--stop-after-epochs", "1")
    with pytest.raises(FileExistsError, match="pass --resume"):
        run("dictionary_lookup", tmp_path)


@pytest.mark.parametrize("argv,match", [
    (["--stop-after-epochs", "0"], "--stop-after-epochs must be a positive integer"),
    (["--k", "1", "5"], r"--k values must be integers >= 2, got \[1, 5\]"),
])
def test_bad_options_are_named_before_any_run(argv, match, tmp_path):
    with pytest.raises(ValueError, match=match):
        run("dictionary_lookup", tmp_path, *argv)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("name", [*STUDIES, *DATA_STUDIES])
def test_docs_tables_are_generated_from_the_committed_results(name):
    results = json.loads((DOCS / "results" / f"{name}.json").read_text())
    assert {"paper", "ours", "command", "budget", "commit"} <= results.keys()
    assert docs_table(DOCS / {**STUDIES, **DATA_STUDIES}[name][1], name) == render_table(results)


def supplementary_tables() -> list[tuple[Path, Path]]:
    """(results file, docs page) of the supplementary runs that have a table in their
    study's page: ``docs/results/<study>-<run>.json`` under the marker ``<study>-<run>``."""
    found = []
    for path in sorted((DOCS / "results").glob("*-*.json")):
        page = DOCS / {**STUDIES, **DATA_STUDIES}[json.loads(path.read_text())["study"]][1]
        if f"<!-- study-table: {path.stem} -->" in page.read_text():
            found.append((path, page))
    return found


def test_a_supplementary_run_writes_its_own_table(tmp_path):
    page = tmp_path / "pna.md"
    page.write_text((DOCS / "pna.md").read_text()
                    + "\n<!-- study-table: pna_multitask-extra -->\n<!-- /study-table -->\n")
    own = docs_table(page, "pna_multitask")
    results = run("pna_multitask", tmp_path, "--models", "MPNN (max)", results="pna_multitask-extra.json")
    assert docs_table(page, "pna_multitask-extra") == render_table(results)
    assert docs_table(page, "pna_multitask") == own  # the study's own table untouched


def test_a_diagnostic_setting_is_recorded_and_named_in_the_table(tmp_path):
    subset = run("pna_multitask", tmp_path, "--models", "MPNN (max)", out="subset",
                 results="subset.json")
    assert subset["deviations"] == {}  # a subset of the models is still the protocol
    assert "(**a short check run" in render_table(subset)
    diagnostic = run("pna_multitask", tmp_path, "--models", "MPNN (max)", "--init", "torch",
                     out="diagnostic", results="diagnostic.json")
    assert diagnostic["deviations"] == {"init": "torch"}
    assert "Budget `small` with `init=torch` (" in render_table(diagnostic)
    full = {**diagnostic, "budget": "full"}
    assert "with `init=torch` (**a diagnostic, not the paper's protocol**)" in render_table(full)


def test_a_run_made_in_parts_merges_to_the_numbers_of_the_whole_run(tmp_path):
    models = ["--models", *FEW_MODELS["dictionary_lookup"]]
    whole = run("dictionary_lookup", tmp_path, *models, out="whole", results="whole.json")
    parts = [run("dictionary_lookup", tmp_path, *models, "--k", str(k), out=f"k{k}",
                 results=f"k{k}.json") for k in dictionary_lookup.BUDGETS["small"].ks]
    merged = merge_results(parts)
    for key in ("ours", "paper", "details", "budget", "study"):
        assert merged[key] == whole[key], key
    assert merged["settings"] == whole["settings"]
    assert [part["selection"]["ks"] for part in merged["parts"]] == [[5], [8]]
    assert merged["wall_time"]["units"] == whole["wall_time"]["units"]
    table = render_table(merged)
    assert table.split("\n\n")[0] == render_table(whole).split("\n\n")[0]  # the same rows
    assert "Run in 2 parts: `python examples/dictionary_lookup.py" in table
    assert all(part["command"] in table for part in parts)


def test_merge_command_writes_the_results_and_the_table(tmp_path):
    models = ["--models", "GATv2, 1 head"]
    paths = []
    for k in (5, 8):
        run("dictionary_lookup", tmp_path, *models, "--k", str(k), out=f"k{k}", results=f"k{k}.json")
        paths.append(str(tmp_path / f"k{k}.json"))
    page = tmp_path / "page.md"
    page.write_text("<!-- study-table: dictionary_lookup -->\n<!-- /study-table -->\n")
    out = tmp_path / "dictionary_lookup.json"
    assert study.main(["merge", *paths, "--results", str(out), "--docs", str(page)]) == 0
    merged = json.loads(out.read_text())
    assert list(merged["ours"]["GATv2, 1 head"]) == ["k=5", "k=8"]
    assert docs_table(page, "dictionary_lookup") == render_table(merged)
    with pytest.raises(FileNotFoundError, match="no results file at .*missing.json"):
        study.main(["merge", paths[0], str(tmp_path / "missing.json"), "--results", str(out)])


def part(ours, budget="full", **settings):
    """A hand-made results file of one part."""
    return {"study": "s", "budget": budget, "paper": {}, "ours": ours, "command": "python x.py",
            "commit": "abc", "sessions": [{"command": "python x.py", "commit": "abc"}],
            "settings": {"budget": budget, "datasets": list(next(iter(ours.values()))),
                         "lr": 0.01, "seed": 0, **settings}, "details": {}}


@pytest.mark.parametrize("parts,match", [
    ([part({"A": {"X": 0.5}}), part({"A": {"Y": 0.5}}, lr=0.1)],
     r"different protocols cannot be merged: lr \(0.01 against 0.1\)"),
    ([part({"A": {"X": 0.5}}), part({"A": {"Y": 0.5}}, seed=1)], r"seed \(0 against 1\)"),
    ([part({"A": {"X": 0.5}}), part({"A": {"Y": 0.5}}, budget="small")], "different budgets"),
    ([part({"A": {"X": 0.5}}), part({"A": {"X": 0.6}})], r"two parts hold ours\['A'\]\['X'\]"),
    ([], "at least one"),
])
def test_merge_refuses_parts_that_are_not_one_run(parts, match):
    with pytest.raises(ValueError, match=match):
        merge_results(parts)


@pytest.mark.parametrize("path", [path for path in sorted((DOCS / "results").glob("*.json"))
                                  if "parts" in json.loads(path.read_text())], ids=lambda p: p.stem)
def test_committed_merged_results_are_the_merge_of_their_parts(path):
    merged = json.loads(path.read_text())
    files = [path.parent / part.pop("file") for part in merged["parts"]]
    assert merge_results([json.loads(file.read_text()) for file in files]) == merged


def test_merged_wall_time_names_the_parts_that_were_not_timed():
    timed = {**part({"A": {"Y": 0.5}}), "wall_time": {"seconds": 720.0, "units": 3, "untimed_units": 0}}
    merged = merge_results([part({"A": {"X": 0.5}}), timed])
    assert merged["wall_time"] == {"seconds": 720.0, "units": 3, "untimed_units": 0, "untimed_parts": 1}
    assert ("Wall time: 0.2 h of training over 3 units, not counting 1 part that ran before the "
            "harness timed units.") in render_table(merged)
    # parts written from one run's checkpoints share its command: named once
    assert "Run in 2 parts of one command: `python x.py` at commit `abc`. " in render_table(merged)


def test_a_table_of_some_cells_shows_the_papers_numbers_of_those_cells():
    results = {"paper": {"GCN": {"Cora": {"2": 0.81, "8": 0.69, "32": 0.60}}},
               "ours": {"GCN": {"Cora": {"8": 0.74, "32": 0.24}}}, "budget": "full",
               "command": "python x.py", "commit": "abc"}
    row = render_table(results).splitlines()[2]
    assert row == "| GCN | 0.690 / 0.600 | 0.740 / 0.240 |"


@pytest.mark.parametrize("path,page", supplementary_tables(), ids=lambda p: p.stem)
def test_supplementary_tables_are_generated_from_their_results(path, page):
    assert docs_table(page, path.stem) == render_table(json.loads(path.read_text()))


def test_committed_histograph_results_nest_model_condition_value():
    deep_gcn = json.loads((DOCS / "results" / "histograph_deep_gcn.json").read_text())
    for results in (deep_gcn["paper"], deep_gcn["ours"], deep_gcn["std"]):
        assert 0.0 <= results["GCN+HISTOGRAPH"]["Cora"]["64"] <= 1.0
    tu = json.loads((DOCS / "results" / "histograph_tu.json").read_text())
    assert list(tu["ours"]) == list(histograph_tu.MODELS)
    ran = tu["settings"]["datasets"]  # the datasets run so far, each a part of the run
    assert set(ran) <= set(histograph_tu.DATASETS)
    assert all(list(values) == ran for values in tu["ours"].values())


# ---------------------------------------------------------------- HISTOGRAPH studies

#: A part of each small budget that runs in seconds: (data options, a few models).
DATA_PART = {"histograph_deep_gcn": ["--datasets", "Cora", "--depths", "2", "3"],
             "histograph_tu": ["--datasets", "MUTAG"]}
FEW_DATA_MODELS = {"histograph_deep_gcn": ["GCN+HISTOGRAPH", "GCN+JK-max (PyG)"],
                   "histograph_tu": ["HISTOGRAPH (frozen)", "JK-cat (PyG)"]}


def run_on_data(name, tmp_path, shared_data, *extra, **kwargs):
    return run(name, tmp_path, "--root", str(shared_data), *DATA_PART[name], *extra, **kwargs)


@pytest.mark.usefixtures("cache_dir")
def test_deep_gcn_small_budget_nests_model_dataset_depth(tmp_path, shared_data):
    results = run_on_data("histograph_deep_gcn", tmp_path, shared_data)
    assert {"paper", "ours", "std", "command", "budget", "commit"} <= results.keys()
    assert list(results["ours"]) == list(histograph_deep_gcn.MODELS)
    for model, datasets in results["ours"].items():
        assert list(datasets) == ["Cora"] and list(datasets["Cora"]) == ["2", "3"]
        assert 0.0 <= datasets["Cora"]["3"] <= 1.0 and results["std"][model]["Cora"]["3"] >= 0
        seeds = results["details"][model]["Cora"]["3"]["seeds"]
        assert len(seeds) == 2 and all(1 <= seed["epoch"] <= 3 for seed in seeds)
    assert results["paper"]["GCN+HISTOGRAPH"]["Cora"]["64"] == 0.775
    assert docs_table(tmp_path / "histograph.md", "histograph_deep_gcn") == render_table(results)


@pytest.mark.usefixtures("cache_dir")
def test_tu_small_budget_runs_every_readout_in_both_modes(tmp_path, shared_data):
    results = run_on_data("histograph_tu", tmp_path, shared_data)
    assert list(results["ours"]) == list(histograph_tu.MODELS)
    assert results["paper"]["HISTOGRAPH softmax"]["PROTEINS"] == 0.7445
    for model, datasets in results["ours"].items():
        assert list(datasets) == ["MUTAG"] and 0.0 <= datasets["MUTAG"] <= 1.0
        folds = results["details"][model]["MUTAG"]["folds"]
        assert len(folds) == 2 and all(0.0 <= fold["classifier_active"] <= 1.0 for fold in folds)
        if model.startswith("HISTOGRAPH"):
            weights = folds[0]["layer_weights"]
            assert len(weights["mean"]) == 5 and 0.0 <= weights["negative_share"] <= 1.0
            if "softmax" in model:
                assert weights["negative_share"] == 0.0
    # a frozen model keeps the backbone of its fold's end-to-end mean model, untouched
    backbone = torch.load(tmp_path / "run" / "MUTAG__mean__fold_1.pt")["model"]
    frozen = torch.load(tmp_path / "run" / "MUTAG__HISTOGRAPH__frozen___fold_1.pt")["model"]
    for key, value in backbone.items():
        if key.startswith("backbone."):
            assert torch.equal(frozen[key], value), key
    assert docs_table(tmp_path / "histograph.md", "histograph_tu") == render_table(results)


@pytest.mark.usefixtures("cache_dir")
@pytest.mark.parametrize("name", DATA_STUDIES)
def test_histograph_study_paused_and_resumed_gives_the_same_numbers(name, tmp_path, shared_data):
    models = ["--models", *FEW_DATA_MODELS[name]]
    straight = run_on_data(name, tmp_path, shared_data, *models, out="straight",
                           results="straight.json")
    for session in (["--stop-after-epochs", "1"], ["--resume", "--stop-after-epochs", "3"]):
        assert run_on_data(name, tmp_path, shared_data, *models, *session, out="paused",
                           results="paused.json") is None
    resumed = run_on_data(name, tmp_path, shared_data, *models, "--resume", out="paused",
                          results="paused.json")
    assert resumed["ours"] == straight["ours"] and resumed["std"] == straight["std"]
    assert resumed["details"] == straight["details"]


@pytest.mark.usefixtures("cache_dir")
def test_tu_resume_refuses_another_readout_lr_in_one_line(tmp_path, shared_data):
    models = ["--models", "sum"]
    run_on_data("histograph_tu", tmp_path, shared_data, *models, "--stop-after-epochs", "1")
    with pytest.raises(ValueError) as err:
        run_on_data("histograph_tu", tmp_path, shared_data, *models, "--resume",
                    "--readout-lr", "0.001")
    assert "\n" not in str(err.value)
    assert "readout_lr (checkpoint None, now 0.001)" in str(err.value)


@pytest.mark.parametrize("name,argv,match", [
    ("histograph_tu", ["--readout-lr", "0"], "--readout-lr must be positive, got 0.0"),
    ("histograph_deep_gcn", ["--depths", "0", "2"],
     r"--depths must be positive integers, got \[0, 2\]"),
    ("histograph_deep_gcn", ["--patience", "0"], "--patience must be a positive integer, got 0"),
    ("histograph_deep_gcn", ["--weight-decay", "-1"],
     "--weight-decay must be a finite number >= 0, got -1.0"),
    ("histograph_deep_gcn", ["--dropout", "1"], r"--dropout must lie in \[0, 1\), got 1.0"),
])
def test_histograph_bad_options_are_named_before_any_run(name, argv, match, tmp_path):
    with pytest.raises(ValueError, match=match):
        run(name, tmp_path, *argv)
    assert not (tmp_path / "run").exists()


def test_deep_gcn_stops_patience_epochs_after_the_selected_one(tmp_path, shared_data,
                                                              cache_dir):
    # small budget: at most 3 epochs, patience 1; so 2 epochs unless epoch 2 is selected
    results = run_on_data("histograph_deep_gcn", tmp_path, shared_data, "--models", "GCN")
    for depth in ("2", "3"):
        for seed in results["details"]["GCN"]["Cora"][depth]["seeds"]:
            assert seed["trained_epochs"] == min(seed["epoch"] + 1, 3)


def test_deep_gcn_patience_option_is_a_recorded_setting(tmp_path, shared_data, cache_dir):
    # small budget with patience 2 instead of 1: at most 3 epochs, so every unit runs all 3
    results = run_on_data("histograph_deep_gcn", tmp_path, shared_data, "--models", "GCN",
                          "--patience", "2")
    assert results["settings"]["patience"] == 2
    for depth in ("2", "3"):
        for seed in results["details"]["GCN"]["Cora"][depth]["seeds"]:
            assert seed["trained_epochs"] == 3


def test_deep_gcn_regularisation_options_are_recorded_settings(tmp_path, shared_data, cache_dir):
    models = ["--models", "GCN", "--depths", "2", "--datasets", "Cora"]
    results = run_on_data("histograph_deep_gcn", tmp_path, shared_data, *models,
                          "--weight-decay", "0.005", "--dropout", "0.6", "--stop-after-epochs", "1")
    assert results is None  # paused: the settings are in the run's record
    with pytest.raises(ValueError) as err:
        run_on_data("histograph_deep_gcn", tmp_path, shared_data, *models, "--resume")
    message = str(err.value)
    assert "\n" not in message
    assert "dropout (checkpoint 0.6, now 0.5)" in message
    assert "weight_decay (checkpoint 0.005, now 0.0005)" in message


def test_active_units_counts_the_units_positive_for_some_input():
    relu = torch.nn.ReLU()
    with histograph_tu.ActiveUnits(relu) as active:
        relu(torch.tensor([[1.0, -1.0, 0.0, -2.0]]))
        relu(torch.tensor([[-1.0, -1.0, 0.0, 3.0]]))
    assert active.share() == 0.5  # units 0 and 3; a unit at exactly 0 is inactive
    relu(torch.ones(1, 4))  # after the block, nothing is recorded
    assert active.share() == 0.5


def test_select_epoch_prefers_validation_accuracy_then_loss():
    history = [{"valid": 0.5, "valid_loss": 1.0, "test": 0.9},
               {"valid": 0.7, "valid_loss": 0.9, "test": 0.1},
               {"valid": 0.7, "valid_loss": 0.8, "test": 0.2}]
    assert histograph_deep_gcn.select_epoch(history) == 2


def test_small_budget_table_says_so(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("before\n<!-- study-table: s -->\nold\n<!-- /study-table -->\nafter\n")
    results = {"study": "s", "budget": "small", "command": "python x.py", "commit": "abc",
               "paper": {"A": {"k=1": {"train": 1.0, "test": 1.0}}},
               "ours": {"A": {"k=1": {"train": 0.5, "test": 0.25}}, "B": {"k=1": None}}}
    update_docs_table(page, results)
    text = page.read_text()
    assert text.startswith("before\n") and text.endswith("\nafter\n") and "old" not in text
    table = docs_table(page, "s")
    assert "| A | 1.000 / 1.000 | 0.500 / 0.250 |" in table and "| B | – | – |" in table
    assert "not the paper's protocol" in table and "Cells: train / test." in table


def test_table_shows_the_std_where_the_results_have_one(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("<!-- study-table: s -->\n<!-- /study-table -->\n")
    results = {"study": "s", "budget": "full", "command": "python x.py", "commit": "abc",
               "paper": {"A": {"Cora": {"2": 0.8, "64": 0.7}}},
               "ours": {"A": {"Cora": {"2": 0.75, "64": 0.5}}},
               "std": {"A": {"Cora": {"2": 0.01, "64": 0.125}}}}
    update_docs_table(page, results)
    assert "| A | 0.800 / 0.700 | 0.750 ± 0.010 / 0.500 ± 0.125 |" in docs_table(page, "s")


def test_shuffle_within_sets_keeps_every_set_in_its_slot():
    batch = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2])
    order = lcm_second_min.shuffle_within_sets(batch, torch.Generator().manual_seed(0))
    assert torch.equal(batch[order], batch)
    assert sorted(order.tolist()) == list(range(9)) and order.tolist() != list(range(9))


def test_stalled_compares_the_last_epochs_with_the_best_before():
    history = [{"train": acc} for acc in (0.1, 0.5, 0.5, 0.4)]
    assert dictionary_lookup.stalled(history, 2)
    assert not dictionary_lookup.stalled(history, 3)  # 0.5 beat 0.1
    assert not dictionary_lookup.stalled(history[:2], 2)  # too short to tell


def test_reduced_budget_table_says_so(tmp_path):
    results = {"study": "s", "budget": "cpu", "command": "python x.py --budget cpu",
               "commit": "abc", "paper": {}, "ours": {"A": {"average": -1.0}}}
    assert "a reduced budget, not the paper's protocol" in render_table(results)


def test_lcm_small_run_records_the_curve_of_the_sets_of_32_and_plots_it(tmp_path):
    results = run("lcm_second_min", tmp_path, "--models", "max")
    detail = results["details"]["max"]
    budget = lcm_second_min.BUDGETS["small"]
    curve = detail[f"n={budget.eval_sizes[0]} by epoch"]
    assert len(curve) == detail["epochs"] == budget.epochs
    assert curve[-1] == results["ours"]["max"][f"n={budget.eval_sizes[0]}"]  # the last epoch's
    assert (tmp_path / "results.png").stat().st_size > 0


def test_lcm_cpu_budget_is_pygs_setup_with_fewer_epochs():
    full, cpu = lcm_second_min.BUDGETS["full"], lcm_second_min.BUDGETS["cpu"]
    assert cpu.epochs < full.epochs
    assert replace(cpu, epochs=full.epochs) == full


def test_pna_multitask_small_run_records_the_validation_curve_and_plots_it(tmp_path):
    results = run("pna_multitask", tmp_path, "--models", "PNA")
    detail = results["details"]["PNA"]
    budget = pna_multitask.BUDGETS["small"]
    assert len(detail["validation"]) == detail["epochs"] <= budget.max_epochs
    assert detail["validation"][detail["best_epoch"] - 1] == min(detail["validation"])
    assert (tmp_path / "results.png").stat().st_size > 0
    assert results["paper"] == {"PNA": {"average": -2.97}}


def test_pna_multitask_patience_counts_the_epochs_since_the_best_validation_loss():
    curve = [0.5, 0.4, 0.45, 0.41]
    assert pna_multitask.patience_ran_out(curve, 2)
    assert not pna_multitask.patience_ran_out(curve, 3)
    assert pna_multitask.patience_ran_out(curve + [0.4], 3)  # equal is not better
    assert not pna_multitask.patience_ran_out(curve + [0.39], 3)


def test_pna_multitask_mean_predictor_predicts_the_mean_of_the_group_means():
    from torch_geometric.data import Batch, Data

    def group(n, label):
        graph = Data(x=torch.zeros(n, 2), edge_index=torch.zeros(2, 0, dtype=torch.long),
                     y_node=torch.full((n, 3), label), y_graph=torch.full((1, 3), label))
        return n, Batch.from_data_list([graph])

    groups = [group(2, 0.0), group(6, 1.0)]
    node, whole = pna_multitask.mean_predictor(groups)(groups[0][1], 2)
    assert node.tolist() == [[0.5] * 3] * 2 and whole.tolist() == [[0.5] * 3]
    assert pna_multitask.task_mse(pna_multitask.mean_predictor(groups), groups).tolist() == [
        0.25] * 6


def test_pna_multitask_final_activation_is_a_recorded_setting_older_runs_resume_at_its_default(tmp_path):
    net = pna_multitask.MultitaskNet("PNA", 8, 2, 3, torch.tensor([0, 4, 2]), final_activation="none")
    assert isinstance(net.node_head[-1], torch.nn.Identity)
    assert isinstance(net.graph_head[-1], torch.nn.Identity)
    with pytest.raises(ValueError, match="`final_activation` must be one of"):
        pna_multitask.MultitaskNet("PNA", 8, 2, 3, torch.tensor([0, 4, 2]), final_activation="relu")
    assert run("pna_multitask", tmp_path, "--models", "PNA", "--stop-after-epochs", "1") is None
    record = tmp_path / "run" / "study.json"
    saved = json.loads(record.read_text())
    assert saved["settings"].pop("final_activation") == "leaky_relu"
    record.write_text(json.dumps(saved))  # as written before the setting existed
    with pytest.raises(ValueError, match=r"final_activation \(checkpoint 'leaky_relu', now 'none'\)"):
        run("pna_multitask", tmp_path, "--models", "PNA", "--resume", "--final-activation", "none")
    results = run("pna_multitask", tmp_path, "--models", "PNA", "--resume")  # the default matches
    assert results["settings"]["final_activation"] == "leaky_relu"


def test_pna_multitask_init_the_papers_or_each_layers_default(tmp_path):
    deg = torch.tensor([0, 4, 2])

    def largest_over_papers_bound(net):  # Xavier uniform with gain 1 / fan_in
        return max(float(m.weight.abs().max() / (math.sqrt(6 / sum(m.weight.shape)) / m.weight.size(1)))
                   for m in net.modules() if isinstance(m, torch.nn.Linear))

    torch.manual_seed(0)
    assert largest_over_papers_bound(pna_multitask.MultitaskNet("PNA", 8, 2, 3, deg)) <= 1
    assert largest_over_papers_bound(pna_multitask.MultitaskNet("PNA", 8, 2, 3, deg, init="torch")) > 2
    with pytest.raises(ValueError, match="`init` must be one of"):
        pna_multitask.MultitaskNet("PNA", 8, 2, 3, deg, init="xavier")
    results = run("pna_multitask", tmp_path, "--models", "PNA", "--init", "torch")
    assert results["settings"]["init"] == "torch"
