"""Synthetic sets generated in memory, for quick runs without any data root."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from pyg_agg.datasets.task import TaskData, accuracy, random_split

if TYPE_CHECKING:
    from pyg_agg.datasets.registry import DatasetSpec


def degree_graphs(spec: DatasetSpec, root: Path, num_graphs: int = 600,
                  seed: int = 0) -> TaskData:
    """Random graphs with constant features; label: is the mean degree above the median?

    Constant inputs make the label invisible to mean/max aggregation alone: a model
    has to count neighbours (sum aggregation or degree scalers), which is exactly
    where the aggregators of this library differ. ``root`` is unused.
    """
    from torch_geometric.data import Data, InMemoryDataset
    from torch_geometric.utils import erdos_renyi_graph

    gen = torch.Generator().manual_seed(seed)
    torch_state = torch.get_rng_state()
    torch.manual_seed(seed)  # erdos_renyi_graph draws from the global generator
    graphs, mean_deg = [], []
    for _ in range(num_graphs):
        n = int(torch.randint(10, 31, (1,), generator=gen))
        p = float(torch.empty(1).uniform_(0.1, 0.3, generator=gen))
        edge_index = erdos_renyi_graph(n, p)
        graphs.append(Data(x=torch.ones(n, 1), edge_index=edge_index, num_nodes=n))
        mean_deg.append(edge_index.size(1) / n)
    torch.set_rng_state(torch_state)
    median = float(np.median(mean_deg))
    for g, d in zip(graphs, mean_deg, strict=True):
        g.y = torch.tensor([int(d > median)])

    class _Graphs(InMemoryDataset):
        def __init__(self) -> None:
            super().__init__()
            self.data, self.slices = self.collate(graphs)

    return TaskData(spec=spec, dataset=_Graphs(), split=random_split(num_graphs),
                    num_features=1, num_outputs=2, evaluate=accuracy)


def block_model_nodes(spec: DatasetSpec, root: Path, num_nodes: int = 400,
                      seed: int = 0) -> TaskData:
    """Stochastic block model, 4 classes, noisy Gaussian features centred on the class.
    ``root`` is unused."""
    from torch_geometric.data import Data

    gen = torch.Generator().manual_seed(seed)
    classes, dim = 4, 16
    y = torch.arange(num_nodes) % classes
    same = y.view(-1, 1) == y.view(1, -1)
    prob = torch.where(same, torch.tensor(0.05), torch.tensor(0.005))
    adj = torch.rand(num_nodes, num_nodes, generator=gen) < prob
    adj = torch.triu(adj, diagonal=1)
    edge_index = adj.nonzero().t()
    edge_index = torch.cat([edge_index, edge_index.flip(0)], dim=1)
    centres = torch.randn(classes, dim, generator=gen)
    x = centres[y] + 2.0 * torch.randn(num_nodes, dim, generator=gen)
    data = Data(x=x, edge_index=edge_index, y=y, num_nodes=num_nodes)
    return TaskData(spec=spec, dataset=data, split=random_split(num_nodes),
                    num_features=dim, num_outputs=classes, evaluate=accuracy)
