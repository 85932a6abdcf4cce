"""One memo for what the ops derive from a graph's tensors (an index's range,
a ``ptr``'s check, the target-sorted CSR, its transpose): a model reads the
same graph in every layer and, in full-graph training, every epoch."""
from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import TypeVar

import torch
from torch import Tensor
from torch.utils.weak import WeakIdKeyDictionary

# tensor -> (its version, {what: value}); weak keys, so an entry dies with its tensor
_MEMO: WeakIdKeyDictionary = WeakIdKeyDictionary()
_Value = TypeVar("_Value")


def remembered(owner: Tensor, what: Hashable, compute: Callable[[], _Value],
               also: tuple[Tensor, ...] = ()) -> _Value:
    """``compute()``, kept under ``owner`` and ``what`` while ``owner``'s version
    counter is unchanged: an in-place write to it drops everything kept under
    it. ``also``: other tensors the value depends on, matched by identity and
    version. The value must not hold ``owner`` itself (it would never die).

    Nothing is kept under :func:`torch.compile`, nor for inference tensors
    (made under :func:`torch.inference_mode`, they have no version counter to
    tell a write). A write through ``.data`` does not move the counter either:
    rebuild the tensor after one.
    """
    tensors = (owner, *also)
    if torch.compiler.is_compiling() or any(t.is_inference() for t in tensors):
        return compute()
    key = (what, *((weakref.ref(t), t._version) for t in also))
    version = owner._version
    entry = _MEMO.get(owner)
    if entry is None or entry[0] != version:
        entry = _MEMO[owner] = (version, {})
    kept = entry[1]
    if key not in kept:
        kept[key] = compute()
    return kept[key]


def remembered_1d(index: Tensor, what: Hashable, compute: Callable[[], _Value]) -> _Value:
    """:func:`remembered` for a 1-D tensor that may be a view, such as
    ``edge_index[1]`` (a new object at every call): a view is remembered under
    the tensor it views, by its place in it (dtype, offset, stride, length)."""
    base = index._base
    if type(base) is not Tensor:  # not a view, or of a subclass whose layout may differ
        return remembered(index, what, compute)
    place = (index.dtype, index.storage_offset(), index.stride(0), index.numel())
    return remembered(base, (what, *place), compute)
