"""Training artefacts, OGB metrics, and exact kill-and-resume on CPU."""
import csv
import json
from pathlib import Path

import pytest
import torch

from pyg_agg.datasets import load_dataset
from pyg_agg.pipelines import train as train_module
from pyg_agg.pipelines.checkpoint import check_resumable, load_checkpoint
from pyg_agg.pipelines.config import TrainConfig
from pyg_agg.pipelines.models import build_model
from pyg_agg.pipelines.train import run_training


def _rows(path):
    with open(path) as f:
        return [{k: v for k, v in row.items() if k != "epoch_time_s"} for row in csv.DictReader(f)]


def test_two_epochs_write_every_artefact(shared_data, cache_dir, tmp_path):
    out = tmp_path / "mutag"
    cfg = TrainConfig(dataset="MUTAG", model="gin", readout="sum", hidden=16, layers=2,
                      epochs=2, runs=2, root=str(shared_data), out=str(out))
    summary = run_training(cfg)
    for run in (0, 1):
        run_dir = out / f"run{run}"
        rows = _rows(run_dir / "metrics.csv")
        assert [int(r["epoch"]) for r in rows] == [1, 2]
        assert set(rows[0]) == {"epoch", "loss", "train", "valid", "test", "lr"}
        config = json.loads((run_dir / "config.json").read_text())
        assert config["run_seed"] == run and config["dataset"] == "MUTAG"
        last = load_checkpoint(run_dir / "last.pt")
        assert last["epoch"] == 2 and len(last["history"]) == 2
        best = load_checkpoint(run_dir / "best.pt")
        assert best["epoch"] == summary["runs"][run]["best_epoch"]
        assert (run_dir / "curves.png").read_bytes()[:4] == b"\x89PNG"
    saved = json.loads((out / "summary.json").read_text())
    tests = [r["test"] for r in saved["runs"]]
    assert saved["test"]["mean"] == pytest.approx(sum(tests) / 2)
    assert saved["test"]["std"] == pytest.approx(abs(tests[0] - tests[1]) / 2 ** 0.5)


def test_ogb_graph_task_scored_by_ogb_evaluator(shared_data, cache_dir, tmp_path):
    cfg = TrainConfig(dataset="ogbg-molesol", model="gin", hidden=16, layers=1, epochs=1,
                      batch_size=128, root=str(shared_data), out=str(tmp_path / "esol"))
    summary = run_training(cfg)
    assert summary["metric"] == "rmse" and not summary["higher_is_better"]
    # reload the best weights and recompute validation RMSE by hand
    task = load_dataset("ogbg-molesol", str(shared_data))
    model = build_model(cfg, task)
    model.load_state_dict(load_checkpoint(tmp_path / "esol/run0/best.pt")["model"])
    model.eval()
    from torch_geometric.loader import DataLoader

    batch = next(iter(DataLoader(task.dataset[task.split["valid"]], batch_size=1000)))
    with torch.no_grad():
        rmse = float(((model(batch) - batch.y) ** 2).mean().sqrt())
    assert summary["valid"]["mean"] == pytest.approx(rmse, rel=1e-5)


class _Crash(RuntimeError):
    pass


