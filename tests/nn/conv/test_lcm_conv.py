import pytest
import torch

from pyg_agg.nn import LCMAggregation, LCMConv


def test_equals_gin_update_around_lcm_aggregation():
    conv = LCMConv(8, 16, eps=0.5)
    assert isinstance(conv.aggr_module, LCMAggregation)
    assert repr(conv) == "LCMConv(8, 16, aggr=LCMAggregation(8, 8, project=True))"
    x = torch.randn(10, 8)
    edge_index = torch.randint(0, 10, (2, 50))
    aggregated = conv.aggr_module(x[edge_index[0]], edge_index[1], dim_size=10)
    assert torch.equal(conv(x, edge_index), conv.nn(aggregated + 1.5 * x))


def test_output_follows_per_node_order_not_global_edge_order():
    conv = LCMConv(4, 6)
    x = torch.randn(12, 4)
    edge_index = torch.randint(0, 12, (2, 70))
    # Sorting edges by destination keeps each node's own message order.
    sorted_index = edge_index[:, torch.argsort(edge_index[1], stable=True)]
    assert torch.equal(conv(x, edge_index), conv(x, sorted_index))


def test_exactly_associative_operator_is_permutation_invariant():
    conv = LCMConv(4, 6, project=False, operator=torch.maximum)
    x = torch.randn(12, 4)
    edge_index = torch.randint(0, 12, (2, 70))
    shuffled = edge_index[:, torch.randperm(70)]
    assert torch.equal(conv(x, edge_index), conv(x, shuffled))


def test_bipartite_isolated_nodes_and_gradients():
    conv = LCMConv(4, 5, train_eps=True, learn_identity=True)
    x_src, x_dst = torch.randn(6, 4), torch.randn(3, 4)
    edge_index = torch.tensor([[0, 1, 2, 3, 5], [0, 0, 0, 2, 2]])  # node 1 is isolated
    out = conv((x_src, x_dst), edge_index)
    assert out.shape == (3, 5)
    identity = conv.aggr_module.identity
    torch.testing.assert_close(out[1], conv.nn(identity + (1 + conv.eps) * x_dst[1]))
    out.sum().backward()
    assert all(p.grad is not None for p in conv.parameters())


def test_validation():
    with pytest.raises(ValueError, match="`aggr`"):
        LCMConv(4, 4, aggr="add")
    with pytest.raises(ValueError, match="`out_channels`"):
        LCMConv(4, 0)
    with pytest.raises(ValueError, match="`operator`"):
        LCMConv(4, 4, operator="sum")
