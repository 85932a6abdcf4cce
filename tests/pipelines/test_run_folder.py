"""``--out`` never loses or silently replaces work; failures are one line, status 2."""
import json
import subprocess
import sys

import pytest
import torch

from pyg_agg.cli import main
from pyg_agg.datasets import DatasetSpec
from pyg_agg.pipelines.checkpoint import load_checkpoint
from pyg_agg.pipelines.run_folder import claim_run_folder

TINY = ["--dataset", "synthetic-sbm", "--model", "sage", "--hidden", "8", "--layers", "1",
        "--epochs", "1"]


def _train(out, *extra):
    return main(["train", *TINY, "--out", str(out), *extra])


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    return err


@pytest.fixture
def finished(tmp_path, capsys):
    """A finished two-run folder."""
    out = tmp_path / "run"
    assert _train(out, "--runs", "2") == 0
    capsys.readouterr()
    return out


@pytest.fixture
def no_dataset_load(monkeypatch):
    """Fails the test if training gets as far as loading the dataset."""
    def refuse(*args, **kwargs):
        raise AssertionError("the dataset was loaded before the check")

    monkeypatch.setattr(DatasetSpec, "load", refuse)


def test_a_folder_holding_a_run_is_refused(finished, capsys, no_dataset_load):
    before = {p: p.read_bytes() for p in finished.rglob("*") if p.is_file()}
    assert _train(finished, "--runs", "1") == 2
    err = _one_line_error(capsys)
    assert "already holds a run (run0, run1, summary.json)" in err
    assert "--resume" in err and "--overwrite" in err
    assert {p: p.read_bytes() for p in finished.rglob("*") if p.is_file()} == before


def test_a_partial_run_is_refused_too(tmp_path, capsys, no_dataset_load):
    out = tmp_path / "run"
    (out / "run0").mkdir(parents=True)
    (out / "run0" / "config.json").write_text("{}")
    assert _train(out) == 2
    assert "already holds a run (run0)" in _one_line_error(capsys)


def test_overwrite_replaces_every_old_run(finished):
    assert _train(finished, "--runs", "1", "--overwrite") == 0
    assert sorted(p.name for p in finished.iterdir() if not p.name.startswith(".")) == [
        "run0", "summary.json"]
    assert len(json.loads((finished / "summary.json").read_text())["runs"]) == 1


def test_resume_continues_instead(finished):
    assert _train(finished, "--runs", "2", "--epochs", "2", "--resume") == 0
    assert load_checkpoint(finished / "run1" / "last.pt")["epoch"] == 2


def test_resume_and_overwrite_exclude_each_other(tmp_path, capsys):
    assert _train(tmp_path / "run", "--resume", "--overwrite") == 2
    assert "resume and overwrite exclude each other" in _one_line_error(capsys)


def test_a_second_writer_is_refused_while_the_first_holds_the_folder(tmp_path, capsys):
    out = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, pathlib\n"
         "from pyg_agg.pipelines.run_folder import claim_run_folder\n"
         f"with claim_run_folder(pathlib.Path({str(out)!r}), False, False):\n"
         "    print('locked', flush=True)\n"
         "    sys.stdin.read()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "locked\n"
        assert _train(out) == 2
        err = _one_line_error(capsys)
        assert f"in use by another pyg-agg train (pid {holder.pid})" in err
    finally:
        holder.communicate("", timeout=30)
    assert holder.returncode == 0
    assert _train(out) == 0  # the lock went with the holder


def test_stale_temp_files_of_a_killed_run_are_removed(finished):
    stale = [finished / "run0" / ".last.pt.tmp4242", finished / "run1" / ".metrics.csv.tmp"]
    for path in stale:
        path.write_bytes(b"half a checkpoint")
    assert _train(finished, "--runs", "2", "--resume") == 0
    assert not any(path.exists() for path in stale)


def test_the_lock_is_released_when_a_claim_fails(finished):
    with pytest.raises(ValueError, match="already holds a run"), \
            claim_run_folder(finished, resume=False, overwrite=False):
        pass
    with claim_run_folder(finished, resume=True, overwrite=False):
        pass


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "not a checkpoint"])
def test_a_corrupt_checkpoint_is_named_before_any_work(finished, damage, capsys,
                                                       no_dataset_load):
    last = finished / "run1" / "last.pt"
    data = last.read_bytes()
    if damage == "truncated":
        last.write_bytes(data[:len(data) // 2])
    elif damage == "garbage":
        last.write_bytes(b"\x93garbage" * 64)
    elif damage == "empty":
        last.write_bytes(b"")
    else:
        torch.save({"model": {}}, last)
    assert _train(finished, "--runs", "2", "--resume") == 2
    err = _one_line_error(capsys)
    assert str(last) in err and "--overwrite" in err


def test_a_changed_setting_on_resume_is_named(finished, capsys, no_dataset_load):
    assert _train(finished, "--runs", "2", "--resume", "--lr", "0.01") == 2
    err = _one_line_error(capsys)
    assert "lr was 0.001, now 0.01" in err and str(finished / "run0" / "last.pt") in err


@pytest.mark.parametrize("flag, value", [("--weight-decay", "nan"), ("--weight-decay", "inf"),
                                         ("--lr", "inf"), ("--lr", "nan"),
                                         ("--min-lr", "nan"), ("--dropout", "nan")])
def test_non_finite_hyperparameters_fail_before_work(tmp_path, capsys, flag, value,
                                                     no_dataset_load):
    assert _train(tmp_path / "run", flag, value) == 2
    name = flag[2:].replace("-", "_")
    assert f"{name} must be a finite number, got {value}" in _one_line_error(capsys)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("out", ["file", "file/below"])
def test_an_out_that_is_a_file_fails_before_work(tmp_path, capsys, out, no_dataset_load):
    (tmp_path / "file").write_text("not a folder")
    assert _train(tmp_path / out) == 2
    assert f"out must be a folder, but {tmp_path / 'file'} is a file" in _one_line_error(capsys)
