import pytest
import torch
from torch_geometric.nn import MessagePassing
from torch_geometric.nn.aggr import LCMAggregation as PyGLCMAggregation

from pyg_agg.nn import LCMAggregation
from pyg_agg.nn.aggr import LCMAggregation as ExportedLCMAggregation
from pyg_agg.ops import scatter


def elementwise_max(a, b):
    return torch.maximum(a, b)


def pyg_twin(ours: LCMAggregation) -> PyGLCMAggregation:
    pyg = PyGLCMAggregation(ours.in_channels, ours.out_channels, project=ours.project)
    pyg.load_state_dict(ours.state_dict())
    return pyg.to(next(ours.parameters()).dtype)


def random_graph_index(num_nodes, degrees):
    """An index in random order where node i receives degrees[i] entries."""
    index = torch.repeat_interleave(torch.arange(num_nodes), torch.as_tensor(degrees))
    return index[torch.randperm(index.numel())]


def test_exported():
    assert ExportedLCMAggregation is LCMAggregation


def test_state_dict_and_repr_match_pyg():
    for project in (True, False):
        ours = LCMAggregation(16, 16, project=project)
        pyg = PyGLCMAggregation(16, 16, project=project)
        assert repr(ours) == repr(pyg)
        assert {k: v.shape for k, v in ours.state_dict().items()} == {
            k: v.shape for k, v in pyg.state_dict().items()}
        ours.load_state_dict(pyg.state_dict())  # strict in both directions
    assert repr(LCMAggregation(4, 8, operator="mlp", learn_identity=True)) == (
        "LCMAggregation(4, 8, project=True, operator='mlp', learn_identity=True)")


@pytest.mark.parametrize("degree", [1, 2, 3, 4, 8, 16])
@pytest.mark.parametrize("project", [True, False])
def test_matches_pyg_on_equal_degrees(degree, project):
    num_nodes, channels = 12, 16
    ours = LCMAggregation(channels, channels, project=project)
    pyg = pyg_twin(ours)
    index = torch.arange(num_nodes).repeat_interleave(degree)
    x = torch.randn(index.numel(), channels, requires_grad=True)

    out, out_pyg = ours(x, index), pyg(x, index)
    torch.testing.assert_close(out, out_pyg, atol=1e-5, rtol=0)

    grad = torch.randn_like(out)
    # With degree 1 the operator is never applied (its gradients are None).
    grads = torch.autograd.grad(out, [x, *ours.parameters()], grad, allow_unused=True)
    grads_pyg = torch.autograd.grad(out_pyg, [x, *pyg.parameters()], grad, allow_unused=True)
    for g, g_pyg in zip(grads, grads_pyg, strict=True):
        if g is None or g_pyg is None:
            assert g is None and g_pyg is None
        else:
            torch.testing.assert_close(g, g_pyg, atol=1e-5, rtol=1e-4)


def test_ptr_and_unsorted_index_equal_sorted_index():
    aggr = LCMAggregation(8, 16)
    degrees = torch.tensor([0, 1, 5, 2, 0, 7, 3, 4])
    index = random_graph_index(8, degrees)
    x = torch.randn(index.numel(), 8)

    order = torch.argsort(index, stable=True)  # keeps the within-node order
    out = aggr(x, index, dim_size=8)
    assert torch.equal(out, aggr(x[order], index[order], dim_size=8))
    ptr = torch.cat([torch.zeros(1, dtype=torch.long), degrees.cumsum(0)])
    assert torch.equal(out, aggr(x[order], ptr=ptr))


def test_node_output_independent_of_batch():
    aggr = LCMAggregation(8, 16)
    degrees = torch.tensor([3, 0, 1, 6, 2, 5, 4])
    index = random_graph_index(7, degrees)
    x = torch.randn(index.numel(), 8)
    alone = aggr(x, index, dim_size=7)

    hub_x = torch.randn(300, 8)  # a hub of degree 250 and a few others
    hub_index = torch.cat([torch.zeros(250, dtype=torch.long), torch.randint(1, 5, (50,))])
    before = aggr(torch.cat([hub_x, x]), torch.cat([hub_index, index + 5]), dim_size=12)
    after = aggr(torch.cat([x, hub_x]), torch.cat([index, hub_index + 7]), dim_size=12)
    assert torch.equal(before[5:], alone)
    assert torch.equal(after[:7], alone)


def test_associative_operator_is_order_invariant_and_equals_scatter_max():
    aggr = LCMAggregation(8, 8, project=False, operator=elementwise_max)
    degrees = torch.randint(0, 40, (30,))
    index = random_graph_index(30, degrees)
    x = torch.randn(index.numel(), 8)
    expected = scatter(x, index, 0, 30, reduce="max")
    for _ in range(3):
        perm = torch.randperm(index.numel())
        assert torch.equal(aggr(x[perm], index[perm], dim_size=30), expected)


