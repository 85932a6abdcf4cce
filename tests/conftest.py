import os
import subprocess
import sys
import textwrap
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


class _Payload:
    """Unpickling this object creates ``marker``: proof that a planted file ran code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return open, (str(self.marker), "w")


@pytest.fixture
def plant_payload(tmp_path):
    """``plant(path)`` writes a pickle whose loading would create a marker file; returns
    the marker. A control copy is loaded here, so a test that checks the marker is
    absent checks a payload known to work."""
    control = tmp_path / "payload-control"
    torch.save(_Payload(control), tmp_path / "control.pt")
    torch.load(tmp_path / "control.pt", weights_only=False)
    assert control.exists()
    marker = tmp_path / "payload-ran"

    def plant(path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(_Payload(marker), path)
        return marker

    return plant


@pytest.fixture
def triton_interpreter():
    """Runs Python source in a fresh process under Triton's interpreter, so the
    Triton kernels run on CPU tensors; returns its stdout. A fresh process
    because TRITON_INTERPRET must be set before the kernels are defined."""
    def run(code: str) -> str:
        env = {**os.environ, "TRITON_INTERPRET": "1"}
        out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr[-3000:]
        return out.stdout

    return run


@pytest.fixture
def gnn_explainer_mask():
    """``mask(conv, x, edge_index)``: the edge mask PyG's GNNExplainer trains
    through ``conv`` for node 4, from a fixed seed, so that two layers computing
    the same function give the same mask."""
    from torch_geometric.explain import Explainer, GNNExplainer

    def mask(conv, x, edge_index):
        explainer = Explainer(conv, algorithm=GNNExplainer(epochs=30), explanation_type="model",
                              edge_mask_type="object",
                              model_config=dict(mode="regression", task_level="node",
                                                return_type="raw"))
        torch.manual_seed(3)
        return explainer(x, edge_index, index=4).edge_mask

    return mask
