import torch

from pyg_agg.ops.memo import remembered


def counting():
    calls = []

    def compute():
        calls.append(1)
        return len(calls)

    return calls, compute


def test_a_value_is_kept_until_its_tensor_is_written():
    owner, (_, compute) = torch.arange(4), counting()
    assert remembered(owner, "a", compute) == remembered(owner, "a", compute) == 1
    assert remembered(owner, "b", compute) == 2  # another question, another value
    owner[0] = 7  # the version counter moves: everything kept under it is dropped
    assert remembered(owner, "a", compute) == 3
    assert remembered(torch.arange(4), "a", compute) == 4  # an equal tensor is another key


def test_also_tensors_count_by_identity_and_version():
    owner, other, (_, compute) = torch.arange(3), torch.arange(2), counting()
    assert remembered(owner, "t", compute, also=(other,)) == 1
    assert remembered(owner, "t", compute, also=(other,)) == 1
    assert remembered(owner, "t", compute, also=(other.clone(),)) == 2
    other.add_(1)
    assert remembered(owner, "t", compute, also=(other,)) == 3


def test_nothing_is_kept_for_inference_tensors():
    calls, compute = counting()
    with torch.inference_mode():
        owner = torch.arange(3)
        remembered(owner, "a", compute)
        remembered(owner, "a", compute)
    remembered(torch.arange(3), "a", compute, also=(owner,))
    remembered(torch.arange(3), "a", compute, also=(owner,))
    assert len(calls) == 4
