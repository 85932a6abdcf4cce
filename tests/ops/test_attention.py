"""dynamic_attention: every backend against a dense per-edge reference, gradients,
determinism, torch.compile, parked entries and errors."""
import pytest
import torch
import torch._dynamo.testing
import torch.nn.functional as F
from torch_geometric.utils import softmax as pyg_softmax

import pyg_agg.ops.attention as attention_module
from pyg_agg.ops import HAS_NATIVE, HAS_TRITON, dynamic_attention, read_edges, target_csr, use_backend

BACKENDS = ["torch"] + (["native"] if HAS_NATIVE else [])
HEADS, CHANNELS, EDGE_DIM = 2, 3, 4


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    """Tiny chunks so the reference backend crosses chunk boundaries."""
    monkeypatch.setattr(attention_module, "CHUNK_ELEMENTS", 29)


def random_graph(num_src=9, num_dst=7, num_edges=40, seed=0, hub_degree=0):
    """Unsorted edges with duplicates, empty rows and (optionally) a hub row."""
    gen = torch.Generator().manual_seed(seed)
    source = torch.randint(0, num_src, (num_edges,), generator=gen)
    target = torch.randint(0, num_dst - 2, (num_edges,), generator=gen)  # last 2 rows empty
    source[1] = source[0]
    target[1] = target[0]  # a duplicate edge
    if hub_degree:
        source = torch.cat([source, torch.randint(0, num_src, (hub_degree,), generator=gen)])
        target = torch.cat([target, torch.zeros(hub_degree, dtype=torch.long)])
    perm = torch.randperm(source.numel(), generator=gen)
    return torch.stack([source[perm], target[perm]]), num_src, num_dst


def features(num_src, num_dst, num_edges, dtype=torch.float32, seed=1):
    gen = torch.Generator().manual_seed(seed)

    def rand(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64).to(dtype).requires_grad_()

    return dict(x_src=rand(num_src, HEADS, CHANNELS), x_dst=rand(num_dst, HEADS, CHANNELS),
                att=rand(HEADS, CHANNELS), edge_attr=rand(num_edges, EDGE_DIM),
                edge_weight=rand(HEADS * CHANNELS, EDGE_DIM),
                edge_scale=(torch.rand(num_edges, HEADS, generator=gen, dtype=torch.float64)
                            .to(dtype).requires_grad_()))


def dense_reference(edge_index, f, slope=0.2):
    """GATv2 written edge by edge with PyG's softmax: materialises everything."""
    source, target = edge_index
    z = f["x_src"][source] + f["x_dst"][target]
    z = z + (f["edge_attr"] @ f["edge_weight"].t()).view_as(z)
    scores = (F.leaky_relu(z, slope) * f["att"]).sum(-1)
    alpha = pyg_softmax(scores, target, num_nodes=f["x_dst"].size(0))
    message = f["x_src"][source] * (alpha * f["edge_scale"]).unsqueeze(-1)
    out = torch.zeros_like(f["x_dst"]).index_add_(0, target, message)
    return out, alpha


def run(edge_index, num_src, num_dst, f, backend):
    graph = target_csr(read_edges(edge_index, num_src, num_dst))
    with use_backend(backend):
        out, alpha = dynamic_attention(
            f["x_src"], f["x_dst"], f["att"], graph, graph.to_csr_order(f["edge_attr"]),
            f["edge_weight"], graph.to_csr_order(f["edge_scale"]), 0.2, return_alpha=True)
    return out, graph.to_input_order(alpha)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 1e-5),
                                       (torch.bfloat16, 3e-2)])