def test_empty_neighbourhoods():
    index = torch.tensor([0, 0, 2, 2, 2])
    x = torch.randn(5, 4)
    out = LCMAggregation(4, 6)(x, index, dim_size=4)
    assert torch.equal(out[[1, 3]], torch.zeros(2, 6))

    aggr = LCMAggregation(4, 6, learn_identity=True)
    with torch.no_grad():
        aggr.identity.copy_(torch.arange(6.0))
    out = aggr(x, index, dim_size=4)
    assert torch.equal(out[[1, 3]], torch.arange(6.0).expand(2, 6))
    out.sum().backward()
    assert torch.equal(aggr.identity.grad, torch.full((6,), 2.0))

    nothing = aggr(torch.randn(0, 4), torch.zeros(0, dtype=torch.long), dim_size=3)
    assert torch.equal(nothing, torch.arange(6.0).expand(3, 6))


@pytest.mark.parametrize("operator", ["gru", "mlp"])
@pytest.mark.parametrize("chunk_size", [None, 2])
def test_gradcheck(operator, chunk_size):
    aggr = LCMAggregation(3, 4, operator=operator, learn_identity=True,
                          chunk_size=chunk_size).double()
    index = torch.tensor([4, 0, 0, 2, 0, 2, 0, 0, 2, 3])  # degrees 6, 0, 3, 1, 1
    x = torch.randn(10, 3, dtype=torch.double, requires_grad=True)
    params = list(aggr.parameters())
    assert torch.autograd.gradcheck(
        lambda x, *_: aggr(x, index, dim_size=5), (x, *params), eps=1e-6, atol=1e-5, fast_mode=True)


def test_chunked_recomputation_equals_single_call():
    aggr = LCMAggregation(8, 16, chunk_size=None)
    index = random_graph_index(20, torch.randint(0, 30, (20,)))
    x = torch.randn(index.numel(), 8, requires_grad=True)
    out = aggr(x, index, dim_size=20)
    grads = torch.autograd.grad(out.square().sum(), [x, *aggr.parameters()])
    aggr.chunk_size = 7
    out_chunked = aggr(x, index, dim_size=20)
    grads_chunked = torch.autograd.grad(out_chunked.square().sum(), [x, *aggr.parameters()])
    torch.testing.assert_close(out_chunked, out, atol=1e-6, rtol=0)
    for g, g_chunked in zip(grads, grads_chunked, strict=True):
        torch.testing.assert_close(g_chunked, g, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("operator", ["gru", "mlp"])
def test_operator_is_commutative(operator):
    aggr = LCMAggregation(5, 5, operator=operator)
    a, b = torch.randn(2, 7, 5)
    torch.testing.assert_close(aggr.combine(a, b), aggr.combine(b, a), atol=1e-6, rtol=0)


def test_associativity_loss():
    x = torch.randn(50, 6)
    assert LCMAggregation(6, 6, operator=elementwise_max).associativity_loss(x) == 0
    aggr = LCMAggregation(6, 6)
    loss = aggr.associativity_loss(x, num_triples=64)
    assert loss > 0
    loss.backward()
    assert aggr.gru_cell.weight_hh.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="num_triples"):
        aggr.associativity_loss(x, num_triples=0)
    with pytest.raises(ValueError, match="`x` must have shape"):
        aggr.associativity_loss(torch.randn(5, 3))


def test_as_message_passing_aggr_with_unsorted_edges():
    class Neighbours(MessagePassing):
        def forward(self, x, edge_index):
            return self.propagate(edge_index, x=x)

    aggr = LCMAggregation(8, 8)
    conv = Neighbours(aggr=aggr)
    edge_index = torch.randint(0, 10, (2, 60))
    x = torch.randn(10, 8)
    out = conv(x, edge_index)
    expected = aggr(x[edge_index[0]], edge_index[1], dim_size=10)
    assert torch.equal(out, expected)


def test_validation_errors():
    with pytest.raises(ValueError, match="must be projected"):
        LCMAggregation(4, 8, project=False)
    with pytest.raises(ValueError, match="`operator`"):
        LCMAggregation(4, 4, operator="lstm")
    with pytest.raises(TypeError, match="`operator`"):
        LCMAggregation(4, 4, operator=3)
    with pytest.raises(ValueError, match="`chunk_size`"):
        LCMAggregation(4, 4, chunk_size=0)
    with pytest.raises(ValueError, match="`in_channels`"):
        LCMAggregation(0, 4)
    aggr = LCMAggregation(4, 4)
    with pytest.raises(ValueError, match="two-dimensional"):
        aggr(torch.randn(2, 3, 4), torch.tensor([0, 1, 1]), dim=1)
    with pytest.raises(ValueError, match="in_channels"):
        aggr(torch.randn(3, 5), torch.tensor([0, 1, 1]))
    with pytest.raises(TypeError, match="`index`"):
        aggr(torch.randn(3, 4), torch.tensor([0.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="`index`"):
        aggr(torch.randn(3, 4), torch.tensor([0, 1, 5]), dim_size=2)
    with pytest.raises(ValueError, match="`ptr`"):
        aggr(torch.randn(3, 4), ptr=torch.tensor([0, 2, 1, 3]))
