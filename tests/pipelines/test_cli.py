"""``pyg-agg`` rejects bad input with a clear message before doing any work."""
import pytest

from pyg_agg.cli import main


@pytest.mark.parametrize("argv, message", [
    (["--dataset", "nope", "--model", "gin"], "Valid datasets: ogbg-molbace"),
    (["--dataset", "MUTAG", "--model", "transformer"], "Valid models: gatv2, pna, pna-simple, lcm, gin"),
    (["--dataset", "MUTAG", "--model", "gin", "--readout", "attn"], "Valid readouts: mean"),
    (["--dataset", "MUTAG", "--model", "gin", "--dropout", "1.0"], "dropout must be in [0, 1)"),
    (["--dataset", "MUTAG", "--model", "gin", "--lr", "-1"], "lr must be a positive"),
    (["--dataset", "MUTAG", "--model", "gin", "--epochs", "0"], "epochs must be a positive"),
    (["--dataset", "MUTAG", "--model", "gin", "--hidden", "2", "--head", "halving"],
     "head 'halving' needs hidden >= 4"),
    (["--dataset", "MUTAG", "--model", "gin", "--lr", "0.01", "--min-lr", "0.1"],
     "min_lr must be in [0, lr=0.01]"),
    (["--dataset", "MUTAG", "--model", "gat", "--hidden", "10", "--heads", "4"],
     "hidden (10) must be divisible by heads (4)"),
    (["--dataset", "MUTAG", "--model", "pna", "--hidden", "10", "--towers", "4"],
     "must be divisible by towers"),
    (["--dataset", "Cora", "--model", "gcn", "--readout", "sum"], "graph-level datasets"),
    (["--dataset", "MUTAG", "--model", "gin", "--num-neighbors", "5,5"], "node-level"),
])
def test_invalid_settings_fail_before_work(tmp_path, capsys, argv, message):
    out = tmp_path / "run"
    assert main(["train", *argv, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_missing_dataset_says_where_files_were_expected(tmp_path, capsys):
    code = main(["train", "--dataset", "ogbn-products", "--model", "sage", "--root",
                 str(tmp_path), "--out", str(tmp_path / "run")])
    assert code == 2
    err = capsys.readouterr().err
    assert "ogbn_products/raw/edge.csv.gz" in err and "split/sales_ranking" in err
    assert len(err.strip().splitlines()) == 1


def test_build_ogb_rejects_unknown_name(tmp_path, capsys):
    code = main(["build-ogb", "--smiles", str(tmp_path / "x.csv"), "--name", "ogbg-foo",
                 "--root", str(tmp_path)])
    assert code == 2
    assert "ogbg-molhiv" in capsys.readouterr().err


def test_recipe_switches_can_be_turned_off():
    from pyg_agg.cli import config_from_args, recipe_parser

    parser = recipe_parser("", dict(dataset="ogbg-molhiv", model="pna-simple",
                                    dropout_after_residual=True))
    assert config_from_args(parser.parse_args([])).dropout_after_residual is True
    args = parser.parse_args(["--no-dropout-after-residual", "--model", "pna"])
    assert (args.dropout_after_residual, args.model) == (False, "pna")


def test_datasets_lists_every_name_present_or_missing(shared_data, tmp_path, capsys):
    import shutil

    from pyg_agg.datasets import dataset_names

    shutil.copytree(shared_data / "tu" / "MUTAG" / "raw", tmp_path / "tu" / "MUTAG" / "raw")
    shutil.copytree(shared_data / "ogb" / "ogbg_molbace", tmp_path / "ogbg_molbace")
    assert main(["datasets", "--root", str(tmp_path)]) == 0
    root_line, *rows, totals = capsys.readouterr().out.splitlines()
    assert root_line == f"data root: {tmp_path}"
    lines = {line.split()[0]: line for line in rows}
    assert list(lines) == dataset_names()
    assert lines["MUTAG"].endswith(f"present: {tmp_path / 'tu' / 'MUTAG'}")
    assert lines["ogbg-molbace"].endswith(f"present: {tmp_path / 'ogbg_molbace'}")
    assert "missing (pyg-agg build-ogb builds it from SMILES)" in lines["ogbg-molhiv"]
    assert lines["Cora"].endswith("missing") and lines["ogbn-arxiv"].endswith("missing")
    assert lines["synthetic-sbm"].endswith("generated in memory")
    assert totals == "2 present, 19 missing, 2 generated"