def test_matches_dense_reference(backend, dtype, tol):
    edge_index, num_src, num_dst = random_graph()
    f = features(num_src, num_dst, edge_index.size(1), dtype)
    out, alpha = run(edge_index, num_src, num_dst, f, backend)
    with torch.no_grad():
        ref = {k: v.double() for k, v in f.items()}
        out_ref, alpha_ref = dense_reference(edge_index, ref)
    assert out.dtype == dtype
    torch.testing.assert_close(out.double(), out_ref, atol=tol, rtol=tol)
    torch.testing.assert_close(alpha.double(), alpha_ref, atol=tol, rtol=tol)
    assert torch.all(out[num_dst - 2:] == 0)  # empty rows


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradients_match_dense_reference_with_a_hub(backend):
    edge_index, num_src, num_dst = random_graph(hub_degree=10_000)
    f = features(num_src, num_dst, edge_index.size(1), torch.float64)
    out, alpha = run(edge_index, num_src, num_dst, f, backend)
    out_ref, alpha_ref = dense_reference(edge_index, f)
    gen = torch.Generator().manual_seed(3)
    g_out = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    g_alpha = torch.randn(alpha.shape, generator=gen, dtype=torch.float64)
    grads = torch.autograd.grad((out * g_out).sum() + (alpha * g_alpha).sum(), list(f.values()))
    grads_ref = torch.autograd.grad((out_ref * g_out).sum() + (alpha_ref * g_alpha).sum(),
                                    list(f.values()))
    for name, got, want in zip(f, grads, grads_ref, strict=True):
        torch.testing.assert_close(got, want, atol=1e-9, rtol=1e-7, msg=name)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradcheck_float64_with_parked_entries(backend):
    edge_index, num_src, num_dst = random_graph(num_src=5, num_dst=5, num_edges=14)
    edges = read_edges(edge_index, num_src, num_dst)
    rows = edges.target.clone()
    rows[:3] = num_dst  # parked: in no row
    graph = target_csr(edges, rows, options=("test",))
    f = features(num_src, num_dst, edge_index.size(1), torch.float64)

    def fn(x_src, x_dst, att, edge_attr, edge_weight, edge_scale):
        with use_backend(backend):
            out, alpha = dynamic_attention(x_src, x_dst, att, graph, edge_attr, edge_weight,
                                           edge_scale, 0.2, return_alpha=True)
        return out, alpha

    assert torch.autograd.gradcheck(fn, tuple(f.values()))
    _, alpha = fn(*f.values())
    assert torch.all(alpha[graph.ptr[-1]:] == 0)


@pytest.mark.skipif(not HAS_NATIVE, reason="the native CPU ops are not built")
def test_native_is_bitwise_deterministic():
    edge_index, num_src, num_dst = random_graph(num_edges=3000, hub_degree=2000)
    f = features(num_src, num_dst, edge_index.size(1))
    results = []
    for _ in range(2):
        out, alpha = run(edge_index, num_src, num_dst, f, "native")
        grads = torch.autograd.grad(out.square().sum() + alpha.sum(), list(f.values()))
        results.append((out, alpha, *grads))
    for first, second in zip(*results, strict=True):
        assert torch.equal(first, second)


