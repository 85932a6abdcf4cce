"""balanced_tree_reduce and tree_level: the pairing, the tree against its
recursive definition, depth and work, chunked recomputation, gradients, errors."""
import math

import pytest
import torch

from pyg_agg.ops import SegmentLayout, balanced_tree_reduce, scatter, tree_level


def not_associative(a, b):
    """Neither commutative nor associative, so every result names its tree."""
    return 2 * a - b + a * b


def recursive_tree(rows):
    """The definition: combine neighbours level by level, an odd last row moves up."""
    while len(rows) > 1:
        pairs = [not_associative(rows[k], rows[k + 1]) for k in range(0, len(rows) - 1, 2)]
        rows = pairs + rows[len(rows) - len(rows) % 2:]
    return rows[0]


def random_index(degrees, seed=0):
    gen = torch.Generator().manual_seed(seed)
    index = torch.repeat_interleave(torch.arange(len(degrees)), torch.as_tensor(degrees))
    return index[torch.randperm(index.numel(), generator=gen)]


def test_tree_level_pairs_neighbours_and_carries_the_odd_last():
    order = torch.arange(9, -1, -1)  # rows of h are read through `order`
    layout = SegmentLayout(ids=torch.tensor([0, 1, 2]), order=order,
                           starts=torch.tensor([0, 2, 5]), counts=torch.tensor([2, 3, 5]))
    level = tree_level(layout)
    assert level.left.tolist() == [9, 7, 4, 2]
    assert level.right.tolist() == [8, 6, 3, 1]
    assert level.carried.tolist() == [5, 0]
    assert level.finished_ids.tolist() == [0]
    assert level.finished_pairs.tolist() == [0]
    # h' = [4 pair results; rows 5, 0]: segment 1 is (pair 1, row 5), segment 2 (pairs 2, 3, row 0)
    assert level.next.ids.tolist() == [1, 2]
    assert level.next.order.tolist() == [1, 4, 2, 3, 5]
    assert level.next.starts.tolist() == [0, 2]
    assert level.next.counts.tolist() == [2, 3]


def test_tree_level_of_no_segments_is_empty():
    nothing = torch.zeros(0, dtype=torch.long)
    level = tree_level(SegmentLayout(nothing, nothing, nothing, nothing))
    assert all(t.numel() == 0 for t in (*level[:5], *level.next))


@pytest.mark.parametrize("chunk_size", [None, 3])
def test_reduce_equals_the_recursive_definition(chunk_size):
    degrees = [0, 1, 2, 3, 5, 8, 13, 0, 6]
    index = random_index(degrees)
    x = torch.randn(index.numel(), 4, dtype=torch.double)
    out = balanced_tree_reduce(x, not_associative, index, dim_size=11, chunk_size=chunk_size)
    assert out.shape == (11, 4)
    for node in range(11):
        rows = list(x[index == node])  # a segment keeps the order of its rows in x
        expected = recursive_tree(rows) if rows else torch.zeros(4, dtype=torch.double)
        assert torch.equal(out[node], expected), node

    order = torch.argsort(index, stable=True)
    ptr = torch.tensor([0, *torch.tensor(degrees + [0, 0]).cumsum(0).tolist()])
    assert torch.equal(balanced_tree_reduce(x[order], not_associative, ptr=ptr), out)
    # ptr takes precedence over index, as in PyG
    assert torch.equal(balanced_tree_reduce(x[order], not_associative, index, ptr), out)


def test_one_call_per_level_and_one_application_per_merge():
    calls = []

    def counting_max(a, b):
        calls.append(a.size(0))
        return torch.maximum(a, b)

    degrees = torch.tensor([0, 1, 2, 3, 5, 37, 64, 9])
    index = random_index(degrees)
    x = torch.randn(index.numel(), 4)
    out = balanced_tree_reduce(x, counting_max, index, dim_size=8)
    assert torch.equal(out, scatter(x, index, 0, 8, reduce="max"))
    assert len(calls) == math.ceil(math.log2(int(degrees.max())))
    assert sum(calls) == int((degrees - 1).clamp(min=0).sum())


def linear_operator(weight):
    def combine(a, b):
        return torch.tanh(a @ weight + b @ weight.t())
    return combine


@pytest.mark.parametrize("chunk_size", [None, 2])
def test_gradcheck(chunk_size):
    index = torch.tensor([4, 0, 0, 2, 0, 2, 0, 0, 2, 3])  # degrees 6, 0, 3, 1, 1
    x = torch.randn(10, 3, dtype=torch.double, requires_grad=True)
    weight = torch.randn(3, 3, dtype=torch.double, requires_grad=True)
    empty_value = torch.randn(3, dtype=torch.double, requires_grad=True)

    def reduce(x, weight, empty_value):
        return balanced_tree_reduce(x, linear_operator(weight), index, dim_size=6,
                                    empty_value=empty_value, chunk_size=chunk_size,
                                    parameters=[weight])

    assert torch.autograd.gradcheck(reduce, (x, weight, empty_value), eps=1e-6, atol=1e-5)


