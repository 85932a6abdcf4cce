"""Every conv under ``torch.inference_mode``, on a graph made inside it (as a
DataLoader collates one there): inference tensors have no version counter,
so nothing may be cached under them."""
import pytest
import torch

from pyg_agg.nn import GATv2Conv, LCMConv, PNAConv

CONVS = {
    "GATv2Conv": lambda: GATv2Conv(8, 4, heads=2),
    "LCMConv": lambda: LCMConv(8, 8),
    "PNAConv": lambda: PNAConv(8, 8, ["mean", "min", "max", "std"], ["identity", "amplification"],
                               deg=torch.tensor([0, 3, 2])),
}


@pytest.mark.parametrize("name", list(CONVS))
def test_conv_runs_on_a_graph_made_under_inference_mode(name):
    torch.manual_seed(0)
    conv = CONVS[name]().eval()
    x, edge_index = torch.randn(5, 8), torch.tensor([[0, 1, 2, 3, 4, 1], [1, 2, 3, 4, 0, 0]])
    expected = conv(x, edge_index).detach()
    with torch.inference_mode():
        first = conv(x.clone(), edge_index.clone())
        again = conv(x.clone(), edge_index.clone())
    torch.testing.assert_close(first, expected)
    torch.testing.assert_close(again, expected)
