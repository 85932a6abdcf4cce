"""DictionaryLookup: structure, splits, and the paper's GAT vs GATv2 finding."""
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.loader import DataLoader
from torch_geometric.nn import GATConv

from pyg_agg.datasets import DictionaryLookup
from pyg_agg.nn import GATv2Conv

pytestmark = pytest.mark.usefixtures("single_thread")




def labels_of(dataset):
    return {tuple(dataset[i].y.tolist()) for i in range(len(dataset))}


def test_examples_encode_the_lookup():
    k = 4
    data = DictionaryLookup(k)[3]
    keys, values = data.x[:k], data.x[k:]
    assert torch.equal(keys[:, 0], torch.arange(k))
    assert torch.equal(values, torch.stack([torch.arange(k), torch.full((k,), k)], dim=1))
    assert torch.equal(data.query_mask, torch.arange(2 * k) >= k)
    # query i's label is the value held by key node i
    assert torch.equal(data.y, keys[:, 1])
    assert sorted(data.y.tolist()) == list(range(k))
    pairs = set(map(tuple, data.edge_index.t().tolist()))
    assert pairs == {(j, k + i) for j in range(k) for i in range(k)}


def test_all_permutations_split_80_20_and_seeded():
    train, test = DictionaryLookup(5), DictionaryLookup(5, "test")
    assert (len(train), len(test)) == (96, 24)
    assert labels_of(train) | labels_of(test) == labels_of(train) ^ labels_of(test)
    assert len(labels_of(train) | labels_of(test)) == math.factorial(5)
    assert [d.y.tolist() for d in DictionaryLookup(5)] == [d.y.tolist() for d in train]
    assert [d.y.tolist() for d in DictionaryLookup(5, seed=1)] != [d.y.tolist() for d in train]


def test_sampled_permutations_are_distinct():
    train = DictionaryLookup(8, num_samples=500)
    test = DictionaryLookup(8, "test", num_samples=500)
    assert (len(train), len(test)) == (400, 100)
    assert len(labels_of(train) | labels_of(test)) == 500


def test_batches_align_queries_with_labels():
    batch = next(iter(DataLoader(DictionaryLookup(3), batch_size=4)))
    assert torch.equal(batch.x[batch.query_mask][:, 0], torch.arange(3).repeat(4))
    key_values = batch.x[~batch.query_mask][:, 1]
    assert torch.equal(batch.y, key_values)


@pytest.mark.parametrize("kwargs,match", [
    ({"k": 1}, "`k` must be an integer >= 2"),
    ({"k": 3, "split": "val"}, "`split` must be one of"),
    ({"k": 3, "train_fraction": 1.0}, "`train_fraction` must lie in"),
])
def test_clear_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DictionaryLookup(**kwargs)


class LookupModel(nn.Module):
    def __init__(self, conv, k, hidden=32):
        super().__init__()
        self.key_embedding = nn.Embedding(k, hidden)
        self.value_embedding = nn.Embedding(k + 1, hidden)
        self.conv = conv(hidden, hidden, heads=1, add_self_loops=False)
        self.classifier = nn.Linear(hidden, k, bias=False)

    def forward(self, batch):
        h = F.relu(self.key_embedding(batch.x[:, 0]) + self.value_embedding(batch.x[:, 1]))
        return self.classifier(self.conv(h, batch.edge_index)[batch.query_mask])


def train_accuracy(conv, k, steps=200):
    torch.manual_seed(0)
    train = DictionaryLookup(k)
    batch = next(iter(DataLoader(train, batch_size=len(train))))
    model = LookupModel(conv, k)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(steps):
        logits = model(batch)
        if step % 20 == 0 and bool((logits.argmax(-1) == batch.y).all()):
            return 1.0
        optimizer.zero_grad()
        F.cross_entropy(logits, batch.y).backward()
        optimizer.step()
    with torch.no_grad():
        return float((model(batch).argmax(-1) == batch.y).float().mean())


def test_gatv2_fits_the_training_set_and_gat_does_not():
    """The paper's finding at k=4: a single GATv2 head fits every training
    example, a single static-attention GAT head cannot (same budget)."""
    assert train_accuracy(GATv2Conv, 4) == 1.0
    assert train_accuracy(GATConv, 4) < 0.9


@pytest.mark.parametrize("shuffle", [False, True])
def test_batches_are_the_data_loaders_batches(shuffle):
    dataset = DictionaryLookup(4, "train", num_samples=20, seed=2)

    def generator():
        return torch.Generator().manual_seed(3) if shuffle else None

    expected = list(DataLoader(dataset, batch_size=6, shuffle=shuffle, generator=generator()))
    fast = list(dataset.batches(6, generator()))
    assert len(fast) == len(expected) == 3
    for ours, theirs in zip(fast, expected, strict=True):
        assert ours.num_graphs == theirs.num_graphs
        for name in ("x", "edge_index", "query_mask", "y"):
            assert torch.equal(getattr(ours, name), getattr(theirs, name)), name


def test_batches_refuse_a_bad_batch_size():
    with pytest.raises(ValueError, match="`batch_size` must be a positive integer, got -1"):
        next(DictionaryLookup(3).batches(-1))
