"""The DictionaryLookup task of Brody, Alon & Yahav (2022)."""
from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from typing import NamedTuple, Optional

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data, InMemoryDataset

from pyg_agg.datasets.batching import batch_to, loader_batches

SPLITS = ("train", "test")


def _permutations(k: int, num_samples: int, rng: np.random.Generator) -> np.ndarray:
    """All ``k!`` permutations if there are at most ``num_samples`` of them,
    otherwise ``num_samples`` distinct random ones; shuffled, ``[n, k]``."""
    if math.factorial(k) <= num_samples:
        perms = np.array(list(itertools.permutations(range(k))), dtype=np.int64)
    else:
        # Draw in batches and drop repeats so no permutation is in both splits.
        perms = np.empty((0, k), dtype=np.int64)
        while len(perms) < num_samples:
            batch = rng.random((num_samples, k)).argsort(axis=1)
            merged = np.concatenate([perms, batch])
            _, first = np.unique(merged, axis=0, return_index=True)
            perms = merged[np.sort(first)][:num_samples]
    return perms[rng.permutation(len(perms))]


class LookupBatch(NamedTuple):
    """A mini-batch of lookups, laid out as PyG's ``DataLoader`` collates them."""

    x: Tensor  # [B * 2k, 2] (key, value) of every node, example after example
    edge_index: Tensor  # [2, B * k^2] every key to every query of its example
    query_mask: Tensor  # [B * 2k] the query nodes
    y: Tensor  # [B * k] the value each query looks up
    num_graphs: int

    def to(self, device: torch.device) -> "LookupBatch":
        return batch_to(self, device)


class DictionaryLookup(InMemoryDataset):
    r"""The DictionaryLookup problem from `"How Attentive are Graph Attention
    Networks?" <https://arxiv.org/abs/2105.14491>`_ (Brody et al., ICLR 2022),
    which single-head GAT cannot fit but GATv2 can.

    Each example is a complete bipartite graph from :math:`k` *key* nodes to
    :math:`k` *query* nodes. Key node :math:`i` holds the pair
    :math:`(i, \pi(i))` (key, value) and query node :math:`i` holds
    :math:`(i, k)`, where :math:`k` is the "empty" value. The label of query
    :math:`i` is :math:`\pi(i)`, the value of the key node with the same key:
    each query must attend to a different key, which static attention (one
    ranking of the keys shared by all queries) cannot express.

    Examples are all :math:`k!` permutations :math:`\pi`, or ``num_samples``
    distinct random ones when :math:`k!` is larger, shuffled with ``seed`` and
    split ``train_fraction`` / rest into ``"train"`` / ``"test"``. The data is
    generated in memory and is a deterministic function of the arguments.

    Every example is a :class:`~torch_geometric.data.Data` with ``2k`` nodes
    (keys ``0..k-1``, then queries ``k..2k-1``):

    * ``x``: ``[2k, 2]`` long, ``(key, value)`` with value ``k`` = empty;
    * ``edge_index``: ``[2, k^2]``, every key to every query;
    * ``query_mask``: ``[2k]`` bool, true for the query nodes;
    * ``y``: ``[k]`` long, the label of each query node in order.

    With batches, ``out[batch.query_mask]`` lines up with ``batch.y``.

    Args:
        k (int): Number of keys (and classes), at least 2.
        split (str, optional): ``"train"`` or ``"test"``. (default: ``"train"``)
        num_samples (int, optional): Most permutations to use.
            (default: ``32000``, as in the paper)
        train_fraction (float, optional): Share of examples in the training
            split. (default: ``0.8``)
        seed (int, optional): Seed of the sampling and the split.
            (default: ``0``)
        transform (callable, optional): Applied to each example on access.
            (default: ``None``)
    """

    def __init__(
        self,
        k: int,
        split: str = "train",
        num_samples: int = 32000,
        train_fraction: float = 0.8,
        seed: int = 0,
        transform: Optional[Callable] = None,
    ) -> None:
        if not isinstance(k, int) or k < 2:
            raise ValueError(f"`k` must be an integer >= 2, got {k!r}")
        if split not in SPLITS:
            raise ValueError(f"`split` must be one of {SPLITS}, got {split!r}")
        if not isinstance(num_samples, int) or num_samples < 2:
            raise ValueError(f"`num_samples` must be an integer >= 2, got {num_samples!r}")
        if not 0.0 < train_fraction < 1.0:
            raise ValueError(f"`train_fraction` must lie in (0, 1), got {train_fraction!r}")
        super().__init__(None, transform=transform)
        self.k = k

        perms = _permutations(k, num_samples, np.random.default_rng(seed))
        num_train = min(max(1, round(train_fraction * len(perms))), len(perms) - 1)
        perms = perms[:num_train] if split == "train" else perms[num_train:]
        perms = torch.from_numpy(perms)
        n = perms.size(0)

        keys = torch.arange(k)
        key_nodes = torch.stack([keys.expand(n, k), perms], dim=-1)
        query_nodes = torch.stack([keys, torch.full((k,), k)], dim=-1).expand(n, k, 2)
        x = torch.cat([key_nodes, query_nodes], dim=1).reshape(-1, 2)
        src, dst = torch.meshgrid(keys, keys + k, indexing="ij")
        edge_index = torch.stack([src.reshape(-1), dst.reshape(-1)]).repeat(1, n)
        query_mask = torch.cat([torch.zeros(k, dtype=torch.bool),
                                torch.ones(k, dtype=torch.bool)]).repeat(n)
        # Stored collated, exactly as `InMemoryDataset.collate` would lay it out.
        self.data = Data(x=x, edge_index=edge_index, query_mask=query_mask,
                         y=perms.reshape(-1))
        steps = torch.arange(n + 1)
        self.slices = {"x": steps * 2 * k, "edge_index": steps * k * k,
                       "query_mask": steps * 2 * k, "y": steps * k}

    @property
    def num_classes(self) -> int:
        return self.k

    @property
    def num_values(self) -> int:
        """Size of the value vocabulary: ``k`` values plus the empty one."""
        return self.k + 1

    def batches(self, batch_size: int,
                generator: Optional[torch.Generator] = None) -> Iterator[LookupBatch]:
        """The mini-batches of ``DataLoader(self, batch_size, shuffle=generator is not None,
        generator=generator)``, the same examples in the same order and layout,
        gathered in a few tensor ops: every example has the same ``2k`` nodes
        and ``k^2`` edges, so a batch is one gather of nodes and labels and one
        offset copy of the edges, where collating 1,024 examples of k = 50 took
        0.37 s a batch."""
        k, data = self.k, self._data
        nodes, labels = data.x.view(-1, 2 * k, 2), data.y.view(-1, k)
        queries = data.query_mask[:2 * k]
        template = data.edge_index[:, :k * k]  # one example's edges, local node ids
        for examples in loader_batches(len(self), batch_size, generator):
            count = examples.numel()
            offsets = torch.arange(count).mul_(2 * k).view(1, count, 1)
            edge_index = (template.unsqueeze(1) + offsets).reshape(2, -1)
            yield LookupBatch(nodes[examples].reshape(-1, 2), edge_index, queries.repeat(count),
                              labels[examples].reshape(-1), count)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(k={self.k}, {len(self)})"
