"""Read-only data roots are copied to the cache once, safely under concurrency."""
import shutil
import threading
from pathlib import Path

import pytest

from pyg_agg.datasets import root as root_module
from pyg_agg.datasets.root import writable_dataset_dir


@pytest.fixture
def read_only_dataset(tmp_path) -> Path:
    src = tmp_path / "shared" / "toy"
    (src / "raw").mkdir(parents=True)
    (src / "raw" / "edges.csv").write_text("0,1\n")
    (src / "processed").mkdir()
    (src / "processed" / "stale.pt").write_text("not copied")
    for path in (src / "raw" / "edges.csv", src / "raw", src / "processed", src):
        path.chmod(0o555 if path.is_dir() else 0o444)
    yield src
    for path in (src, src / "raw", src / "processed"):
        path.chmod(0o755)


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp" in p.name)


def test_read_only_root_is_copied_without_processed(read_only_dataset, cache_dir):
    dst = writable_dataset_dir(read_only_dataset, "ogb/toy")
    assert dst == cache_dir / "ogb" / "toy"
    assert (dst / "raw" / "edges.csv").read_text() == "0,1\n"
    assert not (dst / "processed").exists()
    (dst / "processed").mkdir()  # the copy is writable
    assert _leftovers(dst.parent) == []


def test_copy_that_loses_the_race_keeps_the_winner(read_only_dataset, cache_dir, monkeypatch):
    """Another process finishes its copy while ours is in flight (the old fixed
    ``NAME.tmp`` folder made the second process fail with FileExistsError)."""
    dst = cache_dir / "ogb" / "toy"
    real_copytree = shutil.copytree

    def copy_while_another_lands(src, tmp, *args, **kwargs):
        # copytree recurses through the module attribute, so sub-folders come here too
        if not dst.exists():
            real_copytree(src, dst, *args, **kwargs)
            (dst / "winner").write_text("first")
        return real_copytree(src, tmp, *args, **kwargs)

    monkeypatch.setattr(root_module.shutil, "copytree", copy_while_another_lands)
    assert writable_dataset_dir(read_only_dataset, "ogb/toy") == dst
    assert (dst / "winner").read_text() == "first"
    assert _leftovers(dst.parent) == []


def test_concurrent_callers_all_get_the_copy(read_only_dataset, cache_dir):
    start = threading.Barrier(4)
    results, errors = [], []

    def call():
        start.wait()
        try:
            results.append(writable_dataset_dir(read_only_dataset, "ogb/toy"))
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert set(results) == {cache_dir / "ogb" / "toy"}
    assert (cache_dir / "ogb" / "toy" / "raw" / "edges.csv").read_text() == "0,1\n"
    assert _leftovers(cache_dir / "ogb") == []
