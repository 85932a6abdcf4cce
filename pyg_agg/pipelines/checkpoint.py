"""Checkpoints and RNG state: what ``last.pt`` holds, and resuming from it.

``last.pt`` holds everything needed to continue a run: model, optimizer,
scheduler, epoch, history, best row, wall time, the global RNG states and the
settings. Checkpoints are written to a temporary file in the same folder and
renamed over the old one (a crash never leaves a torn file), and loaded with
``torch.load(weights_only=True)``. :func:`resume_checkpoints` reads and checks
every run's ``last.pt`` before the dataset is loaded, so a damaged file or a
changed setting fails at once, naming the file and the setting.
"""
from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch

from pyg_agg.pipelines.config import TrainConfig

#: Settings that may change between a run and its resumption.
RESUMABLE_CHANGES = {"epochs", "runs", "resume", "overwrite", "out", "workers", "device",
                     "root"}
#: What ``last.pt`` holds; a file without all of these is not a usable checkpoint.
CHECKPOINT_KEYS = {"model", "optimizer", "scheduler", "epoch", "history", "best", "wall_s",
                   "rng", "config"}


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rng_state() -> dict[str, Any]:
    _, keys, pos, has_gauss, gauss = np.random.get_state()
    state = {"torch": torch.get_rng_state(), "python": random.getstate(),
             "numpy": {"keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                       "has_gauss": int(has_gauss), "gauss": float(gauss)}}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    np_state = state["numpy"]
    np.random.set_state(("MT19937", np_state["keys"].numpy().astype(np.uint32),
                         np_state["pos"], np_state["has_gauss"], np_state["gauss"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_atomic(obj: Any, path: Path) -> None:
    """``torch.save`` to a temporary file in the same folder, then rename over ``path``."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class CheckpointError(ValueError):
    """A ``last.pt`` that cannot be resumed from: unreadable, or from other settings."""


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Loads a checkpoint written by this module (``weights_only=True``).

    Raises:
        CheckpointError: the file is truncated, empty or garbage; the message names it.
    """
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except PermissionError:
        raise  # its message names the file, and the file may well be fine
    # torch reports a damaged file as OSError, EOFError, RuntimeError, UnpicklingError
    # and more, depending on where the damage is: any of them means "not resumable".
    # Their messages run to paragraphs, so the type alone is kept, for one line.
    except Exception as err:  # noqa: BLE001
        raise CheckpointError(f"{path} is truncated, empty or not a checkpoint (torch.load: "
                              f"{type(err).__name__}); pass --overwrite to start the runs "
                              "over") from err
    return ckpt


def check_resumable(saved: dict[str, Any], cfg: TrainConfig, path: Path) -> None:
    now = cfg.to_dict()
    # Settings added after the checkpoint was written count as their defaults.
    defaults = TrainConfig(dataset="", model="").to_dict()
    changed = [f"{k} was {saved.get(k, defaults[k])!r}, now {now[k]!r}" for k in now
               if k not in RESUMABLE_CHANGES and saved.get(k, defaults[k]) != now[k]]
    if changed:
        raise CheckpointError(f"cannot resume from {path}: settings differ ({'; '.join(changed)}); "
                              "use the same settings, or --overwrite to start over")


def resume_checkpoints(cfg: TrainConfig) -> list[Optional[dict[str, Any]]]:
    """Each run's ``last.pt`` (None where there is none yet), read and checked up front."""
    checkpoints: list[Optional[dict[str, Any]]] = []
    for run in range(cfg.runs):
        path = Path(cfg.out) / f"run{run}" / "last.pt"
        ckpt = load_checkpoint(path) if cfg.resume and path.exists() else None
        if ckpt is not None:
            missing = CHECKPOINT_KEYS - set(ckpt) if isinstance(ckpt, dict) else CHECKPOINT_KEYS
            if missing:
                raise CheckpointError(f"{path} is not a training checkpoint (missing "
                                      f"{', '.join(sorted(missing))}); pass --overwrite to "
                                      "start the runs over")
            check_resumable(ckpt["config"], cfg, path)
        checkpoints.append(ckpt)
    return checkpoints
