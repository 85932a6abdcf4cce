"""The PNA paper's synthetic multitask benchmark (graph-theory targets).

The generator follows the paper's code (Corso et al., NeurIPS 2020,
``multitask_benchmark/datasets_generation``): graph families drawn with the
paper's probabilities, node order shuffled, the paper's edge noise
(:func:`randomize_edges`), graphs with an isolated node redrawn, and the splits made of equal-size groups of graphs with
the same number of nodes.
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Optional

import networkx as nx
import numpy as np
import torch
from torch_geometric.data import Data, InMemoryDataset

#: The paper's mixture of graph families.
FAMILY_PROBABILITIES = {"erdos_renyi": 0.2, "barabasi_albert": 0.2, "grid": 0.05,
                        "caveman": 0.05, "tree": 0.15, "ladder": 0.05, "line": 0.05,
                        "star": 0.05, "caterpillar": 0.1, "lobster": 0.1}
FAMILIES = tuple(FAMILY_PROBABILITIES)
NODE_TASKS = ("shortest_path", "eccentricity", "laplacian")
GRAPH_TASKS = ("connected", "diameter", "spectral_radius")
#: Per split: graphs per size, default sizes (inclusive), seed stream. The paper's
#: validation and test sets use the first five of the training sizes.
SPLITS = {"train": (512, (15, 24), 0), "val": (128, (15, 19), 1), "test": (256, (15, 19), 2)}
#: Test sizes with ``extrapolation=True``: the span of the paper's extrapolation sets.
EXTRAPOLATION_SIZES = (20, 49)
NORMALIZATIONS = ("max", "standard", None)
#: Chance of an existing edge to be kept by :func:`randomize_edges` (the paper's ``BASE_P``).
KEEP_EDGE = 0.9


def _path_with_pendants(n: int, spine: int, attach: list[tuple[int, int]],
                        rng: np.random.Generator) -> nx.Graph:
    """A path over nodes ``0..spine-1``; node ``v`` of each ``(start, stop)`` range of
    ``attach`` is joined to a random node of the range before it (the spine first)."""
    graph = nx.path_graph(spine)
    graph.add_nodes_from(range(n))
    low, high = 0, spine
    for start, stop in attach:
        for node in range(start, stop):
            graph.add_edge(node, int(rng.integers(low, high)))
        low, high = start, stop
    return graph


def _balanced_divisor(n: int) -> int:
    """The largest divisor of ``n`` not above its square root."""
    return max(d for d in range(1, math.isqrt(n) + 1) if n % d == 0)


def family_graph(family: str, n: int, rng: np.random.Generator) -> nx.Graph:
    """A graph with exactly ``n`` nodes (labelled ``0..n-1``) from ``family``, with
    the paper's parameters."""
    seed = int(rng.integers(2**31))
    if family == "erdos_renyi":  # average degree ~ U[0, n)
        graph = nx.fast_gnp_random_graph(n, float(rng.uniform()), seed=seed)
    elif family == "barabasi_albert":
        graph = nx.barabasi_albert_graph(n, int(rng.integers(1, n)), seed=seed)
    elif family == "grid":
        rows = _balanced_divisor(n)
        graph = nx.grid_2d_graph(rows, n // rows)
    elif family == "caveman":  # disjoint cliques, as many and as large as possible
        caves = _balanced_divisor(n)
        graph = nx.caveman_graph(caves, n // caves)
    elif family == "tree":
        graph = None
        while graph is None:  # redrawn when networkx finds no power-law degree sequence
            try:
                graph = nx.random_powerlaw_tree(n, seed=seed, tries=10_000)
            except nx.NetworkXError:
                seed = int(rng.integers(2**31))
    elif family == "ladder":
        graph = nx.ladder_graph(n // 2)
        if n % 2:
            graph.add_edge(0, n - 1)
    elif family == "line":
        graph = nx.path_graph(n)
    elif family == "star":
        graph = nx.star_graph(n - 1)
    elif family == "caterpillar":
        spine = int(rng.integers(1, n))
        graph = _path_with_pendants(n, spine, [(spine, n)], rng)
    elif family == "lobster":
        spine = int(rng.integers(1, n))
        legs_end = int(rng.integers(spine + 1, n + 1))
        graph = _path_with_pendants(n, spine, [(spine, legs_end), (legs_end, n)], rng)
    else:
        raise ValueError(f"Unknown graph family {family!r}: expected one of {FAMILIES}")
    return nx.convert_node_labels_to_integers(graph)


def randomize_edges(adjacency: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The paper's edge noise. With ``s = u + u^T``, ``u ~ U[0, 0.5]`` per ordered
    pair, an edge stays where ``s < keep`` and an absent pair appears where
    ``s < appear``; ``keep = KEEP_EDGE`` (more when the graph is dense) and
    ``appear`` is set as if ``s`` were uniform, to keep the number of edges. ``s``
    is triangular on ``[0, 1]``, so an edge of a sparse graph stays with
    probability 0.98 and few pairs appear: the noise is weaker than the paper's
    comment says, and reproduced as its code draws it. Symmetric, no self-loops."""
    n = adjacency.shape[0]
    edges = adjacency.sum() / 2
    non_edges = n * (n - 1) / 2 - edges
    if edges <= non_edges:
        keep, appear = KEEP_EDGE, (1 - KEEP_EDGE) * edges / non_edges
    else:
        keep, appear = KEEP_EDGE + (1 - KEEP_EDGE) * (edges - non_edges) / edges, 1 - KEEP_EDGE
    noise = rng.uniform(0, 0.5, size=(n, n))
    noise = noise + noise.T  # symmetric, in [0, 1)
    off_diagonal = 1 - np.eye(n)
    return ((noise < keep) * adjacency + (noise < appear) * (1 - adjacency) * off_diagonal)


def graph_targets(graph: nx.Graph, features: np.ndarray,
                  source: int) -> tuple[np.ndarray, np.ndarray]:
    """The six raw targets, as the paper computes them: per node ``[N, 3]`` and per
    graph ``[3]``.

    Unreachable nodes get shortest-path length 0; eccentricity and diameter are
    taken within connected components.
    """
    n = graph.number_of_nodes()
    lengths = nx.single_source_shortest_path_length(graph, source)
    shortest = np.array([lengths.get(v, 0) for v in range(n)], dtype=np.float64)
    eccentricity = np.zeros(n)
    for component in nx.connected_components(graph):
        for v, e in nx.eccentricity(graph.subgraph(component)).items():
            eccentricity[v] = e
    laplacian = nx.laplacian_matrix(graph, nodelist=range(n)).toarray() @ features
    adjacency = nx.to_numpy_array(graph, nodelist=range(n))
    spectral_radius = float(np.abs(np.linalg.eigvalsh(adjacency)).max())
    node = np.stack([shortest, eccentricity, laplacian], axis=1)
    return node, np.array([float(nx.is_connected(graph)), eccentricity.max(), spectral_radius])


def generate_graph(n: int, rng: np.random.Generator) -> Data:
    """One raw (unnormalised) example with ``n`` nodes and no isolated node."""
    family = FAMILIES[int(rng.choice(len(FAMILIES), p=list(FAMILY_PROBABILITIES.values())))]
    adjacency = None
    while adjacency is None or adjacency.max(axis=0).min() == 0:  # redraw isolated nodes
        order = rng.permutation(n)
        adjacency = nx.to_numpy_array(family_graph(family, n, rng), nodelist=order.tolist())
        adjacency = randomize_edges(adjacency, rng)
    graph = nx.from_numpy_array(adjacency)
    features = rng.uniform(0, 1, n)
    source = int(rng.integers(n))
    node, whole = graph_targets(graph, features, source)
    edge_index = torch.from_numpy(np.stack(np.nonzero(adjacency)).astype(np.int64))
    one_hot = np.zeros(n)
    one_hot[source] = 1
    x = torch.tensor(np.stack([one_hot, features], axis=1), dtype=torch.float)
    return Data(x=x, edge_index=edge_index, num_nodes=n, family=family,
                y_node=torch.tensor(node, dtype=torch.float),
                y_graph=torch.tensor(whole, dtype=torch.float).view(1, 3))


def graphs_per_size(num_graphs: int, sizes: tuple[int, int]) -> dict[int, int]:
    """``num_graphs`` spread over the sizes ``sizes[0]..sizes[1]``, the first sizes
    taking the remainder."""
    count = sizes[1] - sizes[0] + 1
    return {n: num_graphs // count + (i < num_graphs % count)
            for i, n in enumerate(range(sizes[0], sizes[1] + 1))}


@lru_cache(maxsize=16)
def _generate_split(num_graphs: int, sizes: tuple[int, int], seed: int,
                    stream: int) -> tuple[Data, ...]:
    rng = np.random.default_rng([seed, stream, *sizes])
    return tuple(generate_graph(n, rng)
                 for n, count in graphs_per_size(num_graphs, sizes).items()
                 for _ in range(count))


class PNAMultitask(InMemoryDataset):
    r"""The multitask graph-theory benchmark of `"Principal Neighbourhood
    Aggregation for Graph Nets" <https://arxiv.org/abs/2004.05718>`_
    (Corso et al., NeurIPS 2020), generated with networkx as in the paper's code.

    Each graph comes from one of ten families, with the paper's probabilities:
    Erdős–Rényi 0.2, Barabási–Albert 0.2, power-law tree 0.15, caterpillar
    and lobster 0.1 each, grid, caveman, ladder, line and star 0.05 each. Its
    nodes are shuffled, then edges are toggled at random as in the paper's code
    (:func:`randomize_edges`: an edge stays with probability about 0.98, few
    pairs are added); a graph with an isolated node is drawn again. Node features ``x``
    are ``[s, u]`` with ``s`` a one-hot of a random source node and
    :math:`u \sim U[0, 1]`. Targets:

    * ``y_node`` ``[N, 3]``: shortest-path length from the source (0 if
      unreachable), eccentricity (within the node's connected component),
      Laplacian features :math:`L u`;
    * ``y_graph`` ``[1, 3]``: is connected (0/1), diameter (largest over
      components), spectral radius of the adjacency matrix.

    A split holds ``num_graphs`` graphs spread evenly over the sizes (the
    paper: 512 training graphs of each size 15–24, 128 validation and 256 test
    graphs of each size 15–19), ordered by size.

    ``normalize="max"`` (the paper's) divides every target by its maximum over
    the **training** split of the same seed (``target_max``);
    ``normalize="standard"`` standardises it with the training mean and standard
    deviation (``target_mean``, ``target_std``); ``None`` keeps the raw values.
    The statistics are in the order ``NODE_TASKS + GRAPH_TASKS``.

    Args:
        split (str): ``"train"``, ``"val"`` or ``"test"``.
        num_graphs (int, optional): Graphs in this split; default the paper's
            5,120 / 640 / 1,280 (256 per size for an extrapolation test split).
        sizes (tuple, optional): Inclusive range of :math:`N`; default
            ``(15, 24)`` for training, ``(15, 19)`` for validation and test, or
            ``(20, 49)`` for the test split when ``extrapolation=True``.
        extrapolation (bool): Test on larger graphs than trained on.
        num_train_graphs (int, optional): Size of the training split the
            normalisation statistics come from (default 5,120).
        seed (int): Base seed; each split and size range draws from its own stream.
        normalize (str, optional): ``"max"``, ``"standard"`` or ``None`` (see above).
    """

    def __init__(self, split: str = "train", num_graphs: Optional[int] = None,
                 sizes: Optional[tuple[int, int]] = None, extrapolation: bool = False,
                 num_train_graphs: Optional[int] = None, seed: int = 0,
                 normalize: Optional[str] = "max"):
        if split not in SPLITS:
            raise ValueError(f"`split` must be one of {tuple(SPLITS)}, got {split!r}")
        if normalize not in NORMALIZATIONS:
            raise ValueError(f"`normalize` must be one of {NORMALIZATIONS}, got {normalize!r}")
        per_size, default_sizes, stream = SPLITS[split]
        if sizes is None:
            sizes = EXTRAPOLATION_SIZES if extrapolation and split == "test" else default_sizes
        if not (len(sizes) == 2 and 2 <= sizes[0] <= sizes[1]):
            raise ValueError(f"`sizes` must be (min_nodes, max_nodes) with 2 <= min <= max, "
                             f"got {sizes}")
        num_graphs = per_size * (sizes[1] - sizes[0] + 1) if num_graphs is None else num_graphs
        if num_graphs < 1:
            raise ValueError(f"`num_graphs` must be positive, got {num_graphs}")
        train_per_size, train_sizes, train_stream = SPLITS["train"]
        if num_train_graphs is None:
            num_train_graphs = train_per_size * (train_sizes[1] - train_sizes[0] + 1)
        if num_train_graphs < 1:
            raise ValueError(f"`num_train_graphs` must be positive, got {num_train_graphs}")
        super().__init__(None)
        self.split, self.sizes, self.normalize = split, tuple(sizes), normalize
        graphs = [g.clone() for g in _generate_split(num_graphs, tuple(sizes), seed, stream)]
        train = _generate_split(num_train_graphs, train_sizes, seed, train_stream)
        node = torch.cat([g.y_node for g in train])
        whole = torch.cat([g.y_graph for g in train])
        self.target_max = torch.cat([node.max(0).values, whole.max(0).values])
        self.target_mean = torch.cat([node.mean(0), whole.mean(0)])
        self.target_std = torch.cat([node.std(0), whole.std(0)]).clamp(min=1e-6)
        if normalize is not None:
            shift = self.target_mean if normalize == "standard" else torch.zeros(6)
            scale = self.target_std if normalize == "standard" else self.target_max
            for g in graphs:
                g.y_node = (g.y_node - shift[:3]) / scale[:3]
                g.y_graph = (g.y_graph - shift[3:]) / scale[3:]
        self.data, self.slices = self.collate(graphs)

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({len(self)}, split={self.split!r}, "
                f"sizes={self.sizes})")
