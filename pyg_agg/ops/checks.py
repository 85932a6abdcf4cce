"""Input validation shared by every kernel: clear errors naming the argument."""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from pyg_agg.ops.memo import remembered, remembered_1d

_validation_enabled = True


def index_range(index: Tensor) -> tuple[int, int]:
    """``(min, max)`` of a non-empty 1-D integer tensor, remembered per version
    (:func:`~pyg_agg.ops.memo.remembered`): a graph's index is scanned once, not
    by every layer in every epoch that reads it.

    A view (such as ``edge_index[0]``, a new object at every call) is
    remembered under the tensor it views, by its place in it.
    """
    def scan() -> tuple[int, int]:
        lo, hi = torch.aminmax(index)
        return int(lo), int(hi)

    return remembered_1d(index, "range", scan)


def set_validation(enabled: bool) -> None:
    """Turns the data-dependent index checks (range, sign) on or off.

    They cost one min/max pass over the index (and a device sync on GPU);
    shape, dtype and device checks always run.
    """
    global _validation_enabled
    _validation_enabled = bool(enabled)


def check_index(
    index: Tensor,
    src: Tensor,
    dim: int,
    dim_size: Optional[int],
    name: str = "index",
) -> int:
    """Validates a scatter index against ``src`` and returns the output size.

    Raises:
        TypeError: ``index`` is not an integer tensor.
        ValueError: wrong rank or length, negative or out-of-range entries.
        RuntimeError: ``index`` and ``src`` live on different devices.
    """
    if not isinstance(index, Tensor):
        raise TypeError(f"`{name}` must be a torch.Tensor (got {type(index).__name__})")
    if index.dtype not in (torch.int64, torch.int32):
        raise TypeError(
            f"`{name}` must be an integer tensor (torch.long or torch.int), "
            f"got dtype {index.dtype}"
        )
    if index.dim() != 1:
        raise ValueError(
            f"`{name}` must be one-dimensional, got shape {tuple(index.shape)}"
        )
    if index.device != src.device:
        raise RuntimeError(
            f"`{name}` is on {index.device} but `src` is on {src.device}; "
            f"move both to the same device"
        )
    if index.numel() != src.size(dim):
        raise ValueError(
            f"`{name}` has {index.numel()} entries but `src` has "
            f"{src.size(dim)} rows along dim {dim} (shape {tuple(src.shape)})"
        )
    if dim_size is not None and dim_size < 0:
        raise ValueError(f"`dim_size` must be non-negative, got {dim_size}")
    if index.numel() == 0:
        return 0 if dim_size is None else int(dim_size)
    if torch.compiler.is_compiling():
        if dim_size is None:
            raise ValueError("`dim_size` must be given under torch.compile")
        return int(dim_size)
    if not _validation_enabled and dim_size is not None:
        return int(dim_size)
    lo, hi = index_range(index)
    if lo < 0:
        raise ValueError(f"`{name}` contains negative entries (min {lo})")
    if dim_size is None:
        return hi + 1
    if hi >= dim_size:
        raise ValueError(
            f"`{name}` contains {hi}, out of range for dim_size={dim_size} "
            f"(expected entries in [0, {dim_size - 1}])"
        )
    return int(dim_size)


def check_ptr(ptr: Tensor, src: Tensor, dim: int) -> int:
    """Validates a CSR pointer for ``src`` and returns the number of segments."""
    if not isinstance(ptr, Tensor) or ptr.dtype not in (torch.int64, torch.int32):
        raise TypeError("`ptr` must be an integer torch.Tensor (CSR offsets)")
    if ptr.dim() != 1 or ptr.numel() < 1:
        raise ValueError(
            f"`ptr` must be one-dimensional with at least one entry, "
            f"got shape {tuple(ptr.shape)}"
        )
    if ptr.device != src.device:
        raise RuntimeError(f"`ptr` is on {ptr.device} but `src` is on {src.device}")
    if _validation_enabled and not torch.compiler.is_compiling():
        first, last, ordered = remembered(ptr, "ptr", lambda: (
            int(ptr[0]), int(ptr[-1]), ptr.numel() == 1 or not bool((ptr[1:] < ptr[:-1]).any())))
        if first != 0 or last != src.size(dim):
            raise ValueError(
                f"`ptr` must start at 0 and end at src.size({dim})={src.size(dim)}, "
                f"got {first}..{last}"
            )
        if not ordered:
            raise ValueError("`ptr` must be non-decreasing")
    return ptr.numel() - 1


def check_permutation(order: Tensor, size: int, like: Tensor, name: str) -> Tensor:
    """Validates ``order`` as a permutation of ``range(size)`` on ``like``'s
    device; returns it as int64. The scan (every entry once) is remembered per
    version, like the index checks."""
    if not isinstance(order, Tensor) or order.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"`{name}` must be an integer torch.Tensor (a permutation of the rows)")
    if order.dim() != 1 or order.numel() != size:
        raise ValueError(f"`{name}` must have shape ({size},) (a permutation of the rows), "
                         f"got {tuple(order.shape)}")
    if order.device != like.device:
        raise RuntimeError(f"`{name}` is on {order.device} but `src` is on {like.device}")
    if _validation_enabled and not torch.compiler.is_compiling() and size > 0:
        def scan() -> bool:
            lo, hi = torch.aminmax(order)
            return (int(lo) >= 0 and int(hi) < size
                    and bool((torch.bincount(order, minlength=size) == 1).all()))
        if not remembered(order, "permutation", scan):
            raise ValueError(f"`{name}` must hold each of 0..{size - 1} exactly once")
    return order.long()


def normalize_dim(src: Tensor, dim: int) -> int:
    d = dim + src.dim() if dim < 0 else dim
    if not 0 <= d < max(src.dim(), 1):
        raise ValueError(
            f"`dim`={dim} is out of range for `src` with {src.dim()} dimensions"
        )
    return d