@pytest.mark.skipif(not (HAS_NATIVE and HAS_TRITON), reason="needs the C++ ops and triton")
def test_triton_kernels_match_the_cpu_kernels_under_the_interpreter(triton_interpreter):
    assert triton_interpreter("""
        import torch
        from pyg_agg.ops.gpu import dynamic_attention as triton_kernels
        from pyg_agg.ops.graph import transpose_csr

        def run_both(dtype, edge_features, return_alpha):
            \"\"\"(C++, Triton, Triton again) forward outputs and backward gradients.\"\"\"
            gen = torch.Generator().manual_seed(0)
            num_src, rows, heads, channels, edge_dim = 9, 8, 2, 5, 17     # C not a power of 2, D > 16
            degree = torch.randint(0, 9, (rows,), generator=gen)
            degree[0] = 40                                                # several blocks of edges
            degree[2] = degree[rows - 1] = 0                              # empty rows
            ptr = torch.cat([torch.zeros(1, dtype=torch.long), degree.cumsum(0)])
            col = torch.randint(0, num_src, (int(ptr[-1]) + 4,), generator=gen)  # 4 parked
            col[1] = col[0]                                               # a duplicate edge

            def rand(*shape):
                return torch.randn(*shape, generator=gen, dtype=torch.float64).to(dtype)

            edges = col.numel()
            x_src, x_dst, att = rand(num_src, heads, channels), rand(rows, heads, channels), rand(heads, channels)
            edge_attr = rand(edges, edge_dim) if edge_features else None
            weight_t = rand(edge_dim, heads * channels) / edge_dim**0.5 if edge_features else None  # a Linear's scale
            edge_scale = rand(edges, heads).abs() if edge_features else None
            forward_args = (x_src, x_dst, att, ptr, col, edge_attr, weight_t, edge_scale, 0.2, return_alpha)
            csc = transpose_csr(ptr, col, num_src)
            cpu = torch.ops.pyg_agg.dynamic_attention(*forward_args, None, None, None)
            grad_alpha = rand(edges, heads) if return_alpha else None
            backward_args = (rand(rows, heads, channels), grad_alpha, *forward_args[:8], cpu[1], 0.2, *csc)
            cpu += torch.ops.pyg_agg.dynamic_attention_backward(*backward_args)
            return cpu, *(triton_kernels.dynamic_attention(*forward_args, *csc)
                          + triton_kernels.dynamic_attention_backward(*backward_args) for _ in range(2))

        names = ("out", "lse", "alpha", "x_src", "x_dst", "att", "edge_attr", "weight_t", "edge_scale")
        for dtype, tol in ((torch.float32, 1e-5), (torch.float64, 1e-12)):
            for edge_features, return_alpha in ((True, True), (False, False)):
                for name, cpu, first, second in zip(names, *run_both(dtype, edge_features, return_alpha)):
                    assert cpu.shape == first.shape and cpu.dtype == first.dtype, name
                    assert torch.allclose(cpu, first, rtol=tol, atol=tol), (name, (cpu - first).abs().max())
                    assert torch.equal(first, second), name   # bitwise deterministic
        print("ok")
    """).strip() == "ok"


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiles_once_for_ten_graph_sizes(backend):
    counter = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")

    def layer(x_src, x_dst, att, edge_index):
        graph = target_csr(read_edges(edge_index, x_src.size(0), x_dst.size(0)))
        with use_backend(backend):
            return dynamic_attention(x_src, x_dst, att, graph)[0]

    compiled = torch.compile(layer, backend=counter, fullgraph=True)
    torch._dynamo.reset()
    for size in range(10):
        edge_index, num_src, num_dst = random_graph(num_src=6 + size, num_dst=5 + size,
                                                    num_edges=20 + 7 * size, seed=size)
        f = features(num_src, num_dst, edge_index.size(1))
        out = compiled(f["x_src"], f["x_dst"], f["att"], edge_index)
        eager = layer(f["x_src"], f["x_dst"], f["att"], edge_index)
        torch.testing.assert_close(out, eager)
        out.sum().backward()
    assert counter.frame_count <= 2


def test_clear_errors():
    edge_index, num_src, num_dst = random_graph()
    graph = target_csr(read_edges(edge_index, num_src, num_dst))
    f = features(num_src, num_dst, edge_index.size(1))
    with pytest.raises(ValueError, match=r"`att` must be \[heads, channels\]"):
        dynamic_attention(f["x_src"], f["x_dst"], f["att"].view(-1), graph)
    with pytest.raises(ValueError, match=r"`x_dst` must be \[N, 2, 3\]"):
        dynamic_attention(f["x_src"], f["x_dst"][:, :1], f["att"], graph)
    with pytest.raises(ValueError, match=r"`graph` has 7 rows"):
        dynamic_attention(f["x_src"], f["x_dst"][:3], f["att"], graph)
    with pytest.raises(ValueError, match=r"given together"):
        dynamic_attention(f["x_src"], f["x_dst"], f["att"], graph, edge_attr=f["edge_attr"])
    with pytest.raises(ValueError, match=r"`edge_scale` must be \[40, 2\]"):
        dynamic_attention(f["x_src"], f["x_dst"], f["att"], graph, edge_scale=f["edge_scale"][:3])