def test_chunked_recomputation_equals_plain_autograd():
    index = random_index(torch.randint(0, 30, (20,), generator=torch.Generator().manual_seed(1)))
    x = torch.randn(index.numel(), 5, requires_grad=True)
    weight = torch.randn(5, 5, requires_grad=True)
    results = []
    for chunk_size in (None, 7):
        out = balanced_tree_reduce(x, linear_operator(weight), index, dim_size=20,
                                   chunk_size=chunk_size, parameters=[weight])
        results.append((out, *torch.autograd.grad(out.square().sum(), [x, weight])))
        with torch.no_grad():  # inference runs the chunks without a graph
            assert torch.equal(balanced_tree_reduce(x, linear_operator(weight), index,
                                                    dim_size=20, chunk_size=chunk_size), out)
    for plain, chunked in zip(*results, strict=True):
        torch.testing.assert_close(chunked, plain, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("chunk_size", [None, 2])
def test_leaf_gradcheck_to_inputs_and_leaf_parameters(chunk_size):
    index = torch.tensor([4, 0, 0, 2, 0, 2, 0, 0, 2, 3])  # degrees 6, 0, 3, 1, 1
    x = torch.randn(10, 2, dtype=torch.double, requires_grad=True)
    projection = torch.randn(2, 3, dtype=torch.double, requires_grad=True)
    weight = torch.randn(3, 3, dtype=torch.double, requires_grad=True)

    def reduce(x, projection, weight):
        return balanced_tree_reduce(x, linear_operator(weight), index, dim_size=6,
                                    chunk_size=chunk_size, parameters=[weight, projection],
                                    leaf=lambda rows: torch.sin(rows @ projection))

    assert torch.autograd.gradcheck(reduce, (x, projection, weight), eps=1e-6, atol=1e-5)


def test_leaf_inside_a_chunked_first_level_equals_mapping_first():
    index = random_index(torch.randint(0, 30, (20,), generator=torch.Generator().manual_seed(2)))
    x = torch.randn(index.numel(), 3, dtype=torch.double, requires_grad=True)
    projection = torch.randn(3, 5, dtype=torch.double, requires_grad=True)
    weight = torch.randn(5, 5, dtype=torch.double, requires_grad=True)
    parameters = [weight, projection]
    mapped_first = balanced_tree_reduce(torch.tanh(x @ projection), linear_operator(weight),
                                        index, dim_size=20, chunk_size=7, parameters=parameters)
    fused = balanced_tree_reduce(x, linear_operator(weight), index, dim_size=20, chunk_size=7,
                                 parameters=parameters, leaf=lambda rows: torch.tanh(rows @ projection))
    assert fused.shape == (20, 5)
    for expected, got in zip(*(torch.autograd.grad(out.square().sum(), [x, *parameters])
                               for out in (mapped_first, fused)), strict=True):
        torch.testing.assert_close(got, expected)
    torch.testing.assert_close(fused, mapped_first)


def test_reduce_errors_name_the_argument():
    x, index = torch.randn(3, 4), torch.tensor([0, 1, 1])
    with pytest.raises(ValueError, match="`x`"):
        balanced_tree_reduce(torch.randn(3), torch.maximum, index)
    with pytest.raises(TypeError, match="`combine`"):
        balanced_tree_reduce(x, "max", index)
    with pytest.raises(ValueError, match="One of `index` or `ptr`"):
        balanced_tree_reduce(x, torch.maximum)
    with pytest.raises(ValueError, match="`index`"):
        balanced_tree_reduce(x, torch.maximum, torch.tensor([0, 1, 5]), dim_size=2)
    with pytest.raises(ValueError, match="`ptr`"):
        balanced_tree_reduce(x, torch.maximum, ptr=torch.tensor([0, 2, 1, 3]))
    with pytest.raises(ValueError, match="`dim_size`"):
        balanced_tree_reduce(x, torch.maximum, ptr=torch.tensor([0, 2, 3]), dim_size=3)
    with pytest.raises(ValueError, match="`chunk_size`"):
        balanced_tree_reduce(x, torch.maximum, index, chunk_size=0)
    with pytest.raises(ValueError, match="`empty_value`"):
        balanced_tree_reduce(x, torch.maximum, index, empty_value=torch.zeros(5))
    with pytest.raises(ValueError, match="`empty_value`"):
        balanced_tree_reduce(x, torch.maximum, index, empty_value=torch.zeros(4, dtype=torch.double))
    with pytest.raises(TypeError, match="`leaf`"):
        balanced_tree_reduce(x, torch.maximum, index, leaf="relu")
    with pytest.raises(ValueError, match="`empty_value` must be \\[2\\]"):
        balanced_tree_reduce(x, torch.maximum, index, empty_value=torch.zeros(4),
                             leaf=lambda rows: rows[:, :2])


def test_tree_level_errors_name_the_field():
    ids = torch.tensor([0, 1])
    with pytest.raises(TypeError, match="`layout.order`"):
        tree_level(SegmentLayout(ids, torch.arange(4.0), torch.tensor([0, 2]), torch.tensor([2, 2])))
    with pytest.raises(ValueError, match="one entry per segment"):
        tree_level(SegmentLayout(ids, torch.arange(4), torch.tensor([0]), torch.tensor([2, 2])))
    with pytest.raises(ValueError, match="`layout.counts` must be at least 2"):
        tree_level(SegmentLayout(ids, torch.arange(4), torch.tensor([0, 2]), torch.tensor([2, 1])))
    with pytest.raises(ValueError, match="within the 4 entries"):
        tree_level(SegmentLayout(ids, torch.arange(4), torch.tensor([0, 2]), torch.tensor([2, 3])))
