import pytest
import torch
from torch_geometric.utils import scatter as pyg_scatter

from pyg_agg.ops import HAS_TORCH_SCATTER, scatter, segment, use_backend
from pyg_agg.ops.segment import index_to_ptr

REDUCES = ["sum", "mean", "min", "max"]
BACKENDS = [
    "torch",
    pytest.param(
        "torch_scatter",
        marks=pytest.mark.skipif(
            not HAS_TORCH_SCATTER,
            reason="torch_scatter not importable: install the 'fast' extra to test it",
        ),
    ),
]


def _reference(src, index, n, reduce, fill=0.0):
    """Loop-based reference, independent of any scatter kernel."""
    out = torch.full((n,) + src.shape[1:], fill, dtype=src.dtype)
    for i in range(n):
        rows = src[index == i]
        if rows.numel() == 0:
            continue
        out[i] = {
            "sum": rows.sum(0), "mean": rows.mean(0),
            "min": rows.min(0).values, "max": rows.max(0).values,
        }[reduce]
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("reduce", REDUCES)
def test_scatter_matches_loop_reference_with_empty_segments(backend, reduce):
    src = torch.randn(40, 5, dtype=torch.float64)
    index = torch.randint(0, 12, (40,))
    index[index == 3] = 4  # guarantee an empty segment in the middle
    with use_backend(backend):
        out = scatter(src, index, dim_size=15, reduce=reduce)
    expected = _reference(src, index, 15, reduce)
    torch.testing.assert_close(out, expected)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("reduce", REDUCES)
def test_fill_value_applies_only_to_empty_segments(backend, reduce):
    src = torch.randn(10, 3)
    index = torch.tensor([0, 0, 2, 2, 2, 5, 5, 5, 5, 0])
    with use_backend(backend):
        out = scatter(src, index, dim_size=7, reduce=reduce, fill_value=-2.5)
    torch.testing.assert_close(out, _reference(src, index, 7, reduce, fill=-2.5))


@pytest.mark.parametrize("reduce", REDUCES)
def test_matches_pyg_scatter(reduce):
    src = torch.randn(200, 8)
    index = torch.randint(0, 50, (200,))
    torch.testing.assert_close(
        scatter(src, index, dim_size=60, reduce=reduce),
        pyg_scatter(src, index, dim_size=60, reduce=reduce),
    )


def test_product_matches_pyg_and_has_a_gradient():
    src = torch.rand(40, 3, dtype=torch.float64) + 0.5
    index = torch.randint(0, 12, (40,))  # some of the 15 slots stay empty: product 1
    torch.testing.assert_close(scatter(src, index, dim_size=15, reduce="mul", fill_value=1.0),
                               pyg_scatter(src, index, dim_size=15, reduce="mul"))
    out = scatter(src, index, dim_size=15, reduce="mul", fill_value=-3.0)
    assert torch.all(out[torch.bincount(index, minlength=15) == 0] == -3.0)
    assert torch.autograd.gradcheck(lambda s: scatter(s, index, dim_size=15, reduce="mul"),
                                    (src.requires_grad_(),))


@pytest.mark.parametrize("reduce", REDUCES)
def test_scatter_along_inner_dim(reduce):
    src = torch.randn(3, 20, 4, dtype=torch.float64)
    index = torch.randint(0, 6, (20,))
    out = scatter(src, index, dim=1, dim_size=7, reduce=reduce)
    assert out.shape == (3, 7, 4)
    for b in range(3):
        torch.testing.assert_close(out[b], _reference(src[b], index, 7, reduce))


@pytest.mark.skipif(not HAS_TORCH_SCATTER, reason="torch_scatter not importable: install the 'fast' extra")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("reduce", REDUCES)
def test_backends_agree_on_random_inputs(dtype, reduce):
    src = torch.randn(500, 16).to(dtype)
    index = torch.randint(0, 90, (500,))  # unsorted, and slots 90..99 are empty
    with use_backend("torch"):
        a = scatter(src, index, dim_size=100, reduce=reduce)
    with use_backend("torch_scatter"):
        b = scatter(src, index, dim_size=100, reduce=reduce)
    tol = {torch.float16: 1e-2, torch.bfloat16: 5e-2}.get(dtype)
    torch.testing.assert_close(a, b, atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("reduce", REDUCES)
def test_low_precision_close_to_float32(dtype, reduce):
    src = torch.randn(300, 8)
    index = torch.randint(0, 40, (300,))
    low = scatter(src.to(dtype), index, dim_size=45, reduce=reduce)
    assert low.dtype == dtype
    torch.testing.assert_close(
        low.float(), scatter(src, index, dim_size=45, reduce=reduce), atol=5e-2, rtol=5e-2
    )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("reduce", REDUCES)
def test_gradcheck_float64(backend, reduce):
    # distinct values: min/max gradients are only defined without ties
    src = torch.randperm(36).double().view(12, 3).requires_grad_()
    index = torch.tensor([0, 1, 1, 3, 3, 3, 0, 1, 4, 4, 0, 3])
    with use_backend(backend):
        assert torch.autograd.gradcheck(
            lambda s: scatter(s, index, dim_size=6, reduce=reduce), (src,)
        )


def test_max_ties_split_gradient_evenly_on_torch_backend():
    src = torch.tensor([[1.0], [1.0], [0.0]], requires_grad=True)
    with use_backend("torch"):
        scatter(src, torch.tensor([0, 0, 0]), dim_size=1, reduce="max").sum().backward()
    torch.testing.assert_close(src.grad, torch.tensor([[0.5], [0.5], [0.0]]))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("reduce", REDUCES)
def test_segment_equals_scatter_on_sorted_index(backend, reduce):
    index = torch.randint(0, 20, (120,)).sort().values
    src = torch.randn(120, 6, dtype=torch.float64)
    ptr = index_to_ptr(index, 25)  # trailing empty segments
    with use_backend(backend):
        out = segment(src, ptr, reduce=reduce, fill_value=1.5)
    torch.testing.assert_close(out, _reference(src, index, 25, reduce, fill=1.5))


@pytest.mark.parametrize("reduce", REDUCES)
def test_segment_gradcheck_with_empty_segment(reduce):
    src = torch.randperm(18).double().view(6, 3).requires_grad_()
    ptr = torch.tensor([0, 2, 2, 6])
    assert torch.autograd.gradcheck(lambda s: segment(s, ptr, reduce=reduce), (src,))


def test_empty_input_gives_filled_output():
    out = scatter(torch.empty(0, 4), torch.empty(0, dtype=torch.long), dim_size=3, reduce="max")
    assert out.shape == (3, 4) and (out == 0).all()
    assert scatter(torch.empty(0, 4), torch.empty(0, dtype=torch.long)).shape == (0, 4)


def test_int32_index_accepted():
    src = torch.randn(5, 2)
    idx = torch.tensor([0, 1, 1, 2, 2], dtype=torch.int32)
    torch.testing.assert_close(scatter(src, idx, reduce="max"), scatter(src, idx.long(), reduce="max"))


@pytest.mark.parametrize("reduce", ["min", "max"])
def test_extreme_equal_to_fill_keeps_full_gradient(reduce):
    # torch's own scatter_reduce backward splits the gradient with the
    # initial fill value here (a max over ReLU outputs that are all 0)
    src = torch.tensor([[0.0], [-1.0 if reduce == "max" else 1.0]], requires_grad=True)
    with use_backend("torch"):
        scatter(src, torch.tensor([0, 0]), dim_size=1, reduce=reduce).sum().backward()
    torch.testing.assert_close(src.grad, torch.tensor([[1.0], [0.0]]))
