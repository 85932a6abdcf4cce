"""The second-minimum multiset task of Ong & Veličković (2022)."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple, Optional

import torch
from torch import Tensor
from torch_geometric.data import Data, InMemoryDataset

from pyg_agg.datasets.batching import batch_to, loader_batches


def integer_bits(values: Tensor, num_bits: int) -> Tensor:
    """The ``num_bits`` binary digits of each integer, most significant first,
    as floats: ``[..., num_bits]``."""
    shifts = torch.arange(num_bits - 1, -1, -1, device=values.device)
    return ((values.unsqueeze(-1) >> shifts) & 1).float()


class SetBatch(NamedTuple):
    """A mini-batch of multisets, laid out as PyG's ``DataLoader`` collates them."""

    x: Tensor  # [elements, num_bits] bits of every element, set after set
    batch: Tensor  # [elements] the set of each element (0..num_graphs-1)
    y: Tensor  # [num_graphs] labels
    num_graphs: int

    def to(self, device: torch.device) -> "SetBatch":
        return batch_to(self, device)


class SecondMinimum(InMemoryDataset):
    r"""Multisets of :obj:`num_bits`-bit integers labelled with their second
    smallest element, from the `"Learnable Commutative Monoids for Graph
    Neural Networks" <https://arxiv.org/abs/2212.08541>`_ paper.

    Each example is a multiset :math:`\{v_1, \dots, v_n\}` of integers drawn
    uniformly from :math:`[0, 2^{b})` with :math:`n` uniform in
    ``[min_size, max_size]``; its label is the second element of the sorted
    multiset (so it equals the minimum when the minimum repeats). A good
    aggregator must keep the two smallest values, which a commutative monoid
    (e.g. a learnt "keep the two smallest" operator) can do exactly while sum
    and max cannot. Train on small sets and test on larger ones (e.g.
    ``min_size=max_size=32``) to measure length generalisation.

    The data is generated in memory (nothing is read or written) and is a
    deterministic function of the arguments.

    Every example is a :class:`~torch_geometric.data.Data` with
    ``x`` (``[n, num_bits]`` float bits, most significant first),
    ``value`` (``[n]`` long integers) and ``y`` (``[1]`` long class).

    Args:
        num_sets (int): Number of multisets.
        min_size (int, optional): Smallest set size, at least 2.
            (default: :obj:`2`)
        max_size (int, optional): Largest set size. (default: :obj:`16`)
        num_bits (int, optional): Bits per integer; there are
            :math:`2^{b}` classes. (default: :obj:`8`)
        seed (int, optional): Seed of the generator. (default: :obj:`0`)
        transform (callable, optional): A function applied to each example
            on access. (default: :obj:`None`)
    """

    def __init__(
        self,
        num_sets: int,
        min_size: int = 2,
        max_size: int = 16,
        num_bits: int = 8,
        seed: int = 0,
        transform: Optional[Callable] = None,
    ) -> None:
        if not isinstance(num_sets, int) or num_sets <= 0:
            raise ValueError(f"`num_sets` must be a positive integer, got {num_sets!r}")
        if not isinstance(min_size, int) or min_size < 2:
            raise ValueError(f"`min_size` must be an integer >= 2 (a second minimum needs "
                             f"two elements), got {min_size!r}")
        if not isinstance(max_size, int) or max_size < min_size:
            raise ValueError(f"`max_size` must be an integer >= min_size={min_size}, "
                             f"got {max_size!r}")
        if not isinstance(num_bits, int) or not 1 <= num_bits <= 30:
            raise ValueError(f"`num_bits` must be an integer in [1, 30], got {num_bits!r}")
        super().__init__(None, transform=transform)
        self.num_bits = num_bits

        generator = torch.Generator().manual_seed(seed)
        sizes = torch.randint(min_size, max_size + 1, (num_sets,), generator=generator)
        values = torch.randint(0, 2 ** num_bits, (int(sizes.sum()),), generator=generator)
        bits = integer_bits(values, num_bits)
        # Sorting by (set, value) puts each set's second minimum at offset 1.
        ptr = torch.cat([sizes.new_zeros(1), sizes.cumsum(0)])
        set_ids = torch.repeat_interleave(torch.arange(num_sets), sizes)
        ranked = (set_ids * 2 ** num_bits + values).sort().values
        labels = ranked[ptr[:-1] + 1] - torch.arange(num_sets) * 2 ** num_bits
        # Stored collated, exactly as `InMemoryDataset.collate` would lay it out.
        self.data = Data(x=bits, value=values, y=labels)
        self.slices = {"x": ptr, "value": ptr, "y": torch.arange(num_sets + 1)}

    @property
    def num_classes(self) -> int:
        return 2 ** self.num_bits

    def batches(self, batch_size: int,
                generator: Optional[torch.Generator] = None) -> Iterator[SetBatch]:
        """The mini-batches of ``DataLoader(self, batch_size, shuffle=generator is not None,
        generator=generator)``, the same sets in the same order and layout, each
        gathered from the collated storage in a few tensor ops instead of
        collating ``batch_size`` :class:`Data` objects (the cost of an epoch's
        loading falls from about 11 ms to well under 1 ms a batch of 128)."""
        ptr, data = self.slices["x"], self._data
        for sets in loader_batches(len(self), batch_size, generator):
            sizes = ptr[sets + 1] - ptr[sets]
            batch = torch.repeat_interleave(torch.arange(sets.numel()), sizes)
            first_of_set = (sizes.cumsum(0) - sizes).repeat_interleave(sizes)
            elements = ptr[sets].repeat_interleave(sizes) + torch.arange(batch.numel()) - first_of_set
            yield SetBatch(data.x[elements], batch, data.y[sets], sets.numel())

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({len(self)}, num_bits={self.num_bits})"
