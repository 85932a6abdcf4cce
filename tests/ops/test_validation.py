import pytest
import torch

from pyg_agg.ops import multi_aggregate, scatter, scatter_softmax, segment, use_backend


def test_float_index_rejected():
    with pytest.raises(TypeError, match="`index` must be an integer tensor"):
        scatter(torch.randn(3, 2), torch.tensor([0.0, 1.0, 1.0]))


def test_index_of_wrong_length():
    with pytest.raises(ValueError, match="`index` has 2 entries but `src` has 3 rows"):
        scatter(torch.randn(3, 2), torch.tensor([0, 1]))


def test_index_of_wrong_rank():
    with pytest.raises(ValueError, match="one-dimensional"):
        scatter(torch.randn(3, 2), torch.tensor([[0, 1, 1]]))


def test_negative_index():
    with pytest.raises(ValueError, match="negative"):
        scatter(torch.randn(3, 2), torch.tensor([0, -1, 1]))


def test_index_out_of_range():
    with pytest.raises(ValueError, match=r"contains 5, out of range for dim_size=4"):
        multi_aggregate(torch.randn(3, 2), torch.tensor([0, 5, 1]), dim_size=4)


def test_device_mismatch():
    if not torch.cuda.is_available():
        pytest.skip("needs a second device type (CUDA) to mismatch against")
    with pytest.raises(RuntimeError, match="same device"):
        scatter(torch.randn(3, 2, device="cuda"), torch.tensor([0, 1, 1]))


def test_meta_device_mismatch_reported():
    # the meta device exercises the same check without a GPU
    with pytest.raises(RuntimeError, match="`index` is on meta but `src` is on cpu"):
        scatter(torch.randn(3, 2), torch.tensor([0, 1, 1], device="meta"))


def test_unknown_reduce_and_backend():
    with pytest.raises(ValueError, match="`reduce` must be one of"):
        scatter(torch.randn(3, 2), torch.tensor([0, 1, 1]), reduce="median")
    with pytest.raises(ValueError, match="Unknown backend"):
        with use_backend("cuda_magic"):
            pass


def test_bad_ptr():
    with pytest.raises(ValueError, match="must start at 0 and end at"):
        segment(torch.randn(4, 2), torch.tensor([0, 2, 3]))
    with pytest.raises(ValueError, match="non-decreasing"):
        segment(torch.randn(4, 2), torch.tensor([0, 3, 2, 4]))


def test_unknown_statistic():
    with pytest.raises(ValueError, match="`stats` must name some of"):
        multi_aggregate(torch.randn(3, 2), torch.tensor([0, 1, 1]), stats=["median"])
    with pytest.raises(ValueError, match="`stats` must name some of"):
        multi_aggregate(torch.randn(3, 2), torch.tensor([0, 1, 1]), stats=[])


def test_one_statistic_may_be_a_string():
    out = multi_aggregate(torch.randn(3, 2), torch.tensor([0, 1, 1]), stats="sum")
    assert list(out) == ["sum"]


@pytest.mark.parametrize("eps", [-1e-5, float("nan"), float("inf")])
def test_eps_must_be_finite_and_non_negative(eps):
    with pytest.raises(ValueError, match="`eps` must be a finite number >= 0"):
        multi_aggregate(torch.randn(3, 2), torch.tensor([0, 1, 1]), stats="std", eps=eps)


def test_multi_aggregate_rejects_zero_dim_and_integer_src():
    with pytest.raises(ValueError, match="`src` must have at least one dimension"):
        multi_aggregate(torch.tensor(1.0), torch.tensor([0]))
    with pytest.raises(TypeError, match="`src` must be a floating-point tensor"):
        multi_aggregate(torch.ones(3, 2, dtype=torch.long), torch.tensor([0, 1, 1]))


def test_softmax_index_checked():
    with pytest.raises(ValueError, match="dim_size=2"):
        scatter_softmax(torch.randn(3), torch.tensor([0, 1, 2]), dim_size=2)


@pytest.fixture
def range_checks(monkeypatch):
    """Counts the index range checks (one ``torch.aminmax`` pass each)."""
    calls = []
    aminmax = torch.aminmax

    def counting(*args, **kwargs):
        calls.append(1)
        return aminmax(*args, **kwargs)

    monkeypatch.setattr(torch, "aminmax", counting)
    return calls


@pytest.mark.parametrize("backend", ["torch", "torch_scatter"])
def test_composite_kernels_check_the_index_once(range_checks, backend):
    if backend == "torch_scatter":
        pytest.importorskip("torch_scatter")
    src, index = torch.randn(6, 3), torch.tensor([0, 2, 2, 1, 0, 2])
    with use_backend(backend):
        multi_aggregate(src, index, 3, stats=("mean", "std", "min", "max"))
        assert len(range_checks) == 1
        scatter_softmax(src, index.clone(), 3)
        assert len(range_checks) == 2
        segment(src, torch.tensor([0, 2, 2, 6]), reduce="max")
        assert len(range_checks) == 2  # a ptr is checked without a range pass


def test_an_index_is_scanned_once_until_it_is_written(range_checks):
    src, edge_index = torch.randn(4, 3), torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]])
    for _ in range(3):  # every layer, every epoch: one scan per row of the graph
        multi_aggregate(src, edge_index[1], 4, stats=("sum",))
        multi_aggregate(src, edge_index[0], 4, stats=("sum",))
    assert len(range_checks) == 2
    edge_index[1, 0] = 4  # an in-place write bumps the version: scanned again, and caught
    with pytest.raises(ValueError, match="contains 4, out of range for dim_size=4"):
        multi_aggregate(src, edge_index[1], 4, stats=("sum",))
    assert len(range_checks) == 3


def test_a_ptr_is_checked_once_until_it_is_written():
    src, ptr = torch.randn(4, 3), torch.tensor([0, 2, 4])
    segment(src, ptr, reduce="sum")
    ptr[1] = 5
    with pytest.raises(ValueError, match="non-decreasing"):
        segment(src, ptr, reduce="sum")


def test_scatter_of_zero_dim_src_names_the_argument():
    from pyg_agg.ops import scatter

    with pytest.raises(ValueError, match="`src` must be a tensor with at least one dimension"):
        scatter(torch.tensor(1.0), torch.tensor([0]))
