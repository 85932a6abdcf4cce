"""GATv2Conv: drop-in equivalence with PyG, gradients, memory, compile, errors."""
import itertools

import pytest
import torch
import torch._dynamo.testing
from torch_geometric.nn import GATv2Conv as PyGGATv2Conv

import pyg_agg.ops.attention as attention_module
from pyg_agg.nn import GATv2Conv
from pyg_agg.ops import HAS_TORCH_SPARSE

pytestmark = pytest.mark.usefixtures("single_thread")

NUM_NODES, IN_CHANNELS, OUT_CHANNELS, EDGE_DIM = 12, 8, 5, 3


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    """Tiny chunks so every test of the reference backend crosses chunk boundaries."""
    monkeypatch.setattr(attention_module, "CHUNK_ELEMENTS", 37)




def make_graph(seed=0, num_edges=40):
    """Random graph with duplicate edges, existing self-loops and isolated nodes."""
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, NUM_NODES - 2, (2, num_edges), generator=gen)
    edge_index[:, :3] = torch.tensor([[1, 2, 3], [1, 2, 3]])  # self-loops
    edge_index[:, 3] = edge_index[:, 4]  # a duplicate edge
    x = torch.randn(NUM_NODES, IN_CHANNELS, generator=gen)  # last two nodes isolated
    edge_attr = torch.randn(num_edges, EDGE_DIM, generator=gen)
    return x, edge_index, edge_attr


def make_pair(in_channels=IN_CHANNELS, **kwargs):
    ref = PyGGATv2Conv(in_channels, OUT_CHANNELS, **kwargs)
    ours = GATv2Conv(in_channels, OUT_CHANNELS, **kwargs)
    ours.load_state_dict(ref.state_dict())
    return ref, ours


