"""Data roots are copied to the private cache, refreshed on change, safely under concurrency."""
import json
import shutil
import threading
from pathlib import Path

import pytest

from pyg_agg.datasets import root as root_module
from pyg_agg.datasets.root import SOURCE_RECORD, private_dataset_dir


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
    with pytest.warns(UserWarning, match="ignoring .*processed"):
        dst = private_dataset_dir(read_only_dataset, "ogb/toy")
    assert dst.parent.parent.parent == cache_dir and dst.parts[-2:] == ("ogb", "toy")
    assert (dst / "raw" / "edges.csv").read_text() == "0,1\n"
    assert not (dst / "processed").exists()
    (dst / "processed").mkdir()  # the copy is writable
    assert _leftovers(dst.parent) == []
    assert private_dataset_dir(read_only_dataset, "ogb/toy") == dst  # made once
    assert (dst / "processed").is_dir()


def test_writable_root_is_copied_too_and_refreshed_when_raw_files_change(tmp_path, cache_dir):
    src = tmp_path / "mine" / "toy"
    (src / "raw").mkdir(parents=True)
    (src / "raw" / "edges.csv").write_text("0,1\n")
    dst = private_dataset_dir(src, "ogb/toy")
    assert not dst.is_relative_to(src)
    (dst / "processed").mkdir()
    (dst / "processed" / "data.pt").write_text("processed from 0,1")
    (src / "raw" / "edges.csv").write_text("0,1\n1,2\n")
    assert private_dataset_dir(src, "ogb/toy") == dst
    assert (dst / "raw" / "edges.csv").read_text() == "0,1\n1,2\n"
    assert not (dst / "processed").exists()  # stale processed files went with the old copy
    assert _leftovers(dst.parent) == []


def test_each_root_gets_its_own_copy(tmp_path, cache_dir):
    copies = []
    for owner in ("alice", "bob"):
        src = tmp_path / owner / "toy"
        (src / "raw").mkdir(parents=True)
        (src / "raw" / "edges.csv").write_text(owner)
        copies.append(private_dataset_dir(src, "ogb/toy"))
    assert copies[0] != copies[1]
    assert [(c / "raw" / "edges.csv").read_text() for c in copies] == ["alice", "bob"]


def test_copy_that_loses_the_race_keeps_the_winner(read_only_dataset, cache_dir, monkeypatch):
    """Another process finishes its copy while ours is in flight (the old fixed
    ``NAME.tmp`` folder made the second process fail with FileExistsError)."""
    dst = private_dataset_dir(read_only_dataset, "ogb/toy")
    shutil.rmtree(dst)
    real_copytree = shutil.copytree

    def copy_while_another_lands(src, tmp, *args, **kwargs):
        # copytree recurses through the module attribute, so sub-folders come here too
        if not dst.exists():
            real_copytree(src, dst, *args, **kwargs)
            record = root_module._source_record(Path(src))
            (dst / SOURCE_RECORD).write_text(json.dumps(record))
            (dst / "winner").write_text("first")
        return real_copytree(src, tmp, *args, **kwargs)

    monkeypatch.setattr(root_module.shutil, "copytree", copy_while_another_lands)
    assert private_dataset_dir(read_only_dataset, "ogb/toy") == dst
    assert (dst / "winner").read_text() == "first"
    assert _leftovers(dst.parent) == []


def test_concurrent_callers_all_get_the_copy(read_only_dataset, cache_dir):
    start = threading.Barrier(4)
    results, errors = [], []

    def call():
        start.wait()
        try:
            results.append(private_dataset_dir(read_only_dataset, "ogb/toy"))
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    [dst] = set(results)
    assert (dst / "raw" / "edges.csv").read_text() == "0,1\n"
    assert _leftovers(dst.parent) == []


def test_only_the_top_level_processed_folder_is_left_out(tmp_path, cache_dir):
    src = tmp_path / "mine" / "toy"
    (src / "raw" / "processed").mkdir(parents=True)
    (src / "raw" / "processed" / "part.csv").write_text("an input that happens to be here")
    dst = private_dataset_dir(src, "ogb/toy")
    assert (dst / "raw" / "processed" / "part.csv").is_file()
