import itertools
import math

import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader
from torch_geometric.nn import PNAConv as PyGPNAConv

from pyg_agg.nn import PNAConv

ALL_AGGREGATORS = ["mean", "min", "max", "std", "var", "sum"]
ALL_SCALERS = ["identity", "amplification", "attenuation", "linear", "inverse_linear"]


def random_graph(num_nodes=30, num_edges=120, channels=8, edge_dim=3, isolated=3, seed=0):
    """A random multigraph whose last ``isolated`` nodes have no edges, with a few
    duplicate edges and identical node features so min/max have ties."""
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, num_nodes - isolated, (2, num_edges), generator=gen)
    edge_index = torch.cat([edge_index, edge_index[:, :10]], dim=1)
    x = torch.randn(num_nodes, channels, generator=gen)
    x[:3] = x[3]
    edge_attr = torch.randn(edge_index.size(1), edge_dim, generator=gen)
    return x, edge_index, edge_attr


def histogram(edge_index, num_nodes):
    return PNAConv.get_degree_histogram(Data(edge_index=edge_index, num_nodes=num_nodes))


def pair(in_channels, out_channels, **kwargs):
    """PyG's layer and ours with PyG's weights."""
    reference = PyGPNAConv(in_channels, out_channels, **kwargs)
    ours = PNAConv(in_channels, out_channels, **kwargs)
    ours.load_state_dict(reference.state_dict())
    return reference, ours


def assert_same_forward_backward(reference, ours, x, edge_index, edge_attr=None, atol=1e-4):
    xs = [x.clone().requires_grad_() for _ in range(2)]
    outs = [m(xi, edge_index, edge_attr) for m, xi in zip((reference, ours), xs, strict=True)]
    torch.testing.assert_close(outs[1], outs[0], atol=atol, rtol=1e-4)
    weight = torch.randn_like(outs[0])
    for out in outs:
        (out * weight).sum().backward()
    torch.testing.assert_close(xs[1].grad, xs[0].grad, atol=atol, rtol=1e-4)
    for (name, p_ref), (_, p_ours) in zip(reference.named_parameters(),
                                          ours.named_parameters(), strict=True):
        torch.testing.assert_close(p_ours.grad, p_ref.grad, atol=atol, rtol=1e-4,
                                   msg=lambda m, name=name: f"grad of {name}: {m}")


GRID = list(itertools.product([1, 2, 4], [False, True], [None, 3], [1, 2], [1, 2]))


@pytest.mark.parametrize("towers,divide_input,edge_dim,pre_layers,post_layers", GRID)
def test_matches_pyg_grid(towers, divide_input, edge_dim, pre_layers, post_layers):
    x, edge_index, edge_attr = random_graph()
    kwargs = dict(aggregators=ALL_AGGREGATORS, scalers=ALL_SCALERS,
                  deg=histogram(edge_index, x.size(0)), edge_dim=edge_dim, towers=towers,
                  pre_layers=pre_layers, post_layers=post_layers, divide_input=divide_input)
    reference, ours = pair(8, 8, **kwargs)
    assert list(ours.state_dict()) == list(reference.state_dict())
    for key, value in reference.state_dict().items():
        assert ours.state_dict()[key].shape == value.shape, key
    assert repr(ours) == repr(reference)
    assert_same_forward_backward(reference, ours, x, edge_index,
                                 edge_attr if edge_dim else None)


@pytest.mark.parametrize("towers", [1, 4])
def test_matches_pyg_on_a_batch_of_few_degrees(towers):
    # ~300 nodes of in-degree 0-4, like a batch of molecules: the post-layer groups
    # the nodes by degree (one combined matrix per degree, see scaled_linear)
    gen = torch.Generator().manual_seed(towers)
    num_nodes = 300
    degree = torch.randint(0, 5, (num_nodes,), generator=gen)
    target = torch.repeat_interleave(torch.arange(num_nodes), degree)
    edge_index = torch.stack([torch.randint(0, num_nodes, (target.numel(),), generator=gen), target])
    edge_index = edge_index[:, torch.randperm(target.numel(), generator=gen)]
    x = torch.randn(num_nodes, 8, generator=gen)
    reference, ours = pair(8, 8, aggregators=ALL_AGGREGATORS, scalers=ALL_SCALERS,
                           deg=histogram(edge_index, num_nodes), towers=towers)
    assert_same_forward_backward(reference, ours, x, edge_index)