def assert_same_forward_backward(ref, ours, x, edge_index, edge_attr=None):
    """Same output, attention weights and gradients of inputs and parameters."""
    inputs = [tuple(t.clone().requires_grad_() for t in x) if isinstance(x, tuple)
              else x.clone().requires_grad_() for _ in range(2)]
    attrs = [None if edge_attr is None else edge_attr.clone().requires_grad_()
             for _ in range(2)]
    results = [conv(inp, edge_index, attr, return_attention_weights=True)
               for conv, inp, attr in zip((ref, ours), inputs, attrs, strict=True)]
    (out_ref, (ei_ref, alpha_ref)), (out, (ei, alpha)) = results
    assert torch.equal(ei_ref, ei)
    torch.testing.assert_close(out, out_ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(alpha, alpha_ref, atol=1e-6, rtol=1e-5)

    weight = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
    for o, a in ((out_ref, alpha_ref), (out, alpha)):
        ((o * weight).sum() + (a ** 2).sum()).backward()
    leaves = [list(inp) if isinstance(inp, tuple) else [inp] for inp in inputs]
    for t_ref, t in zip(leaves[0], leaves[1], strict=True):
        torch.testing.assert_close(t.grad, t_ref.grad, atol=1e-5, rtol=1e-4)
    if edge_attr is not None:
        torch.testing.assert_close(attrs[1].grad, attrs[0].grad, atol=1e-5, rtol=1e-4)
    for (name, p_ref), (_, p) in zip(ref.named_parameters(), ours.named_parameters(),
                                     strict=True):
        torch.testing.assert_close(p.grad, p_ref.grad, atol=1e-5, rtol=1e-4, msg=name)


GRID = list(itertools.product([1, 4], [True, False], [False, True], [False, True],
                              [True, False]))


@pytest.mark.parametrize("heads,concat,share_weights,residual,add_self_loops", GRID)
def test_matches_pyg_grid(heads, concat, share_weights, residual, add_self_loops):
    torch.manual_seed(0)
    ref, ours = make_pair(heads=heads, concat=concat, share_weights=share_weights,
                          residual=residual, add_self_loops=add_self_loops)
    x, edge_index, _ = make_graph()
    assert_same_forward_backward(ref, ours, x, edge_index)


FILL_VALUES = ["mean", "add", "sum", "min", "max", "mul", 0.5, torch.tensor([1.0, -2.0, 3.0]),
               None]


@pytest.mark.parametrize("fill_value", FILL_VALUES, ids=str)
@pytest.mark.parametrize("heads,add_self_loops", [(1, True), (4, True), (4, False)])
def test_matches_pyg_with_edge_features(fill_value, heads, add_self_loops):
    torch.manual_seed(0)
    ref, ours = make_pair(heads=heads, edge_dim=EDGE_DIM, fill_value=fill_value,
                          add_self_loops=add_self_loops)
    x, edge_index, edge_attr = make_graph(seed=2)
    assert_same_forward_backward(ref, ours, x, edge_index, edge_attr)


def test_one_dimensional_edge_attr_matches_pyg():
    torch.manual_seed(0)
    ref, ours = make_pair(heads=2, edge_dim=1, fill_value="max")
    x, edge_index, edge_attr = make_graph(seed=3)
    assert_same_forward_backward(ref, ours, x, edge_index, edge_attr[:, 0])


@pytest.mark.parametrize("num_src,num_dst", [(9, 5), (5, 9), (6, 6)])
@pytest.mark.parametrize("add_self_loops", [True, False])
def test_bipartite_matches_pyg(num_src, num_dst, add_self_loops):
    torch.manual_seed(0)
    ref, ours = make_pair(in_channels=(IN_CHANNELS, 6), heads=2, residual=True,
                          add_self_loops=add_self_loops)
    gen = torch.Generator().manual_seed(4)
    edge_index = torch.stack([torch.randint(0, num_src, (25,), generator=gen),
                              torch.randint(0, num_dst, (25,), generator=gen)])
    edge_index[:, 0] = 2  # an existing loop 2 -> 2
    x = (torch.randn(num_src, IN_CHANNELS, generator=gen), torch.randn(num_dst, 6, generator=gen))
    assert_same_forward_backward(ref, ours, x, edge_index)


def test_bipartite_more_targets_with_aggregated_loop_features():
    """PyG crashes here (it aggregates loop features into only min(N_s, N_t)
    slots); the result must equal PyG run on the graph with the self-loops and
    their mean edge features added explicitly."""
    torch.manual_seed(0)
    num_src, num_dst = 4, 7
    ours = GATv2Conv((IN_CHANNELS, 6), OUT_CHANNELS, heads=2, edge_dim=EDGE_DIM)
    ref = PyGGATv2Conv((IN_CHANNELS, 6), OUT_CHANNELS, heads=2, edge_dim=EDGE_DIM,
                       add_self_loops=False)
    ref.load_state_dict(ours.state_dict())
    gen = torch.Generator().manual_seed(5)
    edge_index = torch.stack([torch.randint(0, num_src, (30,), generator=gen),
                              torch.randint(0, num_dst, (30,), generator=gen)])
    edge_index[:, :2] = torch.tensor([[1, 3], [1, 3]])
    edge_attr = torch.randn(30, EDGE_DIM, generator=gen)
    x = (torch.randn(num_src, IN_CHANNELS, generator=gen), torch.randn(num_dst, 6, generator=gen))

    kept = edge_index[0] != edge_index[1]
    plain_index, plain_attr = edge_index[:, kept], edge_attr[kept]
    loops = torch.arange(num_src)
    loop_attr = torch.stack([
        plain_attr[plain_index[1] == i].mean(0) if (plain_index[1] == i).any()
        else torch.zeros(EDGE_DIM) for i in loops])
    explicit_index = torch.cat([plain_index, loops.repeat(2, 1)], dim=1)
    explicit_attr = torch.cat([plain_attr, loop_attr])

    out, (ei, alpha) = ours(x, edge_index, edge_attr, return_attention_weights=True)
    out_ref, (ei_ref, alpha_ref) = ref(x, explicit_index, explicit_attr,
                                       return_attention_weights=True)
    assert torch.equal(ei, ei_ref)
    torch.testing.assert_close(out, out_ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(alpha, alpha_ref, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("layout", ["coo", "csr"])
@pytest.mark.parametrize("edge_dim", [None, EDGE_DIM])
def test_torch_sparse_adjacency_matches_pyg(layout, edge_dim):
    torch.manual_seed(0)
    x, edge_index, edge_attr = make_graph(seed=6)
    edge_index = torch.unique(edge_index, dim=1)
    edge_attr = edge_attr[:edge_index.size(1)]
    adj = torch.sparse_coo_tensor(edge_index.flip(0), torch.ones(edge_index.size(1)),
                                  (NUM_NODES, NUM_NODES)).coalesce()
    if layout == "csr":
        adj = adj.to_sparse_csr()
    # PyG rejects edge features with self-loops on sparse input: compare without.
    loops = edge_dim is None
    ref, ours = make_pair(heads=2, edge_dim=edge_dim, add_self_loops=loops)
    attr = None if edge_dim is None else edge_attr
    out_ref, (adj_ref, _) = ref(x, adj, attr, return_attention_weights=True)
    out, (adj_out, alpha) = ours(x, adj, attr, return_attention_weights=True)
    torch.testing.assert_close(out, out_ref, atol=1e-5, rtol=1e-5)
    assert adj_out.layout == adj.layout
    torch.testing.assert_close(adj_out.to_dense(), adj_ref.to_dense(), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(adj_out.values(), alpha)


def test_sparse_adjacency_with_edge_features_and_self_loops_matches_edge_index():
    torch.manual_seed(0)
    x, edge_index, edge_attr = make_graph(seed=7)
    edge_index = torch.unique(edge_index, dim=1)
    edge_attr = edge_attr[:edge_index.size(1)]
    conv = GATv2Conv(IN_CHANNELS, OUT_CHANNELS, heads=2, edge_dim=EDGE_DIM)
    # COO entries sorted by (target, source) carry the matching edge features.
    order = torch.argsort(edge_index[1] * NUM_NODES + edge_index[0])
    adj = torch.sparse_coo_tensor(edge_index[:, order].flip(0), torch.ones(order.numel()),
                                  (NUM_NODES, NUM_NODES)).coalesce()
    torch.testing.assert_close(conv(x, adj, edge_attr[order]), conv(x, edge_index, edge_attr))


@pytest.mark.skipif(not HAS_TORCH_SPARSE, reason="torch_sparse is not installed")
def test_sparse_tensor_matches_pyg():
    from torch_sparse import SparseTensor

    torch.manual_seed(0)
    x, edge_index, _ = make_graph(seed=8)
    adj_t = SparseTensor(row=edge_index[1], col=edge_index[0],
                         sparse_sizes=(NUM_NODES, NUM_NODES))
    ref, ours = make_pair(heads=2)
    out_ref, adj_ref = ref(x, adj_t, return_attention_weights=True)
    out, adj_out = ours(x, adj_t, return_attention_weights=True)
    torch.testing.assert_close(out, out_ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(adj_out.to_dense(), adj_ref.to_dense(), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("add_self_loops", [True, False])
def test_int32_and_empty_edge_index_match_pyg(add_self_loops):
    torch.manual_seed(0)
    ref, ours = make_pair(heads=2, add_self_loops=add_self_loops)
    x, edge_index, _ = make_graph()
    torch.testing.assert_close(ours(x, edge_index.int()), ref(x, edge_index))
    empty = torch.empty(2, 0, dtype=torch.long)
    torch.testing.assert_close(ours(x, empty), ref(x, empty))


def test_state_dict_repr_and_lazy_init_match_pyg():
    ref, ours = make_pair(heads=3, edge_dim=2, residual=True, share_weights=True)
    assert repr(ours) == repr(ref)
    assert {k: v.shape for k, v in ours.state_dict().items()} == {
        k: v.shape for k, v in ref.state_dict().items()}
    torch.manual_seed(0)
    lazy_ref, lazy = PyGGATv2Conv(-1, OUT_CHANNELS, heads=2), GATv2Conv(-1, OUT_CHANNELS, heads=2)
    assert repr(lazy) == repr(lazy_ref)
    x, edge_index, _ = make_graph()
    lazy_ref(x, edge_index)
    lazy(x, edge_index)
    lazy.load_state_dict(lazy_ref.state_dict())
    torch.testing.assert_close(lazy(x, edge_index), lazy_ref(x, edge_index))


def test_dropout_zeroes_or_rescales_attention():
    torch.manual_seed(0)
    conv = GATv2Conv(IN_CHANNELS, OUT_CHANNELS, heads=4, dropout=0.5)
    x, edge_index, _ = make_graph()
    _, (_, alpha_eval) = conv.eval()(x, edge_index, return_attention_weights=True)
    _, (_, alpha_train) = conv.train()(x, edge_index, return_attention_weights=True)
    dropped = alpha_train == 0
    assert dropped.any() and not dropped.all()
    torch.testing.assert_close(alpha_train[~dropped], 2 * alpha_eval[~dropped])


def test_gradcheck_layer_float64():
    torch.manual_seed(0)
    conv = GATv2Conv((4, 3), 2, heads=2, edge_dim=2, residual=True).double()
    gen = torch.Generator().manual_seed(1)
    edge_index = torch.stack([torch.randint(0, 6, (15,), generator=gen),
                              torch.randint(0, 5, (15,), generator=gen)])
    x_src = torch.randn(6, 4, dtype=torch.float64, generator=gen).requires_grad_()
    x_dst = torch.randn(5, 3, dtype=torch.float64, generator=gen).requires_grad_()
    edge_attr = torch.randn(15, 2, dtype=torch.float64, generator=gen).requires_grad_()
    assert torch.autograd.gradcheck(
        lambda a, b, e: conv((a, b), edge_index, e), (x_src, x_dst, edge_attr))


def test_no_edge_by_feature_tensor_saved_for_backward():
    """Only O(E H) and O(N H C) tensors are kept for backward, never E x H x C."""
    heads, channels = 4, 16
    gen = torch.Generator().manual_seed(0)
    num_edges = 2000
    edge_index = torch.randint(0, 50, (2, num_edges), generator=gen)
    x = torch.randn(50, IN_CHANNELS, generator=gen, requires_grad=True)
    saved = []

    def pack(t):
        saved.append(t.numel())
        return t

    for conv in (PyGGATv2Conv(IN_CHANNELS, channels, heads=heads),
                 GATv2Conv(IN_CHANNELS, channels, heads=heads)):
        saved.clear()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            conv(x, edge_index)
        largest = max(saved)
        if isinstance(conv, GATv2Conv):
            assert largest < num_edges * heads * channels
        else:  # the check is meaningful: PyG does store such a tensor
            assert largest >= num_edges * heads * channels


def test_torch_compile_fullgraph_compiles_at_most_twice_over_ten_graph_sizes():
    torch.manual_seed(0)
    conv = GATv2Conv(IN_CHANNELS, OUT_CHANNELS, heads=2, edge_dim=EDGE_DIM)
    counter = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
    torch._dynamo.reset()
    compiled = torch.compile(conv, fullgraph=True, backend=counter)
    # existing self-loops must not break the graph; new sizes must not recompile
    for seed in range(10):
        x, edge_index, edge_attr = make_graph(seed=seed, num_edges=40 + 3 * seed)
        xs = [x.clone().requires_grad_() for _ in range(2)]
        out_eager = conv(xs[0], edge_index, edge_attr)
        out_compiled = compiled(xs[1], edge_index, edge_attr)
        torch.testing.assert_close(out_compiled, out_eager)
        out_eager.square().sum().backward()
        out_compiled.square().sum().backward()
        torch.testing.assert_close(xs[1].grad, xs[0].grad)
    assert counter.frame_count <= 2


def test_flow_target_to_source_matches_pyg():
    torch.manual_seed(0)
    x, edge_index, edge_attr = make_graph(seed=9)
    ref, ours = make_pair(heads=2, edge_dim=EDGE_DIM, flow="target_to_source")
    assert_same_forward_backward(ref, ours, x, edge_index, edge_attr)


def test_explainer_gives_pyg_explanations(gnn_explainer_mask):
    """PyG's GNNExplainer trains the same edge mask through ours as through PyG's."""
    x, edge_index, _ = make_graph(seed=10)
    masks = [gnn_explainer_mask(conv, x, edge_index) for conv in make_pair(heads=2)]
    assert masks[1].abs().sum() > 0
    torch.testing.assert_close(masks[1], masks[0], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("call,match", [
    (lambda c, x, ei: c(x[0], ei), r"`x` must be 2-D"),
    (lambda c, x, ei: c(x[:, :5], ei), r"`x` has 5 features .* in_channels=8"),
    (lambda c, x, ei: c((x, x[:, :3]), ei), r"`x_dst` has 3 features"),
    (lambda c, x, ei: c(x, ei[0]), r"`edge_index` must have shape \[2, E\]"),
    (lambda c, x, ei: c(x, ei.float()), r"`edge_index` must be an integer tensor"),
    (lambda c, x, ei: c(x, ei + NUM_NODES), r"`edge_index \(sources\)` contains 2\d, out of range"),
    (lambda c, x, ei: c(x, ei - 1), r"`edge_index \(sources\)` contains negative entries"),
    (lambda c, x, ei: c(x, ei, torch.randn(ei.size(1), 2)), r"edge_dim=None"),
    (lambda c, x, ei: c(x, [[0], [1]]), r"`edge_index` must be a \[2, E\] tensor"),
    (lambda c, x, ei: c(x, torch.eye(3).to_sparse()), r"adjacency has shape \(3, 3\)"),
])
def test_clear_errors(call, match):
    conv = GATv2Conv(IN_CHANNELS, OUT_CHANNELS)
    x, edge_index, _ = make_graph()
    with pytest.raises((ValueError, TypeError), match=match):
        call(conv, x, edge_index)


def test_clear_errors_for_edge_features_and_constructor():
    conv = GATv2Conv(IN_CHANNELS, OUT_CHANNELS, edge_dim=EDGE_DIM)
    x, edge_index, edge_attr = make_graph()
    with pytest.raises(ValueError, match=r"`edge_attr` must have shape \[E, 3\]"):
        conv(x, edge_index, edge_attr[:, :2])
    with pytest.raises(ValueError, match=r"`edge_attr` has 39 rows"):
        conv(x, edge_index, edge_attr[:-1])
    with pytest.raises(ValueError, match=r"`edge_attr` is missing .* edge_dim=3"):
        conv(x, edge_index)
    with pytest.raises(ValueError, match=r"`fill_value` must be"):
        GATv2Conv(IN_CHANNELS, OUT_CHANNELS, edge_dim=2, fill_value="median")
    with pytest.raises(ValueError, match=r"`heads` must be a positive int"):
        GATv2Conv(IN_CHANNELS, OUT_CHANNELS, heads=0)
