import pytest
import torch
from torch_geometric.loader import DataLoader

from pyg_agg.datasets import SecondMinimum


def test_labels_are_second_smallest_elements():
    dataset = SecondMinimum(300, min_size=2, max_size=9, num_bits=5, seed=3)
    assert len(dataset) == 300 and dataset.num_classes == 32
    powers = 2 ** torch.arange(4, -1, -1)
    sizes = set()
    for data in dataset:
        values = data.value.tolist()
        sizes.add(len(values))
        assert data.y.item() == sorted(values)[1]
        assert torch.equal((data.x.long() * powers).sum(1), data.value)
        assert data.x.shape == (len(values), 5)
    assert sizes == set(range(2, 10))


def test_repeated_minimum_is_its_own_second_minimum():
    # With 1-bit integers most sets repeat their minimum.
    dataset = SecondMinimum(100, min_size=3, max_size=3, num_bits=1)
    for data in dataset:
        assert data.y.item() == int(data.value.sum() >= 2)


def test_deterministic_and_batches():
    a, b = SecondMinimum(50, seed=7), SecondMinimum(50, seed=7)
    assert torch.equal(a._data.value, b._data.value)
    assert not torch.equal(a._data.value, SecondMinimum(50, seed=8)._data.value)
    batch = next(iter(DataLoader(SecondMinimum(8, 32, 32), batch_size=8)))
    assert batch.x.shape == (256, 8) and batch.y.shape == (8,)


def test_validation():
    with pytest.raises(ValueError, match="`min_size`"):
        SecondMinimum(10, min_size=1)
    with pytest.raises(ValueError, match="`max_size`"):
        SecondMinimum(10, min_size=4, max_size=3)
    with pytest.raises(ValueError, match="`num_sets`"):
        SecondMinimum(0)
    with pytest.raises(ValueError, match="`num_bits`"):
        SecondMinimum(10, num_bits=0)


@pytest.mark.parametrize("shuffle", [False, True])
def test_batches_are_the_data_loaders_batches(shuffle):
    dataset = SecondMinimum(70, min_size=2, max_size=9, num_bits=4, seed=1)
    def generator():
        return torch.Generator().manual_seed(5) if shuffle else None

    loader = DataLoader(dataset, batch_size=16, shuffle=shuffle, generator=generator())
    fast = list(dataset.batches(16, generator()))
    expected = list(loader)
    assert len(fast) == len(expected) == 5
    for ours, theirs in zip(fast, expected, strict=True):
        assert ours.num_graphs == theirs.num_graphs
        for name in ("x", "batch", "y"):
            assert torch.equal(getattr(ours, name), getattr(theirs, name)), name


def test_batches_refuse_a_bad_batch_size():
    with pytest.raises(ValueError, match="`batch_size` must be a positive integer, got 0"):
        next(SecondMinimum(10).batches(0))
