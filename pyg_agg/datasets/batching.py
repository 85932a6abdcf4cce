"""Mini-batches of in-memory datasets gathered in a few tensor ops, in the order
and layout of PyG's ``DataLoader``, for datasets whose collation costs more
than the model's step (thousands of small :class:`Data` objects a batch)."""
from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple, Optional, TypeVar

import torch
from torch import Tensor


def loader_order(num_examples: int, generator: Optional[torch.Generator]) -> Tensor:
    """The order in which ``DataLoader(dataset, shuffle=generator is not None,
    generator=generator)`` visits the examples, drawing from ``generator``
    what the loader draws before its first batch: its iterator's base seed,
    then its sampler's permutation. So augmentation drawn from the same
    generator between batches gets the numbers it got behind the loader (the
    loader draws one more permutation once exhausted, which nothing after an
    epoch reads here)."""
    if generator is None:
        return torch.arange(num_examples)
    torch.empty((), dtype=torch.int64).random_(generator=generator)
    return torch.randperm(num_examples, generator=generator)


def loader_batches(num_examples: int, batch_size: int,
                   generator: Optional[torch.Generator]) -> Iterator[Tensor]:
    """The examples of each batch of ``DataLoader(dataset, batch_size,
    shuffle=generator is not None, generator=generator)``, in its order
    (:func:`loader_order`)."""
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"`batch_size` must be a positive integer, got {batch_size!r}")
    yield from loader_order(num_examples, generator).split(batch_size)


_Batch = TypeVar("_Batch", bound=NamedTuple)


def batch_to(batch: _Batch, device: torch.device) -> _Batch:
    """A batch (a named tuple of tensors and counts) with its tensors on ``device``."""
    return type(batch)(*(f.to(device) if isinstance(f, Tensor) else f for f in batch))
