"""The README's usage block must keep working as written."""
import re
from pathlib import Path

import torch
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader


def test_readme_usage_snippet_runs():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    snippet = re.search(r"## Usage\n\n```python\n(.*?)```", readme, re.S).group(1)
    x = torch.randn(10, 64)
    edge_index = torch.randint(0, 10, (2, 30))
    graphs = [Data(x=x, edge_index=edge_index)] * 3
    scope = {
        "x": x, "edge_index": edge_index, "edge_attr": torch.randn(30, 8),
        "batch": torch.tensor([0] * 5 + [1] * 5),
        "train_loader": DataLoader(graphs, batch_size=2),
        "layer_outputs": [torch.randn(10, 64) for _ in range(5)],
    }
    exec(compile(snippet, "README.md", "exec"), scope)
    assert scope["out"].shape == (10, 128) and scope["alpha"].shape[1] == 4
    assert scope["graph_emb"].shape == (2, 64)
    assert scope["pna"](x, edge_index).shape == (10, 64)
    assert scope["gin"](x, edge_index).shape == (10, 64)
