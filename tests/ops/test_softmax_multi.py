import math

import pytest
import torch
from torch_geometric.nn import aggr
from torch_geometric.utils import softmax as pyg_softmax

from pyg_agg.ops import HAS_NATIVE, HAS_TORCH_SCATTER, multi_aggregate, scatter_softmax, use_backend


def test_softmax_matches_pyg_and_sums_to_one():
    src = torch.randn(50, 4)
    index = torch.randint(0, 10, (50,))
    out = scatter_softmax(src, index, dim_size=12)
    torch.testing.assert_close(out, pyg_softmax(src, index, num_nodes=12))
    sums = torch.zeros(12, 4).index_add_(0, index, out)
    present = torch.bincount(index, minlength=12) > 0
    torch.testing.assert_close(sums[present], torch.ones(int(present.sum()), 4))


def test_softmax_stable_for_huge_scores():
    src = torch.tensor([1000.0, 1001.0, -1000.0, 5.0])
    out = scatter_softmax(src, torch.tensor([0, 0, 1, 1]))
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out[:2], torch.softmax(src[:2], 0))


def test_softmax_gradcheck():
    src = torch.randn(9, 2, dtype=torch.float64, requires_grad=True)
    index = torch.tensor([0, 0, 1, 2, 2, 2, 1, 0, 4])
    assert torch.autograd.gradcheck(lambda s: scatter_softmax(s, index, dim_size=5), (src,))


def _pyg_stats(src, index, n):
    return {
        "sum": aggr.SumAggregation()(src, index, dim_size=n),
        "mean": aggr.MeanAggregation()(src, index, dim_size=n),
        "var": aggr.VarAggregation()(src, index, dim_size=n),
        "std": aggr.StdAggregation()(src, index, dim_size=n),
        "min": aggr.MinAggregation()(src, index, dim_size=n),
        "max": aggr.MaxAggregation()(src, index, dim_size=n),
    }


@pytest.mark.parametrize(
    "backend",
    ["torch",
     pytest.param("native", marks=pytest.mark.skipif(not HAS_NATIVE, reason="the native CPU ops are not built")),
     pytest.param("torch_scatter", marks=pytest.mark.skipif(
         not HAS_TORCH_SCATTER, reason="torch_scatter not importable: install the 'fast' extra"))],
)
def test_multi_aggregate_matches_pyg_aggregations(backend):
    src = torch.randn(300, 7, dtype=torch.float64)
    index = torch.randint(0, 40, (300,))
    src[index == 7] = 0.25  # a constant neighbourhood: std must be exactly 0
    with use_backend(backend):
        out = multi_aggregate(src, index, dim_size=45, stats=("count", "sum", "mean", "var", "std", "min", "max"))
    expected = _pyg_stats(src, index, 45)
    for name, value in expected.items():
        torch.testing.assert_close(out[name], value, msg=name)
    torch.testing.assert_close(out["count"], torch.bincount(index, minlength=45))
    assert (out["std"][7] == 0).all()


def test_multi_aggregate_empty_segments_are_filled_never_inf():
    src = torch.randn(6, 3)
    index = torch.tensor([0, 0, 0, 3, 3, 3])
    out = multi_aggregate(src, index, dim_size=5, stats=("mean", "std", "var", "min", "max"), fill_value=-1.0)
    for name, value in out.items():
        assert torch.isfinite(value).all(), name
        assert (value[[1, 2, 4]] == -1.0).all(), name


def test_std_eps_mode_is_paper_formula():
    src = torch.randn(20, 2, dtype=torch.float64)
    index = torch.randint(0, 3, (20,))
    out = multi_aggregate(src, index, 3, stats=("var", "std"), std_mode="eps", eps=1e-5)
    torch.testing.assert_close(out["std"], (out["var"].relu() + 1e-5).sqrt())


@pytest.mark.parametrize("stat", ["sum", "mean", "var", "min", "max"])
def test_multi_aggregate_gradcheck(stat):
    src = (torch.randperm(30).double().view(10, 3) / 7).requires_grad_()
    index = torch.tensor([0, 0, 1, 1, 1, 3, 3, 0, 1, 3])
    assert torch.autograd.gradcheck(lambda s: multi_aggregate(s, index, 5, stats=(stat,))[stat], (src,))


def test_multi_aggregate_std_gradcheck_away_from_clamp():
    src = (torch.randperm(30).double().view(10, 3)).requires_grad_()
    index = torch.tensor([0, 0, 1, 1, 1, 3, 3, 0, 1, 3])
    for mode in ("pyg", "eps"):
        assert torch.autograd.gradcheck(
            lambda s, m=mode: multi_aggregate(s, index, 5, stats=("std",), std_mode=m)["std"], (src,)
        )


def test_std_of_constant_neighbourhood_has_zero_grad():
    src = torch.full((4, 2), 3.0, requires_grad=True)
    std = multi_aggregate(src, torch.zeros(4, dtype=torch.long), 1, stats=("std",))["std"]
    std.sum().backward()
    assert std.abs().max() == 0 and src.grad.abs().max() == 0 and not math.isnan(src.grad.sum())


def test_softmax_of_an_all_minus_inf_group_is_zero_with_zero_grad():
    src = torch.tensor([0.5, float("-inf"), float("-inf"), 1.0], requires_grad=True)
    index = torch.tensor([0, 1, 1, 0])
    out = scatter_softmax(src, index, 2)
    assert out.isfinite().all() and out[1:3].eq(0).all()
    torch.testing.assert_close(out[[0, 3]].sum(), torch.tensor(1.0))
    out.pow(2).sum().backward()
    assert src.grad.isfinite().all() and src.grad[1:3].eq(0).all()
