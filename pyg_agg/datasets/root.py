"""Where datasets live: the data root, and read-only roots made usable.

The data root is, in order: an explicit ``root`` argument, the
``PYG_AGG_DATA`` environment variable, or ``./datasets``. A root may be
read-only (e.g. a shared offline copy); loaders that write ``processed/``
files then work on a copy under the cache (``PYG_AGG_CACHE`` or
``~/.cache/pyg_agg``), so no network access is ever needed when the raw
files are present.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Optional, Union

PathLike = Union[str, "os.PathLike[str]"]


def data_root(root: Optional[PathLike] = None) -> Path:
    """Resolves the data root (argument > ``$PYG_AGG_DATA`` > ``./datasets``)."""
    if root is not None:
        return Path(root).expanduser()
    env = os.environ.get("PYG_AGG_DATA")
    return Path(env).expanduser() if env else Path.cwd() / "datasets"


def cache_root() -> Path:
    """Writable folder for processed copies of read-only datasets."""
    env = os.environ.get("PYG_AGG_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "pyg_agg"


def find_dataset_dir(root: PathLike, *candidates: str) -> Optional[Path]:
    """First existing ``root/candidate`` folder, or None."""
    for rel in candidates:
        path = Path(root) / rel
        if path.is_dir():
            return path
    return None


def writable_dataset_dir(src: Path, name: str) -> Path:
    """Returns ``src`` if writable, else a cached copy of its ``raw`` data.

    Only the inputs are copied (everything except ``processed/``); the copy is
    refreshed when missing, so a loader can then write ``processed/`` beside it.
    """
    # root passes os.access on a read-only (mode 555) folder: honour the mode bits too
    if os.access(src, os.W_OK) and Path(src).stat().st_mode & 0o200:
        return src
    dst = cache_root() / name
    if dst.exists():
        return dst
    dst.parent.mkdir(parents=True, exist_ok=True)
    # A private temp folder per caller: concurrent runs on the same cache (two jobs,
    # or DDP ranks) each copy into their own, and the first rename wins.
    tmp = Path(tempfile.mkdtemp(dir=dst.parent, prefix=f"{dst.name}.tmp-"))
    try:
        # copyfile, not copy2: the copy must not inherit the source's read-only modes
        shutil.copytree(src, tmp, ignore=shutil.ignore_patterns("processed"),
                        copy_function=shutil.copyfile, dirs_exist_ok=True)
        os.chmod(tmp, 0o755)
        try:
            tmp.rename(dst)  # atomic: a half-copied folder is never used
        except OSError:
            if not dst.is_dir():
                raise
            # another caller's complete copy landed first; ours is redundant
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dst


def missing_dataset_error(name: str, root: Path, expected: list[str]) -> FileNotFoundError:
    """An error that says which files were expected where."""
    places = "\n  ".join(str(root / e) for e in expected)
    return FileNotFoundError(
        f"Dataset {name!r} not found under data root {root} and it cannot be "
        f"downloaded here. Expected one of:\n  {places}\n"
        f"Set --root or PYG_AGG_DATA to a folder holding it."
    )