def test_killed_mid_epoch_and_resumed_matches_uninterrupted(monkeypatch, tmp_path):
    base = dict(dataset="synthetic-degree", model="gin", readout="sum", hidden=16, layers=2,
                dropout=0.3, epochs=3, batch_size=96, scheduler="plateau", deterministic=True)
    reference = run_training(TrainConfig(**base, out=str(tmp_path / "ref")))

    calls = {"n": 0}
    real_loss = train_module._loss

    def crashing_loss(*args):
        calls["n"] += 1
        if calls["n"] == 5 + 3:  # third batch of epoch 2 (5 batches per epoch)
            raise _Crash
        return real_loss(*args)

    monkeypatch.setattr(train_module, "_loss", crashing_loss)
    cfg = TrainConfig(**base, out=str(tmp_path / "crash"))
    with pytest.raises(_Crash):
        run_training(cfg)
    assert load_checkpoint(tmp_path / "crash/run0/last.pt")["epoch"] == 1
    monkeypatch.setattr(train_module, "_loss", real_loss)
    torch.manual_seed(999)  # a fresh process would not share the crashed one's RNG state
    resumed = run_training(TrainConfig(**base, out=str(tmp_path / "crash"), resume=True))

    assert _rows(tmp_path / "crash/run0/metrics.csv") == _rows(tmp_path / "ref/run0/metrics.csv")
    strip = [{k: v for k, v in r.items() if k != "wall_s"} for r in reference["runs"]]
    assert [{k: v for k, v in r.items() if k != "wall_s"} for r in resumed["runs"]] == strip
    final_ref = load_checkpoint(tmp_path / "ref/run0/last.pt")["model"]
    final_res = load_checkpoint(tmp_path / "crash/run0/last.pt")["model"]
    assert all(torch.equal(final_ref[k], final_res[k]) for k in final_ref)


def test_resume_refuses_changed_settings(tmp_path):
    base = dict(dataset="synthetic-sbm", model="sage", hidden=8, layers=2, epochs=1,
                out=str(tmp_path / "r"))
    run_training(TrainConfig(**base))
    with pytest.raises(ValueError, match="hidden"):
        run_training(TrainConfig(**{**base, "hidden": 16, "epochs": 2}, resume=True))


def test_resume_treats_settings_newer_than_the_checkpoint_as_defaults():
    cfg = TrainConfig(dataset="synthetic-sbm", model="sage")
    saved = {k: v for k, v in cfg.to_dict().items() if k not in ("head", "min_lr")}
    check_resumable(saved, cfg, Path("last.pt"))  # an older checkpoint: no error
    with pytest.raises(ValueError, match="head was 'halving', now 'mlp'"):
        check_resumable({**saved, "head": "halving"}, cfg, Path("last.pt"))


def test_missing_labels_are_left_out_of_the_loss():
    out = torch.tensor([[0.3, -1.0], [2.0, 0.5]])
    y = torch.tensor([[1.0, float("nan")], [0.0, 1.0]])
    expected = torch.nn.functional.binary_cross_entropy_with_logits(
        torch.tensor([0.3, 2.0, 0.5]), torch.tensor([1.0, 0.0, 1.0]))
    assert torch.equal(train_module._loss("binary", out, y), expected)
    assert torch.equal(train_module._loss("regression", out, y),
                       torch.nn.functional.mse_loss(out[~y.isnan()], y[~y.isnan()]))


def test_sigkilled_cli_run_resumes_to_the_uninterrupted_result(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    def cli(out, *extra):
        return [sys.executable, "-m", "pyg_agg.cli", "train", "--dataset", "synthetic-degree",
                "--model", "gin", "--readout", "sum", "--hidden", "16", "--layers", "2",
                "--dropout", "0.3", "--epochs", "3", "--batch-size", "96", "--deterministic",
                "--out", str(out), *extra]

    subprocess.run(cli(tmp_path / "ref"), check=True, capture_output=True, timeout=300)
    victim = subprocess.Popen(cli(tmp_path / "kill"), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    last = tmp_path / "kill" / "run0" / "last.pt"
    while not last.exists() and victim.poll() is None:
        time.sleep(0.02)
    victim.send_signal(signal.SIGKILL)  # somewhere in epoch 2, possibly mid-save
    assert victim.wait(timeout=60) == -signal.SIGKILL
    assert load_checkpoint(last)["epoch"] < 3
    subprocess.run(cli(tmp_path / "kill", "--resume"), check=True, capture_output=True,
                   timeout=300)
    assert _rows(tmp_path / "kill/run0/metrics.csv") == _rows(tmp_path / "ref/run0/metrics.csv")
    ref, res = (load_checkpoint(tmp_path / d / "run0/last.pt")["model"] for d in ("ref", "kill"))
    assert all(torch.equal(ref[k], res[k]) for k in ref)
