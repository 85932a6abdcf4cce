import torch
from torch.utils.data import DataLoader

from pyg_agg.datasets.batching import batch_to, loader_order


def test_loader_order_is_the_data_loaders_order_and_draws_what_it_draws_first():
    loader_generator, ours = torch.Generator().manual_seed(11), torch.Generator().manual_seed(11)
    batches = iter(DataLoader(range(37), batch_size=5, shuffle=True, generator=loader_generator))
    first = next(batches)
    order = loader_order(37, ours)
    # during the epoch the generator is where the loader leaves it, so augmentation
    # drawn from it between batches (e.g. shuffling within sets) draws the same numbers
    assert torch.equal(torch.rand(3, generator=ours), torch.rand(3, generator=loader_generator))
    assert torch.equal(order, torch.cat([first, *batches]))
    assert torch.equal(loader_order(4, None), torch.arange(4))


def test_batch_to_moves_the_tensors_and_keeps_the_counts():
    from pyg_agg.datasets import SecondMinimum

    batch = next(SecondMinimum(6).batches(4))
    moved = batch_to(batch, torch.device("cpu"))
    assert type(moved) is type(batch) and moved.num_graphs == 4
    assert all(torch.equal(a, b) for a, b in zip(moved[:3], batch[:3], strict=True))
