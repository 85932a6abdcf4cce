"""The PNA paper's synthetic multitask benchmark (graph-theory targets)."""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Optional

import networkx as nx
import numpy as np
import torch
from torch_geometric.data import Data, InMemoryDataset

FAMILIES = ("erdos_renyi", "barabasi_albert", "grid", "caveman", "tree", "ladder", "line",
            "star", "caterpillar", "lobster")
NODE_TASKS = ("shortest_path", "eccentricity", "laplacian")
GRAPH_TASKS = ("connected", "diameter", "spectral_radius")
SPLITS = {"train": (5120, 0), "val": (640, 1), "test": (1280, 2)}


def _attach_legs(graph: nx.Graph, anchors: list[int], count: int,
                 rng: np.random.Generator) -> list[int]:
    """Adds ``count`` new nodes, each joined to a random anchor; returns them."""
    new = list(range(graph.number_of_nodes(), graph.number_of_nodes() + count))
    for node in new:
        graph.add_edge(node, int(rng.choice(anchors)))
    return new


def family_graph(family: str, n: int, rng: np.random.Generator) -> nx.Graph:
    """A graph with exactly ``n`` nodes (labelled ``0..n-1``) from ``family``."""
    seed = int(rng.integers(2**31))
    if family == "erdos_renyi":
        graph = nx.gnp_random_graph(n, float(rng.uniform(0.1, 0.4)), seed=seed)
    elif family == "barabasi_albert":
        graph = nx.barabasi_albert_graph(n, int(rng.integers(1, 4)), seed=seed)
    elif family == "grid":
        rows = max(d for d in range(1, int(math.isqrt(n)) + 1) if n % d == 0)
        graph = nx.grid_2d_graph(rows, n // rows)
    elif family == "caveman":
        cliques = int(rng.integers(2, 5))
        sizes = [n // cliques + (i < n % cliques) for i in range(cliques)]
        graph = nx.disjoint_union_all([nx.complete_graph(s) for s in sizes])
        starts = np.cumsum([0] + sizes[:-1])
        for a, b in zip(starts, np.roll(starts, -1), strict=True):
            graph.add_edge(int(a), int(b) + 1 if b + 1 < n else int(b))  # ring of caves
    elif family == "tree":
        try:
            graph = nx.random_powerlaw_tree(n, gamma=3, seed=seed, tries=n * 1000)
        except nx.NetworkXError:  # no power-law degree sequence found
            graph = nx.random_labeled_tree(n, seed=seed)
    elif family == "ladder":
        graph = nx.ladder_graph(n // 2)
        if n % 2:
            graph.add_edge(n - 1, n - 2)
    elif family == "line":
        graph = nx.path_graph(n)
    elif family == "star":
        graph = nx.star_graph(n - 1)
    elif family in ("caterpillar", "lobster"):
        spine = int(rng.integers(max(2, n // 4), max(3, n // 2) + 1))
        graph = nx.path_graph(spine)
        if family == "caterpillar":
            _attach_legs(graph, list(range(spine)), n - spine, rng)
        else:
            legs = (n - spine + 1) // 2
            legs = _attach_legs(graph, list(range(spine)), legs, rng)
            _attach_legs(graph, legs, n - spine - len(legs), rng)
    else:
        raise ValueError(f"Unknown graph family {family!r}: expected one of {FAMILIES}")
    graph = nx.convert_node_labels_to_integers(graph)
    graph.add_nodes_from(range(n))
    return graph


def toggle_edges(graph: nx.Graph, count: int, rng: np.random.Generator) -> nx.Graph:
    """Toggles ``count`` distinct random node pairs (adds the edge if absent,
    removes it if present)."""
    n = graph.number_of_nodes()
    pairs: set[tuple[int, int]] = set()
    while len(pairs) < min(count, n * (n - 1) // 2):
        a, b = sorted(int(v) for v in rng.choice(n, 2, replace=False))
        pairs.add((a, b))
    for a, b in sorted(pairs):
        if graph.has_edge(a, b):
            graph.remove_edge(a, b)
        else:
            graph.add_edge(a, b)
    return graph


def graph_targets(graph: nx.Graph, features: np.ndarray,
                  source: int) -> tuple[np.ndarray, np.ndarray]:
    """The six raw targets: per node ``[N, 3]`` and per graph ``[3]``.

    Unreachable nodes get shortest-path length ``N``; eccentricity and
    diameter are taken within connected components.
    """
    n = graph.number_of_nodes()
    lengths = nx.single_source_shortest_path_length(graph, source)
    shortest = np.array([lengths.get(v, n) for v in range(n)], dtype=np.float64)
    eccentricity = np.zeros(n)
    diameter = 0
    for component in nx.connected_components(graph):
        ecc = nx.eccentricity(graph.subgraph(component))
        for v, e in ecc.items():
            eccentricity[v] = e
        diameter = max(diameter, max(ecc.values()))
    laplacian = nx.laplacian_matrix(graph, nodelist=range(n)).toarray() @ features
    adjacency = nx.to_numpy_array(graph, nodelist=range(n))
    spectral_radius = float(np.abs(np.linalg.eigvalsh(adjacency)).max())
    node = np.stack([shortest, eccentricity, laplacian], axis=1)
    return node, np.array([float(nx.is_connected(graph)), diameter, spectral_radius])


def generate_graph(n: int, rng: np.random.Generator, toggle_fraction: float) -> Data:
    """One raw (unnormalised) example with ``n`` nodes."""
    family = FAMILIES[int(rng.integers(len(FAMILIES)))]
    graph = family_graph(family, n, rng)
    graph = toggle_edges(graph, max(1, round(toggle_fraction * n)), rng)
    features = rng.uniform(0, 1, n)
    source = int(rng.integers(n))
    node, whole = graph_targets(graph, features, source)
    edges = np.array(list(graph.edges()), dtype=np.int64).reshape(-1, 2).T
    edge_index = torch.from_numpy(np.concatenate([edges, edges[::-1]], axis=1).copy())
    one_hot = np.zeros(n)
    one_hot[source] = 1
    x = torch.tensor(np.stack([features, one_hot], axis=1), dtype=torch.float)
    return Data(x=x, edge_index=edge_index, num_nodes=n, family=family,
                y_node=torch.tensor(node, dtype=torch.float),
                y_graph=torch.tensor(whole, dtype=torch.float).view(1, 3))


@lru_cache(maxsize=8)
def _generate_split(num_graphs: int, sizes: tuple[int, int], seed: int,
                    toggle_fraction: float) -> tuple[Data, ...]:
    rng = np.random.default_rng(seed)
    return tuple(generate_graph(int(rng.integers(sizes[0], sizes[1] + 1)), rng, toggle_fraction)
                 for _ in range(num_graphs))


class PNAMultitask(InMemoryDataset):
    r"""The multitask graph-theory benchmark of `"Principal Neighbourhood
    Aggregation for Graph Nets" <https://arxiv.org/abs/2004.05718>`_
    (Corso et al., NeurIPS 2020), generated with networkx.

    Each graph has :math:`N` nodes drawn uniformly from ``sizes`` and comes
    from one of ten families (Erdős–Rényi, Barabási–Albert, grid, caveman,
    power-law tree, ladder, line, star, caterpillar, lobster), after which
    ``round(toggle_fraction * N)`` random node pairs are toggled. Node
    features ``x`` are ``[u, s]`` with :math:`u \sim U[0, 1]` and ``s`` a
    one-hot of a random source node. Targets:

    * ``y_node`` ``[N, 3]``: single-source shortest-path length from the
      source (``N`` if unreachable), eccentricity (within the node's
      connected component), Laplacian features :math:`L u`;
    * ``y_graph`` ``[1, 3]``: is connected (0/1), diameter (largest over
      components), spectral radius of the adjacency matrix.

    With ``normalize=True`` every target is standardised with the mean and
    standard deviation of the **training** split of the same configuration
    (``target_mean``/``target_std``, order ``NODE_TASKS + GRAPH_TASKS``).

    Args:
        split (str): ``"train"``, ``"val"`` or ``"test"``.
        num_graphs (int, optional): Graphs in this split; default the paper's
            5,120 / 640 / 1,280.
        sizes (tuple, optional): Inclusive range of :math:`N`; default
            ``(15, 24)``, or ``(25, 50)`` for the test split when
            ``extrapolation=True``.
        extrapolation (bool): Test on larger graphs than trained on.
        num_train_graphs (int, optional): Size of the training split the
            normalisation statistics come from (default 5,120).
        seed (int): Base seed; each split draws from its own stream.
        toggle_fraction (float): Toggled pairs per node.
        normalize (bool): Standardise the targets (see above).
    """

    def __init__(self, split: str = "train", num_graphs: Optional[int] = None,
                 sizes: Optional[tuple[int, int]] = None, extrapolation: bool = False,
                 num_train_graphs: Optional[int] = None, seed: int = 0,
                 toggle_fraction: float = 0.1, normalize: bool = True):
        if split not in SPLITS:
            raise ValueError(f"`split` must be one of {tuple(SPLITS)}, got {split!r}")
        default_count, stream = SPLITS[split]
        num_graphs = default_count if num_graphs is None else num_graphs
        if sizes is None:
            sizes = (25, 50) if extrapolation and split == "test" else (15, 24)
        if not (len(sizes) == 2 and 2 <= sizes[0] <= sizes[1]):
            raise ValueError(f"`sizes` must be (min_nodes, max_nodes) with 2 <= min <= max, "
                             f"got {sizes}")
        if num_graphs < 1:
            raise ValueError(f"`num_graphs` must be positive, got {num_graphs}")
        super().__init__(None)
        self.split, self.sizes, self.normalize = split, tuple(sizes), normalize
        graphs = [g.clone() for g in _generate_split(num_graphs, tuple(sizes),
                                                     seed * 3 + stream, toggle_fraction)]
        train_count = SPLITS["train"][0] if num_train_graphs is None else num_train_graphs
        train = _generate_split(train_count, (15, 24), seed * 3, toggle_fraction)
        node = torch.cat([g.y_node for g in train])
        whole = torch.cat([g.y_graph for g in train])
        self.target_mean = torch.cat([node.mean(0), whole.mean(0)])
        self.target_std = torch.cat([node.std(0), whole.std(0)]).clamp(min=1e-6)
        if normalize:
            for g in graphs:
                g.y_node = (g.y_node - self.target_mean[:3]) / self.target_std[:3]
                g.y_graph = (g.y_graph - self.target_mean[3:]) / self.target_std[3:]
        self.data, self.slices = self.collate(graphs)

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({len(self)}, split={self.split!r}, "
                f"sizes={self.sizes})")
