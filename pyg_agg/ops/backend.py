"""Backend selection for the scatter/segment kernels.

Three backends:

* ``"torch"``: the pure-torch reference, ``torch.Tensor.index_add_`` /
  ``scatter_reduce_``. Implements every op; always available.
* ``"torch_scatter"``: the compiled ``torch_scatter`` extension, for the single
  reductions, used only when it imports.
* ``"native"``: pyg_agg's own fused ops (:mod:`pyg_agg.ops.native`: C++ on
  CPU, Triton on CUDA), for the ops that have one (``multi``: the
  multi-statistic reduction). :data:`HAS_NATIVE` says whether the CPU
  kernels loaded. Ops without a native kernel run on ``"torch"``.

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

from pyg_agg.ops.native import HAS_NATIVE, WHY_NOT_NATIVE, has_kernels

BACKENDS = ("auto", "torch", "torch_scatter", "native")

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
#
# The multi-statistic reduction ("multi") runs natively on CPU: measured with
# benchmarks/bench_ops.py (2 cores, 100k nodes / 1M edges, F=64), see
# docs/benchmarks.md. Its Triton kernels, like the attention's, have never run
# on a GPU (tested only under Triton's interpreter), so CUDA keeps the
# reference until measured; `use_backend("native")` opts in.
#
# The CSR sort of an unsorted index ("sort": graph.sort_segments) counting-sorts
# natively on CPU: measured with benchmarks/bench_ops.py against argsort and a
# count (see docs/benchmarks.md). It has no Triton kernel; CUDA sorts with torch.
AUTO_TABLE: dict[tuple[str, str], str] = {
    ("cuda", "min"): "torch_scatter",
    ("cuda", "max"): "torch_scatter",
    ("cpu", "multi"): "native",
    ("cpu", "attention"): "native",
    ("cpu", "sort"): "native",
}
# The ops that have a native kernel, and on which device types (elsewhere
# "native" falls back to "torch").
NATIVE_OPS: dict[str, tuple[str, ...]] = {
    "multi": ("cpu", "cuda"),
    "attention": ("cpu", "cuda"),
    "sort": ("cpu",),
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
    if name == "native" and not HAS_NATIVE:
        raise RuntimeError(
            f"Backend 'native' requested but the native CPU ops are not loaded "
            f"({WHY_NOT_NATIVE}); run `python -m pyg_agg.ops` to see the build error."
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
    """Returns the concrete backend (``"torch"``, ``"torch_scatter"`` or
    ``"native"``) for op ``op`` on a device of type ``device_type``."""
    name = get_backend()
    if name == "auto":
        name = AUTO_TABLE.get((device_type, op), "torch")
    if name == "torch_scatter" and (not HAS_TORCH_SCATTER or torch.compiler.is_compiling()):
        name = "torch"  # torch_scatter's ops would break a compiled graph
    if name == "native" and (device_type not in NATIVE_OPS.get(op, ()) or not has_kernels(device_type)):
        name = "torch"
    return name
