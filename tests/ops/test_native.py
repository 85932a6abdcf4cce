"""The native multi-statistic op against the torch reference and PyG."""
import os
import re
import subprocess
import sys

import pytest
import torch
from torch_geometric.nn import aggr as pyg_aggr

from pyg_agg.ops import (
    HAS_NATIVE,
    HAS_TRITON,
    index_to_ptr,
    multi_aggregate,
    segment_statistics,
    stacked_multi_aggregate,
    stacked_statistics,
    use_backend,
)

pytestmark = pytest.mark.skipif(not HAS_NATIVE, reason="native ops not built (see the import warning)")

STATS = ("count", "sum", "mean", "sumsq", "var", "std", "min", "max")
PYG = {"sum": pyg_aggr.SumAggregation(), "mean": pyg_aggr.MeanAggregation(),
       "min": pyg_aggr.MinAggregation(), "max": pyg_aggr.MaxAggregation(),
       "var": pyg_aggr.VarAggregation(), "std": pyg_aggr.StdAggregation()}
TOLERANCE = {torch.float64: 1e-10, torch.float32: 1e-4, torch.bfloat16: 3e-2}


def hard_graph(num_nodes=60, num_edges=600, hub_degree=0, seed=0):
    """An unsorted index with duplicate targets, empty rows (nodes 7 and the last
    ones) and optionally one hub."""
    gen = torch.Generator().manual_seed(seed)
    index = torch.randint(0, num_nodes - 3, (num_edges,), generator=gen)
    index[index == 7] = 8
    if hub_degree:
        index = torch.cat([index, torch.full((hub_degree,), 5)])[torch.randperm(num_edges + hub_degree,
                                                                               generator=gen)]
    return index


def both_backends(src, index, n, stats=STATS, weights=None):
    """Outputs and input gradient of multi_aggregate on "native" and "torch"."""
    results = {}
    for backend in ("native", "torch"):
        x = src.detach().clone().requires_grad_()
        with use_backend(backend):
            out = multi_aggregate(x, index, n, stats=stats)
        loss = sum((v.double() * (i + 1)).sum() for i, (k, v) in enumerate(out.items()) if k != "count")
        loss.backward()
        results[backend] = (out, x.grad)
    return results


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("hub_degree", [0, 10_000])
def test_native_equals_reference_and_pyg(dtype, hub_degree):
    index = hard_graph(hub_degree=hub_degree)
    src = torch.randn(index.numel(), 5).to(dtype)
    results = both_backends(src, index, 60)
    (native, grad_native), (ref, grad_ref) = results["native"], results["torch"]
    tol = TOLERANCE[dtype] * (10 if hub_degree and dtype == torch.bfloat16 else 1)
    for name in STATS:
        torch.testing.assert_close(native[name], ref[name], atol=tol * 10, rtol=tol, msg=name)
        if name in PYG and dtype != torch.bfloat16:  # PyG's var cancels in low precision
            torch.testing.assert_close(native[name], PYG[name](src, index, dim_size=60),
                                       atol=tol * 10, rtol=tol, msg=name)
    torch.testing.assert_close(grad_native, grad_ref, atol=tol * 10, rtol=tol)


def test_tied_extremes_split_the_gradient_like_pyg():
    index = torch.tensor([0, 0, 0, 1, 1])
    src = torch.tensor([[1.0], [3.0], [3.0], [2.0], [2.0]])
    grads = []
    for run in ("native", "pyg"):
        x = src.clone().requires_grad_()
        if run == "native":
            with use_backend("native"):
                out = multi_aggregate(x, index, 2, stats=("max",))["max"]
        else:
            out = PYG["max"](x, index, dim_size=2)
        out.sum().backward()
        grads.append(x.grad)
    torch.testing.assert_close(grads[0], grads[1])
    torch.testing.assert_close(grads[0].flatten(), torch.tensor([0.0, 0.5, 0.5, 0.5, 0.5]))


@pytest.mark.parametrize("backend", ["native", "torch"])
def test_variance_is_stable_in_float32(backend):
    x = torch.tensor([[3000.0], [3001.0], [3002.0]])
    with use_backend(backend):
        out = multi_aggregate(x, torch.zeros(3, dtype=torch.long), 1, stats=("var", "std"))
    torch.testing.assert_close(out["std"], torch.tensor([[0.8165]]), atol=1e-4, rtol=0)
    torch.testing.assert_close(out["var"], torch.tensor([[2 / 3]]), atol=1e-4, rtol=0)


