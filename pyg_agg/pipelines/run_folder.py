"""The run folder (``--out``): one writer at a time, and no run silently replaced.

:func:`claim_run_folder` holds an exclusive lock on ``OUT/.lock`` while a job writes
there, so a second concurrent ``train`` into the same folder is refused instead of
racing the first. Under the lock it removes temporary files a killed job left
behind, then refuses a folder that already holds a run (``summary.json`` or a
``runN/`` folder, finished or partial) unless the job resumes it or overwrites it.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

#: ``runN`` folders: one per independent run.
RUN_DIR = re.compile(r"run\d+")
#: What a (finished or partial) run leaves at the top of the run folder.
SUMMARY = "summary.json"
LOCK = ".lock"


class RunFolderError(ValueError):
    """The run folder cannot be used as asked (in use, or it holds a run)."""


def check_out_path(out: Path) -> None:
    """ValueError unless ``out`` is a folder or can be created as one."""
    for path in (out, *out.parents):
        if path.exists():
            if not path.is_dir():
                raise ValueError(f"out must be a folder, but {path} is a file")
            return


def previous_run(out: Path) -> list[str]:
    """Names of the run artefacts already in ``out`` (empty when there are none)."""
    if not out.is_dir():
        return []
    return sorted(p.name for p in out.iterdir()
                  if p.name == SUMMARY or (p.is_dir() and RUN_DIR.fullmatch(p.name)))


def remove_stale_temp_files(out: Path) -> list[Path]:
    """Deletes the ``.NAME.tmp*`` files of atomic writes a killed job left; returns them.

    Only safe while holding the lock: then no live writer owns any of them.
    """
    stale = [p for pattern in (".*.tmp*", "run*/.*.tmp*") for p in out.glob(pattern)
             if p.is_file()]
    for path in stale:
        path.unlink()
    return stale


@contextlib.contextmanager
def claim_run_folder(out: Path, resume: bool, overwrite: bool) -> Iterator[None]:
    """Locks ``out`` for this job and checks what it already holds.

    Args:
        out: the run folder (created if missing).
        resume: continue the runs found there.
        overwrite: delete the runs found there (``summary.json`` and ``runN/``) first.

    Raises:
        RunFolderError: another job holds the lock, or ``out`` holds a run and
            neither ``resume`` nor ``overwrite`` is set.
    """
    out.mkdir(parents=True, exist_ok=True)
    # The lock file is never deleted: unlinking it would let a waiting job lock the
    # old inode while a new one locks a fresh file, and both would "hold" the folder.
    with open(out / LOCK, "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            owner = lock.read().strip() or "unknown"
            raise RunFolderError(f"{out} is in use by another pyg-agg train (pid {owner}); "
                                 "wait for it to finish or choose another --out") from None
        try:
            lock.truncate(0)
            lock.write(f"{os.getpid()}\n")
            lock.flush()
            remove_stale_temp_files(out)
            found = previous_run(out)
            if found and overwrite:
                for name in found:
                    if (out / name).is_dir():
                        shutil.rmtree(out / name)
                    else:
                        (out / name).unlink()
            elif found and not resume:
                raise RunFolderError(f"{out} already holds a run ({', '.join(found)}); pass "
                                     "--resume to continue it or --overwrite to replace it")
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
