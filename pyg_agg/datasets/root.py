"""Where datasets live: the data root, and the private cache every loader processes into.

The data root is, in order: an explicit ``root`` argument, the
``PYG_AGG_DATA`` environment variable, or ``./datasets``.

Trust model: files under a data root are *inputs*. Raw files (CSV, text, ``.npz``)
are parsed, never unpickled. Pickled ``processed/`` files under a root are never
loaded, because PyG unpickles some of them with ``weights_only=False`` and a
planted one could run code. Every loader therefore works on a copy of the root's
raw files in the private cache (``PYG_AGG_CACHE`` or ``~/.cache/pyg_agg``, created
mode 700) and writes its processed files there; the copy is keyed by the root's
resolved path and refreshed when the raw files change. As a second line of
defence, :func:`safe_loading` makes every ``torch.load`` weights-only while a
dataset is constructed, so even a tampered cache cannot run code.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Optional, Union

import torch

PathLike = Union[str, "os.PathLike[str]"]
#: What the cached copy records about the raw files it was made from.
SOURCE_RECORD = ".pyg_agg_source.json"


def data_root(root: Optional[PathLike] = None) -> Path:
    """Resolves the data root (argument > ``$PYG_AGG_DATA`` > ``./datasets``)."""
    if root is not None:
        return Path(root).expanduser()
    env = os.environ.get("PYG_AGG_DATA")
    return Path(env).expanduser() if env else Path.cwd() / "datasets"


def cache_root() -> Path:
    """The private folder holding processed copies of datasets."""
    env = os.environ.get("PYG_AGG_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "pyg_agg"


def find_dataset_dir(root: PathLike, *candidates: str) -> Optional[Path]:
    """First existing ``root/candidate`` folder, or None."""
    for rel in candidates:
        path = Path(root) / rel
        if path.is_dir():
            return path
    return None


def _source_record(src: Path) -> dict[str, object]:
    """The source folder and every input file's size and mtime (``processed/`` excluded)."""
    files = {}
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if rel.parts[0] != "processed" and path.is_file():
            stat = path.stat()
            files[rel.as_posix()] = [stat.st_size, stat.st_mtime_ns]
    return {"source": str(src), "files": files}


def _top_level_processed(src: Path):
    """A ``copytree`` ignore rule that skips ``src/processed`` and nothing else."""
    def ignore(folder: str, names: list[str]) -> list[str]:
        return ["processed"] if Path(folder) == src and "processed" in names else []

    return ignore


def _recorded(folder: Path) -> Optional[dict[str, object]]:
    try:
        return json.loads((folder / SOURCE_RECORD).read_text())
    except (OSError, ValueError):
        return None


def private_dataset_dir(src: Path, name: str) -> Path:
    """A cached copy of ``src``'s raw data, where a loader may write ``processed/``.

    ``name`` is the layout the loader expects (``"ogb/ogbg_molbace"``, ``"tu/MUTAG"``):
    the copy is ``cache_root()/<hash of src's path>/name``. A ``processed/`` folder
    under ``src`` is never copied nor read (a warning says so). The copy is remade,
    processed files and all, when ``src``'s raw files change.
    """
    src = Path(src).resolve()
    if (src / "processed").exists():
        warnings.warn(f"ignoring {src / 'processed'}: processed files under a data root are "
                      f"never loaded; processing from the raw files into {cache_root()}",
                      stacklevel=2)
    key = hashlib.sha256(str(src).encode()).hexdigest()[:16]
    dst = cache_root() / key / name
    record = _source_record(src)
    if _recorded(dst) == record:
        return dst
    cache_root().mkdir(mode=0o700, parents=True, exist_ok=True)
    dst.parent.mkdir(parents=True, exist_ok=True)
    # A private temp folder per caller: concurrent runs on the same cache (two jobs,
    # or DDP ranks) each copy into their own, and the first rename wins.
    tmp = Path(tempfile.mkdtemp(dir=dst.parent, prefix=f"{dst.name}.tmp-"))
    try:
        # copyfile, not copy2: the copy must not inherit the source's read-only modes
        shutil.copytree(src, tmp, ignore=_top_level_processed(src),
                        copy_function=shutil.copyfile, dirs_exist_ok=True)
        (tmp / SOURCE_RECORD).write_text(json.dumps(record))
        os.chmod(tmp, 0o755)
        if dst.exists() and _recorded(dst) != record:
            # stale (the raw files changed): move it aside, so the rename below is atomic
            stale = Path(tempfile.mkdtemp(dir=dst.parent, prefix=f"{dst.name}.stale-"))
            with contextlib.suppress(FileNotFoundError):  # another caller moved it first
                dst.rename(stale / "old")
            shutil.rmtree(stale, ignore_errors=True)
        try:
            tmp.rename(dst)  # atomic: a half-copied folder is never used
        except OSError:
            if _recorded(dst) != record:
                raise
            # another caller's complete copy landed first; ours is redundant
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dst


@contextlib.contextmanager
def safe_loading() -> Iterator[None]:
    """Every ``torch.load`` inside is weights-only and accepts exactly PyG's data containers.

    PyG loads ``processed/pre_transform.pt`` and ``pre_filter.pt`` with
    ``weights_only=False``, and falls back to it for a ``data.pt`` that weights-only
    loading refuses; torch's ``TORCH_FORCE_WEIGHTS_ONLY_LOAD`` overrides those calls.
    ogb 1.3.6 loads its processed ``(Data, slices)`` with the default
    ``weights_only=True``, which refuses PyG classes: these few are allowed, inside
    this context only.
    """
    from torch_geometric.data import Data
    from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr
    from torch_geometric.data.storage import GlobalStorage

    previous = os.environ.get("TORCH_FORCE_WEIGHTS_ONLY_LOAD")
    os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = "1"
    try:
        with torch.serialization.safe_globals([Data, DataEdgeAttr, DataTensorAttr,
                                               GlobalStorage]):
            yield
    finally:
        if previous is None:
            del os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"]
        else:
            os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = previous


def missing_dataset_error(name: str, root: Path, expected: list[str]) -> FileNotFoundError:
    """An error that says which files were expected where (one line, for the CLI)."""
    places = ", ".join(str(root / e) for e in expected)
    return FileNotFoundError(
        f"Dataset {name!r} not found under data root {root} and it cannot be "
        f"downloaded here. Expected one of: {places}. "
        f"Set --root or PYG_AGG_DATA to a folder holding it."
    )
