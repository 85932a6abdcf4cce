"""Two CPU processes under torchrun (gloo): one epoch, rank 0 writes, metrics over all ranks."""
import json
import os
import socket
import subprocess
import sys

import torch

from pyg_agg.pipelines.checkpoint import load_checkpoint
from pyg_agg.pipelines.config import TrainConfig
from pyg_agg.pipelines.models import build_model


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_torchrun_two_processes_one_epoch(shared_data, cache_dir, tmp_path):
    out = tmp_path / "ddp"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
           "--master_port", str(_free_port()), "-m", "pyg_agg.cli", "train", "--dataset", "MUTAG",
           "--model", "gin", "--readout", "sum", "--hidden", "16", "--layers", "2",
           "--epochs", "1", "--device", "cpu", "--root", str(shared_data), "--out", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == [".lock", "run0", "summary.json"]
    config = json.loads((out / "run0" / "config.json").read_text())
    assert config["world_size"] == 2
    assert proc.stdout.count("MUTAG: acc at best validation epoch") == 1  # rank 0 prints

    # the reported validation accuracy covers the whole split, not one rank's shard
    summary = json.loads((out / "summary.json").read_text())
    cfg = TrainConfig(dataset="MUTAG", model="gin", readout="sum", hidden=16, layers=2)
    task = cfg.validate().load(shared_data)
    model = build_model(cfg, task)
    model.load_state_dict(load_checkpoint(out / "run0" / "best.pt")["model"])
    model.eval()
    from torch_geometric.loader import DataLoader

    batch = next(iter(DataLoader(task.dataset[task.split["valid"]], batch_size=1000)))
    with torch.no_grad():
        accuracy = float((model(batch).argmax(-1) == batch.y).float().mean())
    assert summary["valid"]["mean"] == accuracy
