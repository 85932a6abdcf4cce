"""The synthetic sets: deterministic, balanced, generated without any file."""
import torch

from pyg_agg.datasets import dataset_spec
from pyg_agg.datasets.synthetic import block_model_nodes, degree_graphs


def test_degree_graphs_are_deterministic_and_balanced(tmp_path):
    spec = dataset_spec("synthetic-degree")
    first, second = degree_graphs(spec, tmp_path), degree_graphs(spec, tmp_path)
    assert len(first.dataset) == 600 and first.level == "graph"
    assert torch.equal(first.dataset[5].edge_index, second.dataset[5].edge_index)
    labels = torch.cat([g.y for g in first.dataset])
    assert abs(int(labels.sum()) - 300) <= 1  # split at the median mean degree
    assert [first.split[s].numel() for s in ("train", "valid", "test")] == [480, 60, 60]


def test_degree_graphs_leave_the_global_generator_alone(tmp_path):
    state = torch.get_rng_state()
    degree_graphs(dataset_spec("synthetic-degree"), tmp_path, num_graphs=10)
    assert torch.equal(torch.get_rng_state(), state)


def test_block_model_nodes_have_four_classes_and_symmetric_edges(tmp_path):
    task = block_model_nodes(dataset_spec("synthetic-sbm"), tmp_path)
    data = task.dataset
    assert (data.num_nodes, task.num_features, task.num_outputs) == (400, 16, 4)
    pairs = set(map(tuple, data.edge_index.t().tolist()))
    assert all((j, i) in pairs for i, j in pairs)
