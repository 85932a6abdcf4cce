import networkx as nx
import numpy as np
import pytest
import torch

from pyg_agg.datasets import PNAMultitask
from pyg_agg.datasets.pna_multitask import FAMILIES, family_graph


@pytest.fixture(scope="module")
def raw():
    return PNAMultitask("val", num_graphs=40, num_train_graphs=40, normalize=False, seed=3)


def test_targets_match_networkx(raw):
    for data in raw[:25]:
        n = data.num_nodes
        graph = nx.Graph()
        graph.add_nodes_from(range(n))
        graph.add_edges_from(data.edge_index.t().tolist())
        source = int(data.x[:, 1].argmax())
        assert float(data.x[:, 1].sum()) == 1.0
        dist = dict(nx.all_pairs_shortest_path_length(graph))
        shortest = [dist[source].get(v, n) for v in range(n)]
        eccentricity = [max(dist[v].values()) for v in range(n)]
        adjacency = np.zeros((n, n))
        adjacency[data.edge_index[0].numpy(), data.edge_index[1].numpy()] = 1
        laplacian = (np.diag(adjacency.sum(1)) - adjacency) @ data.x[:, 0].double().numpy()
        spectral_radius = max(abs(np.linalg.eigvals(adjacency)))
        expected_node = np.stack([shortest, eccentricity, laplacian], axis=1)
        np.testing.assert_allclose(data.y_node.numpy(), expected_node, atol=1e-4)
        expected_graph = [nx.number_connected_components(graph) == 1,
                          max(eccentricity), spectral_radius]
        np.testing.assert_allclose(data.y_graph[0].numpy(), expected_graph, atol=1e-4)


def test_graphs_are_simple_undirected_and_sized(raw):
    for data in raw:
        assert 15 <= data.num_nodes <= 24 and data.x.shape == (data.num_nodes, 2)
        edges = set(map(tuple, data.edge_index.t().tolist()))
        assert all((b, a) in edges and a != b for a, b in edges)
        assert len(edges) == data.edge_index.size(1)


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_has_exactly_n_nodes(family):
    rng = np.random.default_rng(0)
    for n in (15, 17, 24):
        assert family_graph(family, n, rng).number_of_nodes() == n


def test_seeded_normalised_and_extrapolation():
    a = PNAMultitask("test", num_graphs=6, num_train_graphs=30, seed=1)
    b = PNAMultitask("test", num_graphs=6, num_train_graphs=30, seed=1)
    raw = PNAMultitask("test", num_graphs=6, num_train_graphs=30, seed=1, normalize=False)
    torch.testing.assert_close(a.y_node, b.y_node)
    torch.testing.assert_close(a.y_node * a.target_std[:3] + a.target_mean[:3], raw.y_node)
    train = PNAMultitask("train", num_graphs=30, num_train_graphs=30, seed=1)
    torch.testing.assert_close(train.y_graph.mean(0), torch.zeros(3), atol=1e-5, rtol=0)
    big = PNAMultitask("test", num_graphs=5, num_train_graphs=30, extrapolation=True)
    assert all(25 <= g.num_nodes <= 50 for g in big)
    with pytest.raises(ValueError, match="`split`"):
        PNAMultitask("dev")
