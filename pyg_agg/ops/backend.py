"""Backend selection for the scatter/segment kernels.

Two backends implement every reduction:

* ``"torch"``: native ``torch.Tensor.index_add_`` / ``scatter_reduce_`` /
  ``torch.segment_reduce``. Always available.
* ``"torch_scatter"``: the compiled ``torch_scatter`` extension, used only when
  it imports.

``"auto"`` (the default) picks per operation and device from the table
:data:`AUTO_TABLE`, which records what ``benchmarks/bench_ops.py`` measured.
Override with the ``PYG_AGG_BACKEND`` environment variable or, locally, with
the :func:`use_backend` context manager.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import torch

BACKENDS = ("auto", "torch", "torch_scatter")

try:  # pragma: no cover - depends on the optional `fast` extra
    import torch_scatter  # noqa: F401

    HAS_TORCH_SCATTER = True
except Exception:  # ImportError, or an ABI mismatch raising OSError
    HAS_TORCH_SCATTER = False

try:  # pragma: no cover - depends on the optional `fast` extra
    import torch_sparse  # noqa: F401

    HAS_TORCH_SPARSE = True
except Exception:
    HAS_TORCH_SPARSE = False

# (device type, op) -> backend preferred by "auto". Measured on CPU with
# benchmarks/bench_ops.py (1M x 64 messages, torch 2.13): torch_scatter was no
# faster for sum/mean and several times slower for min/max, and its CSR
# segment kernels did not beat native ones either, so CPU uses torch
# everywhere. On CUDA, torch_scatter's arg-min/max backward avoids the
# tie-splitting mask that native scatter_reduce builds, so it wins for
# min/max there when installed.
AUTO_TABLE: dict[tuple[str, str], str] = {
    ("cuda", "min"): "torch_scatter",
    ("cuda", "max"): "torch_scatter",
}

_state = threading.local()


def _validate(name: str) -> str:
    if name not in BACKENDS:
        raise ValueError(f"Unknown backend {name!r}: expected one of {BACKENDS}")
    if name == "torch_scatter" and not HAS_TORCH_SCATTER:
        raise RuntimeError(
            "Backend 'torch_scatter' requested but the torch_scatter package "
            "is not importable; install the 'fast' extra "
            "(pip install --no-build-isolation torch-scatter)."
        )
    return name


def get_backend() -> str:
    """Returns the backend requested in this thread (``"auto"`` by default)."""
    name = getattr(_state, "backend", None)
    if name is None:
        name = _validate(os.environ.get("PYG_AGG_BACKEND", "auto"))
    return name


@contextmanager
def use_backend(name: str) -> Iterator[None]:
    """Context manager forcing every kernel inside it onto backend ``name``.

    Example:
        >>> with use_backend("torch"):
        ...     out = scatter(src, index, reduce="max")
    """
    previous = getattr(_state, "backend", None)
    _state.backend = _validate(name)
    try:
        yield
    finally:
        _state.backend = previous


def resolve_backend(op: str, device_type: str) -> str:
    """Returns the concrete backend (``"torch"`` or ``"torch_scatter"``) for
    reduction ``op`` on a device of type ``device_type``."""
    name = get_backend()
    if torch.compiler.is_compiling():
        return "torch"  # compiled extensions would break the graph
    if name == "auto":
        name = AUTO_TABLE.get((device_type, op), "torch")
        if name == "torch_scatter" and not HAS_TORCH_SCATTER:
            name = "torch"
    return name