def gather_graph(seed=1):
    gen = torch.Generator().manual_seed(seed)
    num_nodes, num_sources, num_edges = 12, 9, 50
    target = torch.randint(0, num_nodes - 2, (num_edges,), generator=gen).sort().values
    col = torch.randint(0, num_sources, (num_edges,), generator=gen)
    return index_to_ptr(target, num_nodes), col, num_sources


@pytest.mark.parametrize("backend", ["native", "torch"])
@pytest.mark.parametrize("form", ["plain", "gather", "gather+edge_term", "permutation"])
def test_gradcheck_every_form(backend, form):
    ptr, col, num_sources = gather_graph()
    stats = ("sum", "mean", "sumsq", "var", "std", "min", "max")
    src = torch.randn(num_sources if "gather" in form else col.numel(), 3, dtype=torch.float64,
                      requires_grad=True)
    term = torch.randn(col.numel(), 3, dtype=torch.float64, requires_grad=True)
    index = torch.randint(0, 10, (col.numel(),))

    def run(x, t):
        if form == "permutation":  # multi_aggregate over an unsorted index
            out = multi_aggregate(x, index, 12, stats=stats)
        else:
            out = segment_statistics(x, ptr, col if "gather" in form else None,
                                     t if "edge_term" in form else None, stats=stats)
        return tuple(out[s] for s in stats)

    with use_backend(backend):
        assert torch.autograd.gradcheck(run, (src, term))


