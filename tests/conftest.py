import os
from pathlib import Path

import pytest
import torch

# CI and sessions lay shared/ beside the checkout
DEFAULT_SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets"
SHARED_DATA = Path(os.environ.get("PYG_AGG_SHARED_DATA", DEFAULT_SHARED))


# PYG_AGG_TEST_DEVICE=cuda makes every tensor a test creates without a device land on
# the GPU (torch.set_default_device), so the CPU tests re-run there unchanged
TEST_DEVICE = os.environ.get("PYG_AGG_TEST_DEVICE")


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(12345)
    if TEST_DEVICE:
        torch.set_default_device(TEST_DEVICE)
    yield
    if TEST_DEVICE:
        torch.set_default_device(None)


@pytest.fixture
def shared_data() -> Path:
    """The read-only offline datasets beside the checkout (see its README)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"offline datasets not found at {SHARED_DATA} (set PYG_AGG_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    """A private writable cache so tests never share processed files."""
    path = tmp_path / "cache"
    monkeypatch.setenv("PYG_AGG_CACHE", str(path))
    return path


@pytest.fixture
def single_thread():
    """One torch thread: on tiny graphs OpenMP barriers on a busy 2-core
    machine cost far more than the work itself."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