@pytest.mark.parametrize("num_nodes", [19, 20, 40])
def test_matches_pyg_on_both_sides_of_the_output_layer_fold(num_nodes):
    # one tower, one post-layer: `lin` is folded into the post-layer once the rows
    # outnumber the post-layer's input width, here (2 * 2 + 1) * 4 = 20
    x, edge_index, _ = random_graph(num_nodes=num_nodes, num_edges=4 * num_nodes, channels=4)
    reference, ours = pair(4, 4, aggregators=["mean", "max"], scalers=["identity", "amplification"],
                           deg=histogram(edge_index, num_nodes))
    assert ours.post_nns[0][0].in_channels == 20
    assert_same_forward_backward(reference, ours, x, edge_index)


@pytest.mark.parametrize("aggregator", ALL_AGGREGATORS)
@pytest.mark.parametrize("towers", [1, 2])
def test_each_aggregator_alone(aggregator, towers):
    x, edge_index, edge_attr = random_graph()
    reference, ours = pair(8, 4, aggregators=[aggregator], scalers=["identity"],
                           deg=histogram(edge_index, x.size(0)), towers=towers, edge_dim=3)
    assert_same_forward_backward(reference, ours, x, edge_index, edge_attr)


@pytest.mark.parametrize("scaler", ALL_SCALERS)
def test_each_scaler_alone(scaler):
    x, edge_index, _ = random_graph()
    reference, ours = pair(8, 8, aggregators=["mean", "max"], scalers=[scaler],
                           deg=histogram(edge_index, x.size(0)), towers=2)
    assert_same_forward_backward(reference, ours, x, edge_index)


def test_single_node_without_edges():
    x = torch.randn(1, 4)
    edge_index = torch.empty(2, 0, dtype=torch.long)
    deg = torch.tensor([3, 2, 1])  # from some other (training) graphs
    reference, ours = pair(4, 4, aggregators=ALL_AGGREGATORS, scalers=ALL_SCALERS, deg=deg)
    assert_same_forward_backward(reference, ours, x, edge_index)


def test_isolated_nodes_only_see_themselves():
    x, edge_index, _ = random_graph(isolated=4)
    conv = PNAConv(8, 8, ALL_AGGREGATORS, ALL_SCALERS, deg=histogram(edge_index, 30))
    out = conv(x, edge_index)
    alone = conv(x[-4:], torch.empty(2, 0, dtype=torch.long))
    torch.testing.assert_close(out[-4:], alone, atol=1e-5, rtol=1e-5)


def test_train_norm_parameters_and_grads():
    x, edge_index, _ = random_graph()
    reference, ours = pair(8, 8, aggregators=["mean", "std"], scalers=ALL_SCALERS,
                           deg=histogram(edge_index, 30), train_norm=True)
    names = [n for n, _ in ours.named_parameters()]
    assert "aggr_module.avg_deg_lin" in names and "aggr_module.avg_deg_log" in names
    assert_same_forward_backward(reference, ours, x, edge_index)


def test_flow_target_to_source():
    x, edge_index, _ = random_graph()
    reference, ours = pair(8, 8, aggregators=["mean", "min"], scalers=["amplification"],
                           deg=histogram(edge_index.flip(0), 30), flow="target_to_source")
    assert_same_forward_backward(reference, ours, x, edge_index)


def test_degree_histogram_refuses_out_of_range_targets():
    graphs = [Data(edge_index=torch.tensor([[0, 1], [1, 2]]), num_nodes=3),
              Data(edge_index=torch.tensor([[0, 1], [1, 5]]), num_nodes=3)]
    with pytest.raises(ValueError, match=r"`edge_index\[1\] of graph 1` contains 5"):
        PNAConv.get_degree_histogram(graphs)


def test_explainer_gives_pyg_explanations(gnn_explainer_mask):
    """PyG's GNNExplainer trains the same edge mask through ours as through PyG's."""
    x, edge_index, _ = random_graph()
    convs = pair(8, 8, aggregators=["mean", "max", "std"], scalers=["identity", "amplification"],
                 deg=histogram(edge_index, 30))
    masks = [gnn_explainer_mask(conv, x, edge_index) for conv in convs]
    assert masks[1].abs().sum() > 0
    torch.testing.assert_close(masks[1], masks[0], atol=1e-5, rtol=1e-4)


def test_edge_index_object_and_cached_csr_give_the_same_output():
    from torch_geometric import EdgeIndex

    x, edge_index, edge_attr = random_graph()
    conv = PNAConv(8, 8, ["mean", "min", "max", "std"], ["identity", "amplification"],
                   deg=histogram(edge_index, 30), edge_dim=3)
    expected = conv(x, edge_index, edge_attr)
    torch.testing.assert_close(conv(x, edge_index, edge_attr), expected)  # cached CSR
    sorted_index, perm = EdgeIndex(edge_index, sparse_size=(30, 30)).sort_by("col")
    torch.testing.assert_close(conv(x, sorted_index, edge_attr[perm]), expected,
                               atol=1e-5, rtol=1e-5)


