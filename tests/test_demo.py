"""The demo: every pair of layers in the table, both columns, and the findings."""
import pytest

from pyg_agg import demo
from pyg_agg.cli import main

#: A one-step epoch on narrow networks, so the whole demo takes seconds.
TINY = {**demo.SETTINGS, "hidden": 8, "layers": 1, "batch_size": 1024}


def test_a_one_epoch_demo_shows_every_pair_ours_beside_pyg(monkeypatch, tmp_path):
    monkeypatch.setattr(demo, "SETTINGS", TINY)
    out = tmp_path / "demo"
    result = demo.run_demo(out, epochs=1, root=str(tmp_path / "no-data"), full_size=False)
    table = demo.format_table(result["rows"])
    header = table.splitlines()[3]
    assert header.split("|")[0].strip() == "layer (ours vs PyG)"
    assert header.split().count("ours") == header.split().count("PyG") == 4
    assert header.count("ratio") == 2
    for pair in demo.PAIRS:
        row = next(line for line in table.splitlines() if line.startswith(pair.label + " "))
        assert row.count("|") == 4 and row.count("x") == 2  # loss, test, time, memory
    assert {r["pair"] for r in result["rows"]} == {p.label for p in demo.PAIRS}
    lcm = next(f for f in result["findings"] if f["finding"] == "lcm_batch_independence")
    # ours reduces each neighbourhood alone: what is left is float rounding of the
    # projection's matmul over 3 rows against 19 (the BLAS kernel depends on the shape)
    assert lcm["ours"] < 1e-6 and lcm["pyg"] > 1e-3
    assert "What PyG's layers cannot do" in demo.report(result)
    assert (out / "demo.json").is_file() and (out / "demo.png").is_file()


def test_both_networks_of_a_pair_start_from_the_same_weights(tmp_path):
    import torch

    from pyg_agg.pipelines.config import TrainConfig

    task = demo.load_sorted("synthetic-degree", str(tmp_path / "no-data"))
    cfg = TrainConfig(dataset=task.name, model="", **TINY)
    for pair in demo.PAIRS:
        pyg, ours = pair.pyg.build(cfg, task), pair.ours.build(cfg, task)
        demo.copy_weights(pyg, ours, strict=pair.same_layer)
        pyg_state, ours_state = pyg.state_dict(), ours.state_dict()
        copied = [k for k, v in pyg_state.items() if k in ours_state and ours_state[k].shape == v.shape]
        assert all(torch.equal(ours_state[k], pyg_state[k]) for k in copied)
        # HISTOGRAPH vs JumpingKnowledge: the encoder and the convolutions at least
        assert len(copied) == len(pyg_state) if pair.same_layer else "convs.0.eps" in copied


@pytest.mark.parametrize("option", ["--epochs", "--threads"])
def test_demo_refuses_zero_naming_the_option(option, capsys):
    assert main(["demo", option, "0"]) == 2
    assert f"{option} must be >= 1, got 0" in capsys.readouterr().err