@pytest.mark.parametrize("edges_per_row", [2, 12])
@pytest.mark.parametrize("stats", [("sum",), ("mean", "std", "min", "max")])
def test_gather_backward_through_either_intermediate_equals_the_messages_backward(edges_per_row, stats):
    from pyg_agg.ops.native import _edge_gradients_are_smaller

    gen = torch.Generator().manual_seed(edges_per_row)
    rows, num_sources = 30, 25
    target = torch.randint(0, rows, (rows * edges_per_row,), generator=gen).sort().values
    ptr, col = index_to_ptr(target, rows), torch.randint(0, num_sources, target.shape, generator=gen)
    # the per-edge gradients are held where they are smaller than the per-row table
    g, none = torch.ones(1), None
    grads = [g, g if "std" in stats else none, g if "min" in stats else none, none]
    assert _edge_gradients_are_smaller(ptr, col, grads) == (edges_per_row == 2 and "std" in stats)
    src = torch.randn(num_sources, 5, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(rows, 5, dtype=torch.float64)
    results = []
    with use_backend("native"):
        for values in (src, src[col]):
            out = segment_statistics(values, ptr, col if values is src else None, stats=stats)
            loss = sum((out[name] * weight * (k + 1)).sum() for k, name in enumerate(stats))
            results.append(torch.autograd.grad(loss, src)[0])
    torch.testing.assert_close(*results)


@pytest.mark.parametrize("with_term", [False, True])
def test_gather_form_equals_materialised_messages(with_term):
    ptr, col, num_sources = gather_graph()
    src = torch.randn(num_sources, 4)
    term = torch.randn(col.numel(), 4) if with_term else None
    messages = src[col] + (term if with_term else 0)
    with use_backend("native"):
        gathered = segment_statistics(src, ptr, col, term, stats=STATS)
        plain = segment_statistics(messages, ptr, stats=STATS)
    for name in STATS:
        torch.testing.assert_close(gathered[name], plain[name], msg=name)


def test_native_results_are_bitwise_deterministic():
    index = hard_graph(num_edges=20_000, hub_degree=10_000)
    src = torch.randn(index.numel(), 16)
    runs = [both_backends(src, index, 60)["native"] for _ in range(3)]
    for out, grad in runs[1:]:
        for name in STATS:
            assert torch.equal(out[name], runs[0][0][name]), name
        assert torch.equal(grad, runs[0][1])


def test_native_results_are_the_same_for_every_thread_count():
    # Rows are independent, so how the rows are split between threads (at
    # equal edges + rows, csr_parallel.h; the hub at row 5 moves the split)
    # must not change a bit, forward or backward.
    index = hard_graph(num_edges=20_000, hub_degree=10_000)
    src = torch.randn(index.numel(), 16)
    previous = torch.get_num_threads()
    try:
        runs = []
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            runs.append(both_backends(src, index, 60)["native"])
    finally:
        torch.set_num_threads(previous)
    for out, grad in runs[1:]:
        for name in STATS:
            assert torch.equal(out[name], runs[0][0][name]), name
        assert torch.equal(grad, runs[0][1])


@pytest.mark.parametrize("form", ["plain", "gather+edge_term"])
def test_register_blocked_float_kernels_equal_the_generic_ones_bit_for_bit(form):
    # float rows of a multiple of 16 channels take the register-blocked
    # kernels (segment_stats.cpp); one channel more takes the generic ones.
    # Channels are independent, so the first 32 of 33 must match 32 exactly:
    # ties, NaNs, empty rows, and a hub longer than many edge tiles.
    index = hard_graph(num_edges=3_000, hub_degree=1_000)
    ptr, order = index_to_ptr(index.sort().values, 60), torch.argsort(index, stable=True)
    gen = torch.Generator().manual_seed(3)
    wide = (torch.randn(index.numel(), 33, generator=gen) * 4).round() / 4  # many ties
    wide[::37, ::5] = float("nan")
    term = (torch.randn(index.numel(), 33, generator=gen) * 2).round() / 2
    grads = [torch.randn(60, 33, generator=gen) for _ in range(4)]
    ops = torch.ops.pyg_agg

    def run(width):
        src, col, edge_term = wide[:, :width].contiguous(), None, None
        if form == "gather+edge_term":
            src, col, edge_term = src[:500].contiguous(), order % 500, term[:, :width].contiguous()
        out = ops.segment_stats(src, ptr, col if col is not None else order, edge_term,
                                col is None, True, True, True)
        total, _, low, high, ties_lo, ties_hi = out
        g = [t[:, :width].contiguous() for t in grads]
        backward = ops.segment_stats_backward(*g, src, ptr, col if col is not None else order,
                                              edge_term, total, low, high, ties_lo, ties_hi, None)
        return [*out, backward]

    for blocked, generic in zip(run(32), run(33), strict=True):
        generic = generic[:, :32]
        if blocked.is_floating_point():
            blocked, generic = blocked.view(torch.int32), generic.contiguous().view(torch.int32)
        assert torch.equal(blocked, generic)


def test_forward_without_a_gradient_skips_only_the_tie_counts():
    import pyg_agg.ops.native as native

    index = hard_graph(num_edges=2_000, hub_degree=500)
    src = torch.randn(index.numel(), 9)
    src[3] = src[5]  # ties
    ptr, order = index_to_ptr(index.sort().values, 60), torch.argsort(index, stable=True)
    with_ties = native.segment_stats(src, ptr, order, None, True, True, True, True)
    without = native.segment_stats(src, ptr, order, None, True, True, True, False)
    for a, b in zip(with_ties[:4], without[:4], strict=True):
        assert torch.equal(a, b)
    assert without[4].numel() == 0 and without[5].numel() == 0
    assert not native.needs_ties(src) and native.needs_ties(src.requires_grad_())
    with torch.no_grad():
        assert not native.needs_ties(src)
    with pytest.raises(RuntimeError, match="needs the tie counts"):
        torch.ops.pyg_agg.segment_stats_backward(None, None, torch.ones_like(without[2]), None, src, ptr,
                                                 order, None, without[0], *without[2:], None)
    # the values without ties, with a gradient afterwards, are the same values
    out = multi_aggregate(src, index, 60, stats=("min", "max"))
    with torch.no_grad():
        plain = multi_aggregate(src, index, 60, stats=("min", "max"))
    assert all(torch.equal(out[k], plain[k]) for k in out)


STACKS = [("mean", "min", "max", "std"), ("sum", "var", "std", "mean", "sum"), ("max",)]


@pytest.mark.parametrize("backend", ["native", "torch"])
@pytest.mark.parametrize("stats", STACKS)
@pytest.mark.parametrize("std_mode", ["pyg", "eps"])
@pytest.mark.parametrize("ordered", [False, True])
def test_stacked_statistics_gradcheck(backend, stats, std_mode, ordered):
    ptr, col, num_sources = gather_graph()  # rows 10 and 11 are empty
    src = torch.randn(num_sources, 3, dtype=torch.double, requires_grad=True)
    term = torch.randn(col.numel(), 3, dtype=torch.double, requires_grad=True)
    shift = torch.randn(ptr.numel() - 1, 3, dtype=torch.double, requires_grad=True)
    order = torch.randperm(ptr.numel() - 1, generator=torch.Generator().manual_seed(3)) if ordered else None

    def run(src, term, shift):
        return stacked_statistics(src, ptr, col, term, stats, shift, std_mode, row_order=order)[0]

    with use_backend(backend):
        assert torch.autograd.gradcheck(run, (src, term, shift))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("std_mode", ["pyg", "eps"])
def test_stacked_statistics_native_equals_reference_and_the_shifted_messages(dtype, std_mode):
    ptr, col, num_sources = gather_graph()
    stats = ("sum", "mean", "min", "max", "var", "std")
    src = torch.randn(num_sources, 5).to(dtype)
    shift = torch.randn(ptr.numel() - 1, 5).to(dtype)
    results = {}
    # the reference in float64 is the truth: in bfloat16 it rounds after every op
    for backend, as_type in (("native", dtype), ("torch", torch.float64)):
        x, s = (t.detach().to(as_type).requires_grad_() for t in (src, shift))
        with use_backend(backend):
            out, counts = stacked_statistics(x, ptr, col, None, stats, s, std_mode)
        out.double().square().sum().backward()
        results[backend] = (out, x.grad, s.grad)
    tolerance = TOLERANCE[dtype]
    # bfloat16 gradients are compared through the outputs only: its rounding makes
    # ties of min/max that float64 does not have, which move whole gradient shares
    compared = 1 if dtype == torch.bfloat16 else 3
    for native_value, reference in list(zip(*results.values(), strict=True))[:compared]:
        torch.testing.assert_close(native_value.double(), reference, atol=tolerance, rtol=tolerance)
    # the statistics of the shifted messages themselves (empty rows stay 0)
    row = torch.repeat_interleave(torch.arange(ptr.numel() - 1), counts)
    messages = src[col] + shift[row]
    with use_backend("torch"):
        plain = segment_statistics(messages, ptr, stats=stats, std_mode=std_mode)
    for slot, name in enumerate(stats):
        torch.testing.assert_close(results["native"][0][:, slot], plain[name], atol=4 * tolerance,
                                   rtol=4 * tolerance, msg=name)


@pytest.mark.parametrize("backend", ["native", "torch"])
def test_stacked_statistics_in_a_row_order_are_the_rows_reordered(backend):
    ptr, col, num_sources = gather_graph()
    order = torch.randperm(ptr.numel() - 1, generator=torch.Generator().manual_seed(5))
    src = torch.randn(num_sources, 4, requires_grad=True)
    shift = torch.randn(ptr.numel() - 1, 4, requires_grad=True)
    weight = torch.randn(ptr.numel() - 1, 4, 4)
    results = []
    with use_backend(backend):
        for row_order in (order, None):
            out, counts = stacked_statistics(src, ptr, col, None, STACKS[0], shift, row_order=row_order)
            out = out if row_order is not None else out[order]
            results.append((out, counts, *torch.autograd.grad((out * weight).sum(), [src, shift])))
    assert torch.equal(results[0][1], ptr.diff())  # the counts stay in row order
    for ordered, gathered in zip(*results, strict=True):
        torch.testing.assert_close(ordered, gathered)


@pytest.mark.parametrize("backend", ["native", "torch"])
def test_stacked_multi_aggregate_is_multi_aggregate_stacked(backend):
    index = hard_graph(num_nodes=12, num_edges=40)  # unsorted, duplicates, empty rows
    src = torch.randn(index.numel(), 2, 3, dtype=torch.float64, requires_grad=True)
    stats = ("sum", "var", "std", "mean", "min", "max", "mean")
    with use_backend(backend):
        stacked, counts = stacked_multi_aggregate(src, index, 12, stats)
        plain = multi_aggregate(src, index, 12, stats=("count", *dict.fromkeys(stats)))
        assert torch.autograd.gradcheck(lambda x: stacked_multi_aggregate(x, index, 12, stats)[0], (src,))
    assert stacked.shape == (12, len(stats), 2, 3) and torch.equal(counts, plain["count"])
    for slot, name in enumerate(stats):
        torch.testing.assert_close(stacked[:, slot], plain[name], msg=name)
    with pytest.raises(ValueError, match="`stats` must be a sequence of some of"):
        stacked_multi_aggregate(src, index, 12, stats=("mean", "count"))
    with pytest.raises(ValueError, match="`index` contains 8, out of range for dim_size=5"):
        stacked_multi_aggregate(src, index, 5)


@pytest.mark.parametrize("backend", ["native", "torch"])
def test_stacked_multi_aggregate_with_a_scaler_is_every_statistic_times_every_factor(backend):
    index = hard_graph(num_nodes=12, num_edges=40)  # unsorted, duplicates, empty rows
    src = torch.randn(index.numel(), 2, 3, dtype=torch.float64, requires_grad=True)
    norm = torch.rand(2, dtype=torch.float64, requires_grad=True)  # a trainable scaler
    stats = ("sum", "var", "std", "mean", "min", "max", "mean")

    def scaler(counts, norm=norm):
        degree = counts.to(torch.float64)
        return torch.stack([torch.ones_like(degree), (degree + 1).log() / norm[0],
                            norm[1] / degree.clamp(min=1)], dim=1)

    with use_backend(backend):
        scaled, counts = stacked_multi_aggregate(src, index, 12, stats, scaler=scaler)
        stacked, _ = stacked_multi_aggregate(src, index, 12, stats)
        assert torch.autograd.gradcheck(
            lambda x, n: stacked_multi_aggregate(x, index, 12, stats, scaler=lambda c: scaler(c, n))[0],
            (src, norm))
        for bad, got in ((lambda c: c, "shape (12,), dtype torch.int64"),
                         (lambda c: torch.ones(5, 2), "shape (5, 2)"), (lambda c: None, "NoneType")):
            with pytest.raises(ValueError, match=r"`scaler` must return .* \(12, S\).*got " + re.escape(got)):
                stacked_multi_aggregate(src, index, 12, stats, scaler=bad)
        with pytest.raises(TypeError, match="`scaler` must be a function of the counts.*got Tensor"):
            stacked_multi_aggregate(src, index, 12, stats, scaler=torch.ones(12, 2))
    assert scaled.shape == (12, 3, len(stats), 2, 3)
    torch.testing.assert_close(scaled, scaler(counts)[:, :, None, None, None] * stacked.unsqueeze(1))


def test_stacked_statistics_without_grad_and_in_a_compiled_graph():
    ptr, col, num_sources = gather_graph()
    src, shift = torch.randn(num_sources, 4), torch.randn(ptr.numel() - 1, 4)

    def run(src, shift):
        return stacked_statistics(src, ptr, col, None, ("mean", "std", "max"), shift)[0]

    with use_backend("native"):
        eager = run(src, shift)
        with torch.no_grad():
            assert torch.equal(run(src, shift), eager)
        torch._dynamo.reset()
        compiled = torch.compile(run, backend="aot_eager", fullgraph=True)
        torch.testing.assert_close(compiled(src, shift), eager)


def test_stacked_statistics_validates_its_inputs():
    ptr, col, num_sources = gather_graph()
    src = torch.randn(num_sources, 3)
    with pytest.raises(ValueError, match="`stats` must be a sequence of some of"):
        stacked_statistics(src, ptr, col, stats=("mean", "count"))
    with pytest.raises(ValueError, match="`stats` must be a sequence of some of"):
        stacked_statistics(src, ptr, col, stats="mean")
    with pytest.raises(ValueError, match="`shift` must have shape"):
        stacked_statistics(src, ptr, col, shift=torch.randn(3, 3))
    with pytest.raises(ValueError, match="`col` contains"):
        stacked_statistics(src, ptr, col + num_sources)
    rows = ptr.numel() - 1
    with pytest.raises(ValueError, match=r"`row_order` must hold each of 0\.\.11 exactly once"):
        stacked_statistics(src, ptr, col, row_order=torch.zeros(rows, dtype=torch.long))
    with pytest.raises(ValueError, match=r"`row_order` must have shape \(12,\)"):
        stacked_statistics(src, ptr, col, row_order=torch.arange(rows - 1))
    with pytest.raises(TypeError, match="`row_order` must be an integer"):
        stacked_statistics(src, ptr, col, row_order=torch.arange(rows).float())


def test_segment_statistics_validates_its_inputs():
    ptr, col, num_sources = gather_graph()
    src = torch.randn(num_sources, 3)
    with pytest.raises(ValueError, match="`col` contains"):
        segment_statistics(src, ptr, col + num_sources)
    with pytest.raises(ValueError, match="`edge_term` must have shape"):
        segment_statistics(src, ptr, col, torch.randn(3, 3))
    short = ptr.clone()
    short[-1] -= 1
    with pytest.raises(ValueError, match="`ptr` must start at 0 and end at"):
        segment_statistics(src, short, col)
    with pytest.raises(ValueError, match="`src` must be two-dimensional"):
        segment_statistics(src.flatten(), ptr)


def test_compiled_fullgraph_does_not_recompile_per_graph_size():
    graphs = []

    def counting_backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def stats(src, index, n: int):
        out = multi_aggregate(src, index, n, stats=("mean", "std", "min", "max"))
        return out["mean"] + out["std"] - out["max"] * out["min"]

    torch._dynamo.reset()
    compiled = torch.compile(stats, backend=counting_backend, fullgraph=True, dynamic=True)
    for size in range(10):
        num_edges, n = 50 + 37 * size, 10 + 3 * size
        src, index = torch.randn(num_edges, 4), torch.randint(0, n, (num_edges,))
        with use_backend("native"):
            torch.testing.assert_close(compiled(src, index, n), stats(src, index, n))
    assert len(graphs) <= 2


def test_compiled_backward_matches_eager():
    src = torch.randn(80, 4, requires_grad=True)
    index = torch.randint(0, 9, (80,))

    def loss(x):
        out = multi_aggregate(x, index, 9, stats=("sum", "std", "max"))
        return (out["sum"] * out["std"] + out["max"]).sum()

    torch._dynamo.reset()
    with use_backend("native"):
        eager = torch.autograd.grad(loss(src), src)[0]
        compiled = torch.autograd.grad(torch.compile(loss, backend="aot_eager", fullgraph=True)(src), src)[0]
    torch.testing.assert_close(compiled, eager)


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_triton_kernels_match_cpu_kernels_under_the_interpreter(triton_interpreter):
    assert triton_interpreter("""
        import torch
        import pyg_agg.ops.native as native
        from pyg_agg.ops.gpu import segment_stats as triton_kernels
        from pyg_agg.ops.gpu import stack_statistics as stack_kernels
        from pyg_agg.ops import index_to_ptr
        from pyg_agg.ops.graph import transpose_csr

        torch.manual_seed(0)
        for dtype in (torch.float32, torch.float64):
            n, m, e, f = 14, 11, 70, 37                  # f spans two channel blocks
            target = torch.randint(0, n - 2, (e,)).sort().values
            target[target == 4] = 5                      # an empty row inside
            ptr = index_to_ptr(target, n)
            col = torch.randint(0, m, (e,))
            src, term = torch.randn(m, f, dtype=dtype), torch.randn(e, f, dtype=dtype)
            src[col[1]] = src[col[0]]                    # ties
            for c, t in ((col, term), (col, None), (None, None)):
                x = src if c is not None else torch.randn(e, f, dtype=dtype)
                cpu = native.segment_stats(x, ptr, c, t)
                gpu = triton_kernels.segment_stats(x, ptr, c, t, False, True, True)
                for a, b in zip(cpu, gpu):
                    assert a.dtype == b.dtype and torch.allclose(a, b, atol=1e-5), (a - b).abs().max()
                grads = [torch.randn(n, f, dtype=dtype) for _ in range(4)]
                saved = (cpu[0], cpu[2], cpu[3], cpu[4], cpu[5])
                for g in (grads, [None, grads[1], None, grads[3]]):
                    a = torch.ops.pyg_agg.segment_stats_backward(*g, x, ptr, c, t, *saved, None)
                    b = triton_kernels.segment_stats_backward(*g, x, ptr, c, t, *saved, None)
                    assert torch.allclose(a, b, atol=1e-5), (a - b).abs().max()
                    if c is not None:
                        csc = transpose_csr(ptr, c, m)
                        a = torch.ops.pyg_agg.segment_stats_backward_gather(*g, x, ptr, c, t, *saved, *csc)
                        b = triton_kernels.segment_stats_backward_gather(*g, x, ptr, c, t, *saved, *csc)
                        assert torch.allclose(a, b, atol=1e-5), (a - b).abs().max()
            # the epilogue: every kind, repeats, with and without a shift, scaled, empty rows
            shift, none = torch.randn(n, f, dtype=dtype), src.new_empty(0)
            scales = torch.rand(n, 3, dtype=dtype)
            cpu = native.segment_stats(src, ptr, col, term)
            for kinds in ([1, 2, 3, 5], [0, 4, 5, 1, 0], [3]):
                prims = [cpu[0] if {0, 1} & set(kinds) else none, cpu[1] if {4, 5} & set(kinds) else none,
                         cpu[2] if 2 in kinds else none, cpu[3] if 3 in kinds else none]
                for sh, order, sc in ((shift, None, None), (None, None, None),
                                      (shift, torch.randperm(n), None), (None, None, scales),
                                      (shift, torch.randperm(n), scales)):
                    for pyg_mode in (True, False):
                        a = native.stack_statistics(*prims, ptr.diff(), sh, kinds, 1e-5, pyg_mode, order, sc)
                        b = stack_kernels.stack_statistics(*prims, ptr.diff(), sh, kinds, 1e-5, pyg_mode,
                                                           order, sc)
                        assert a.shape == b.shape and torch.allclose(a, b, atol=1e-5), (a - b).abs().max()
                        g = torch.randn(a.shape, dtype=dtype)
                        args = (g, prims[1], ptr.diff(), kinds, 1e-5, pyg_mode, sh is not None, order, sc)
                        for a, b in zip(torch.ops.pyg_agg.stack_statistics_backward(*args),
                                        stack_kernels.stack_statistics_backward(*args)):
                            assert a.shape == b.shape and torch.allclose(a, b, atol=1e-5), (a - b).abs().max()
            m2 = torch.rand(n, f, dtype=dtype) * 3
            m2[0, :3] = torch.tensor([-1e-7, 1e-9, float("nan")], dtype=dtype)
            counts = torch.randint(0, 4, (n,))               # empty rows too
            for pyg_mode in (True, False):                   # the std alone, as multi_aggregate runs it
                a = native.stack_statistics(none, m2, none, none, counts, None, [5], 1e-5, pyg_mode)
                b = stack_kernels.stack_statistics(none, m2, none, none, counts, None, [5], 1e-5, pyg_mode)
                assert torch.allclose(a, b, atol=1e-6, equal_nan=True), (a - b).abs().max()
        print("ok")
    """).strip() == "ok"


def test_import_never_crashes_without_a_compiler(tmp_path):
    code = ("import pyg_agg.ops as ops, torch; print(ops.HAS_NATIVE); "
            "print(ops.multi_aggregate(torch.ones(2, 1), torch.tensor([0, 0]), 1, stats='sum')['sum'].item())")
    env = {"PYG_AGG_CACHE": str(tmp_path), "PATH": "", "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-W", "always", "-c", code], env=env, capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "2.0"]
    assert out.stderr.count("native CPU ops could not be built") == 1


def default_backend_env() -> dict[str, str]:
    """This environment without CI's PYG_AGG_BACKEND, for a child that checks the default."""
    return {k: v for k, v in os.environ.items() if k != "PYG_AGG_BACKEND"}


def test_native_can_be_switched_off():
    code = "import pyg_agg.ops as ops; print(ops.HAS_NATIVE, ops.resolve_backend('multi', 'cpu'))"
    out = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-c", code],
                         env={**default_backend_env(), "PYG_AGG_NATIVE": "0"}, capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "torch"]


@pytest.mark.skipif(not HAS_NATIVE, reason="the native CPU ops are not built")
def test_a_killed_build_leaves_no_lock_that_blocks_imports():
    """cpp_extension's lock file, left behind by a process killed while building
    or loading, must not make the next import wait for ever."""
    from pyg_agg.ops import native

    stale = native.build_directory() / "lock"
    stale.touch()
    try:
        out = subprocess.run([sys.executable, "-c", "import pyg_agg.ops as o; print(o.HAS_NATIVE)"],
                             capture_output=True, text=True, timeout=120)
    finally:
        stale.unlink(missing_ok=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True"]