def test_torch_compile_fullgraph_compiles_at_most_twice_over_ten_graph_sizes():
    import torch._dynamo.testing

    x, edge_index, edge_attr = random_graph()
    conv = PNAConv(8, 8, ["mean", "min", "max", "std"], ["identity", "amplification"],
                   deg=histogram(edge_index, 30), edge_dim=3)
    counter = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
    torch._dynamo.reset()
    compiled = torch.compile(conv, fullgraph=True, backend=counter)
    for seed in range(10):
        x, edge_index, edge_attr = random_graph(num_nodes=30 + seed, num_edges=100 + 9 * seed,
                                                seed=seed)
        xs = [x.clone().requires_grad_() for _ in range(2)]
        out_eager = conv(xs[0], edge_index, edge_attr)
        out_compiled = compiled(xs[1], edge_index, edge_attr)
        torch.testing.assert_close(out_compiled, out_eager, atol=1e-5, rtol=1e-5)
        out_eager.square().sum().backward()
        out_compiled.square().sum().backward()
        torch.testing.assert_close(xs[1].grad, xs[0].grad, atol=1e-5, rtol=1e-5)
    assert counter.frame_count <= 2


def test_sparse_adjacency_input():
    x, edge_index, _ = random_graph()
    edge_index = torch.unique(edge_index, dim=1)  # a sparse matrix has no duplicates
    adj_t = torch.sparse_coo_tensor(edge_index.flip(0), torch.ones(edge_index.size(1)),
                                    (30, 30)).coalesce()
    reference, ours = pair(8, 8, aggregators=ALL_AGGREGATORS, scalers=ALL_SCALERS,
                           deg=histogram(edge_index, 30))
    expected = reference(x, edge_index)
    torch.testing.assert_close(ours(x, adj_t), expected, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(ours(x, adj_t.to_sparse_csr()), expected, atol=1e-4, rtol=1e-4)


def test_gradcheck_float64():
    x, edge_index, edge_attr = random_graph(num_nodes=8, num_edges=20, channels=4, isolated=1)
    x = x.double() + 0.01 * torch.arange(32, dtype=torch.double).view(8, 4)  # no ties
    edge_index = edge_index[:, :20]
    conv = PNAConv(4, 4, ["mean", "min", "max", "std", "var", "sum", "moment3"], ALL_SCALERS,
                   deg=histogram(edge_index, 8), edge_dim=3, towers=2, pre_layers=2,
                   post_layers=2, divide_input=True).double()
    edge_attr = edge_attr[:20].double().requires_grad_()
    x.requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b: conv(a, edge_index, b), (x, edge_attr))


@pytest.mark.parametrize("std_mode", ["pyg", "eps"])
def test_std_modes(std_mode):
    # One node with 3 in-edges; towers=1, identity weights isolate the aggregation.
    conv = PNAConv(1, 1, ["std"], ["identity"], std_mode=std_mode)
    msg = torch.tensor([[1.0], [2.0], [4.0], [5.0], [5.0]])
    index = torch.tensor([0, 0, 0, 1, 1])
    out = conv.aggr_module(msg, index, dim_size=3, dim=0).squeeze(-1)
    var = torch.tensor([msg[:3].var(unbiased=False).item(), 0.0, 0.0])
    if std_mode == "pyg":
        expected = torch.tensor([math.sqrt(var[0]), 0.0, 0.0])
    else:
        expected = torch.tensor([math.sqrt(var[0] + 1e-5), math.sqrt(1e-5), 0.0])
    torch.testing.assert_close(out, expected)


def test_moment_aggregators_match_definition():
    conv = PNAConv(2, 2, ["moment3", "moment4", "moment5"], ["identity"])
    gen = torch.Generator().manual_seed(1)
    msg = torch.randn(9, 2, generator=gen)
    index = torch.tensor([0, 0, 0, 0, 1, 1, 1, 2, 2])
    out = conv.aggr_module(msg, index, dim_size=4, dim=0).view(4, 3, 2)
    for node in range(3):
        group = msg[index == node]
        for k, n in enumerate((3, 4, 5)):
            m = (group - group.mean(0)).pow(n).mean(0)
            expected = m.sign() * (m.abs() + 1e-5).pow(1 / n)
            torch.testing.assert_close(out[node, k], expected, atol=1e-5, rtol=1e-4)
    assert bool((out[3] == 0).all())  # no in-edges


