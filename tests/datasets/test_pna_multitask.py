import networkx as nx
import numpy as np
import pytest
import torch

from pyg_agg.datasets import PNAMultitask
from pyg_agg.datasets.pna_multitask import (
    FAMILIES,
    family_graph,
    graphs_per_size,
    randomize_edges,
)


@pytest.fixture(scope="module")
def raw():
    return PNAMultitask("val", num_graphs=40, num_train_graphs=40, normalize=None, seed=3)


def test_targets_match_networkx(raw):
    for data in raw[:25]:
        n = data.num_nodes
        graph = nx.Graph()
        graph.add_nodes_from(range(n))
        graph.add_edges_from(data.edge_index.t().tolist())
        source = int(data.x[:, 0].argmax())
        assert float(data.x[:, 0].sum()) == 1.0
        dist = dict(nx.all_pairs_shortest_path_length(graph))
        shortest = [dist[source].get(v, 0) for v in range(n)]  # the paper's 0 if unreachable
        eccentricity = [max(dist[v].values()) for v in range(n)]
        adjacency = np.zeros((n, n))
        adjacency[data.edge_index[0].numpy(), data.edge_index[1].numpy()] = 1
        laplacian = (np.diag(adjacency.sum(1)) - adjacency) @ data.x[:, 1].double().numpy()
        spectral_radius = max(abs(np.linalg.eigvals(adjacency)))
        expected_node = np.stack([shortest, eccentricity, laplacian], axis=1)
        np.testing.assert_allclose(data.y_node.numpy(), expected_node, atol=1e-4)
        expected_graph = [nx.number_connected_components(graph) == 1,
                          max(eccentricity), spectral_radius]
        np.testing.assert_allclose(data.y_graph[0].numpy(), expected_graph, atol=1e-4)


def test_graphs_are_simple_undirected_sized_in_order_without_isolated_nodes(raw):
    assert [g.num_nodes for g in raw] == [n for n in range(15, 20) for _ in range(8)]
    for data in raw:
        assert data.x.shape == (data.num_nodes, 2)
        edges = set(map(tuple, data.edge_index.t().tolist()))
        assert all((b, a) in edges and a != b for a, b in edges)
        assert len(edges) == data.edge_index.size(1)
        assert set(data.edge_index[0].tolist()) == set(range(data.num_nodes))


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_has_exactly_n_nodes(family):
    rng = np.random.default_rng(0)
    for n in (15, 17, 24, 49):
        graph = family_graph(family, n, rng)
        assert sorted(graph.nodes) == list(range(n))


def test_edge_noise_is_the_papers_triangular_draw():
    rng = np.random.default_rng(0)
    adjacency = nx.to_numpy_array(nx.path_graph(30))
    noisy = [randomize_edges(adjacency, rng) for _ in range(400)]
    assert all((a == a.T).all() and not a.diagonal().any() for a in noisy)
    # s = u + u^T is triangular: P(s < 0.9) = 1 - 2 * 0.1**2, P(s < p) = 2 p**2 for p <= 0.5
    kept = np.mean([(a * adjacency).sum() for a in noisy]) / adjacency.sum()
    assert kept == pytest.approx(0.98, abs=0.01)
    appear = 0.1 * 29 / (30 * 29 / 2 - 29)
    added = np.mean([(a * (1 - adjacency)).sum() / 2 for a in noisy])
    assert added == pytest.approx(2 * appear**2 * (30 * 29 / 2 - 29), rel=0.3)


def test_graphs_per_size_spreads_the_remainder_over_the_first_sizes():
    assert graphs_per_size(5120, (15, 24)) == {n: 512 for n in range(15, 25)}
    assert graphs_per_size(7, (15, 17)) == {15: 3, 16: 2, 17: 2}


def test_normalisations_and_seeding():
    kwargs = dict(num_graphs=6, num_train_graphs=30, seed=1)
    a = PNAMultitask("test", **kwargs)
    b = PNAMultitask("test", **kwargs)
    raw = PNAMultitask("test", normalize=None, **kwargs)
    torch.testing.assert_close(a.y_node, b.y_node)
    torch.testing.assert_close(a.y_node * a.target_max[:3], raw.y_node)
    torch.testing.assert_close(a.y_graph * a.target_max[3:], raw.y_graph)
    train = PNAMultitask("train", num_graphs=30, num_train_graphs=30, seed=1)
    assert train.y_node.max(0).values.tolist() == [1.0, 1.0, 1.0]
    assert train.y_graph.max(0).values.tolist() == [1.0, 1.0, 1.0]
    standard = PNAMultitask("train", num_graphs=30, num_train_graphs=30, seed=1,
                            normalize="standard")
    torch.testing.assert_close(standard.y_graph.mean(0), torch.zeros(3), atol=1e-5, rtol=0)


def test_default_sizes_and_extrapolation():
    assert PNAMultitask("test", num_graphs=5, num_train_graphs=30).sizes == (15, 19)
    big = PNAMultitask("test", num_graphs=30, num_train_graphs=30, extrapolation=True)
    assert [g.num_nodes for g in big] == list(range(20, 50))


@pytest.mark.parametrize("kwargs,match", [
    (dict(split="dev"), "`split`"),
    (dict(normalize=True), r"`normalize` must be one of \('max', 'standard', None\)"),
    (dict(num_graphs=0), "`num_graphs` must be positive"),
    (dict(num_train_graphs=0), "`num_train_graphs` must be positive"),
    (dict(sizes=(5, 4)), "`sizes`"),
])
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PNAMultitask(**kwargs)
