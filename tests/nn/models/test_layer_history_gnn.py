import pytest
import torch
import torch.nn.functional as F
from torch_geometric.data import Batch, Data
from torch_geometric.loader import DataLoader
from torch_geometric.nn import GCNConv, GINConv, GINEConv

from pyg_agg.nn import HistoGraphReadout
from pyg_agg.nn.models import LayerHistoryGNN


def gin(in_channels, out_channels):
    mlp = torch.nn.Sequential(torch.nn.Linear(in_channels, out_channels), torch.nn.ReLU(),
                              torch.nn.Linear(out_channels, out_channels))
    return GINConv(mlp)


def graphs():
    """A path, a 1-node graph, an edgeless graph and a triangle."""
    edges = [[[0, 1, 1, 2], [1, 0, 2, 1]], [[], []], [[], []],
             [[0, 1, 2, 1, 2, 0], [1, 2, 0, 0, 1, 2]]]
    sizes = [3, 1, 4, 3]
    return [Data(x=torch.randn(n, 5), edge_index=torch.tensor(e, dtype=torch.long).view(2, -1),
                 y=torch.tensor([i % 2]))
            for i, (n, e) in enumerate(zip(sizes, edges, strict=True))]


def test_history_matches_manual_pyg_stack():
    convs = [gin(5, 8), GCNConv(8, 6), gin(6, 6)]
    model = LayerHistoryGNN(convs, act=F.relu, act_last=False, include_input=True)
    batch = Batch.from_data_list(graphs())
    out, history = model(batch.x, batch.edge_index)
    x, expected = batch.x, [batch.x]
    for i, conv in enumerate(convs):
        x = conv(x, batch.edge_index)
        x = x.relu() if i < 2 else x
        expected.append(x)
    assert len(history) == 4
    for got, want in zip(history, expected, strict=True):
        torch.testing.assert_close(got, want)
    torch.testing.assert_close(out, expected[-1])


def test_edge_attr_only_reaches_layers_that_take_it():
    convs = [GINEConv(torch.nn.Linear(5, 8), edge_dim=2), gin(8, 8)]
    model = LayerHistoryGNN(convs)
    data = graphs()[0]
    edge_attr = torch.randn(data.edge_index.size(1), 2)
    out, history = model(data.x, data.edge_index, edge_attr=edge_attr)
    first = convs[0](data.x, data.edge_index, edge_attr).relu()
    torch.testing.assert_close(history[0], first)
    assert out.shape == (3, 8)


def test_end_to_end_gradients_reach_every_layer():
    model = LayerHistoryGNN([gin(5, 8) if i == 0 else gin(8, 8) for i in range(3)])
    readout = HistoGraphReadout(8, 3, 2, heads=2)
    batch = Batch.from_data_list(graphs())
    _, history = model(batch.x, batch.edge_index)
    for h in history:
        h.retain_grad()
    readout(history, batch.batch).pow(2).sum().backward()
    for i, h in enumerate(history):
        assert h.grad.abs().sum() > 0, f"no gradient to layer {i}'s activations"
    for i, conv in enumerate(model.convs):
        assert any(p.grad.abs().sum() > 0 for p in conv.parameters()), f"layer {i}"


def test_frozen_cache_reproduces_end_to_end_readout():
    widths = [8, 6]
    model = LayerHistoryGNN([gin(5, 8), gin(8, 6)], dropout=0.5)
    readout = HistoGraphReadout(widths, 2, 3, hidden_channels=8).eval()
    data = graphs()
    with pytest.raises(RuntimeError, match="eval mode"):
        model.cache_history(data)
    model.freeze().train()  # train() must not undo the freeze
    assert not model.training and not any(p.requires_grad for p in model.parameters())
    cached = model.cache_history(data, batch_size=3)
    assert [c.num_nodes for c in cached] == [3, 1, 4, 3]
    assert [int(c.y) for c in cached] == [0, 1, 0, 1]
    batch = Batch.from_data_list(data)
    _, history = model(batch.x, batch.edge_index)
    expected = readout(history, batch.batch)
    loaded = next(iter(DataLoader(cached, batch_size=4)))
    got = readout(model.split_history(loaded.history), loaded.batch, size=loaded.num_graphs)
    torch.testing.assert_close(got, expected)


def test_validation():
    with pytest.raises(ValueError, match="at least one layer"):
        LayerHistoryGNN([])
    with pytest.raises(ValueError, match="`norms` has 1 entries"):
        LayerHistoryGNN([gin(5, 8), gin(8, 8)], norms=[torch.nn.BatchNorm1d(8)])
    model = LayerHistoryGNN([gin(5, 8)])
    with pytest.raises(ValueError, match="no cache_history"):
        model.split_history(torch.randn(3, 8))
    with pytest.raises(ValueError, match=r"must be \[N, 8\]"):
        model.split_history(torch.randn(3, 7), [8])