def test_degree_histogram_matches_pyg():
    graphs = [Data(edge_index=random_graph(seed=s)[1], num_nodes=30) for s in range(5)]
    expected = PyGPNAConv.get_degree_histogram(DataLoader(graphs, batch_size=2))
    torch.testing.assert_close(PNAConv.get_degree_histogram(graphs), expected)
    torch.testing.assert_close(PNAConv.get_degree_histogram(DataLoader(graphs, batch_size=2)),
                               expected)
    assert int(expected.sum()) == 150


def test_validation_errors():
    deg = torch.tensor([1, 2, 3])
    with pytest.raises(ValueError, match="`deg` is required"):
        PNAConv(4, 4, ["mean"], ["amplification"])
    with pytest.raises(ValueError, match="`deg` is empty or all zero"):
        PNAConv(4, 4, ["mean"], ["attenuation"], deg=torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="`deg` is empty"):
        PNAConv(4, 4, ["mean"], ["linear"], deg=torch.tensor([], dtype=torch.long))
    with pytest.raises(ValueError, match="only counts isolated nodes"):
        PNAConv(4, 4, ["mean"], ["inverse_linear"], deg=torch.tensor([5]))
    with pytest.raises(ValueError, match="1-D tensor"):
        PNAConv(4, 4, ["mean"], ["linear"], deg=torch.ones(2, 2))
    with pytest.raises(ValueError, match="Unknown aggregators"):
        PNAConv(4, 4, ["median"], ["identity"], deg=deg)
    with pytest.raises(ValueError, match="Unknown scalers"):
        PNAConv(4, 4, ["mean"], ["log"], deg=deg)
    with pytest.raises(ValueError, match="at least one"):
        PNAConv(4, 4, [], ["identity"], deg=deg)
    with pytest.raises(ValueError, match="divisible by `towers`"):
        PNAConv(4, 6, ["mean"], ["identity"], deg=deg, towers=4)
    with pytest.raises(ValueError, match="`in_channels`.*divide_input"):
        PNAConv(6, 4, ["mean"], ["identity"], deg=deg, towers=4, divide_input=True)
    with pytest.raises(ValueError, match="`pre_layers` must be a positive integer"):
        PNAConv(4, 4, ["mean"], ["identity"], deg=deg, pre_layers=0)
    with pytest.raises(ValueError, match="`std_mode`"):
        PNAConv(4, 4, ["std"], ["identity"], deg=deg, std_mode="paper")

    conv = PNAConv(4, 4, ["mean"], ["identity"], deg=deg, edge_dim=2)
    x, edge_index = torch.randn(5, 4), torch.tensor([[0, 1], [1, 2]])
    with pytest.raises(ValueError, match="`edge_attr` must be given"):
        conv(x, edge_index)
    with pytest.raises(ValueError, match=r"`edge_attr` must have shape \[2, 2\]"):
        conv(x, edge_index, torch.randn(3, 2))
    with pytest.raises(ValueError, match=r"`x` must have shape \[num_nodes, 4\]"):
        conv(torch.randn(5, 3), edge_index, torch.randn(2, 2))
    with pytest.raises(ValueError, match=r"`edge_index` must have shape \[2, E\]"):
        conv(x, edge_index.t().reshape(4, 1), torch.randn(2, 2))
    with pytest.raises(ValueError, match=r"`edge_index \(sources\)` contains 7"):
        conv(x, torch.tensor([[0, 7], [1, 2]]), torch.randn(2, 2))
    with pytest.raises(TypeError, match="`edge_index` must be an integer"):
        conv(x, edge_index.float(), torch.randn(2, 2))


def test_identity_only_needs_no_deg():
    x, edge_index, _ = random_graph()
    conv = PNAConv(8, 8, ["mean", "max"], ["identity"])
    assert conv(x, edge_index).shape == (30, 8)


@pytest.mark.parametrize("act,act_kwargs", [("prelu", None), ("leaky_relu", {"negative_slope": 0.3})])
def test_activations_match_pyg(act, act_kwargs):
    x, edge_index, _ = random_graph()
    reference, ours = pair(8, 8, aggregators=["mean", "max"], scalers=["identity"],
                           deg=histogram(edge_index, 30), towers=2, pre_layers=2,
                           post_layers=2, act=act, act_kwargs=act_kwargs)
    for module in reference.modules():  # per-tower PReLU slopes differ
        if isinstance(module, torch.nn.PReLU):
            module.weight.data.uniform_(0.0, 0.5)
    ours.load_state_dict(reference.state_dict())
    assert_same_forward_backward(reference, ours, x, edge_index)
