"""The pipeline's networks: the PNA leaderboard layer, heads and block variants."""
import pytest
import torch

from pyg_agg.nn import PNAConv
from pyg_agg.pipelines.models import GraphNet, PNASimpleConv


def small_graph(num_nodes=9, isolated=2, seed=0):
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, num_nodes - isolated, (2, 30), generator=gen)
    x = torch.randn(num_nodes, 4, generator=gen)
    return x, edge_index


def test_pna_simple_conv_matches_a_per_node_reference():
    x, edge_index = small_graph()
    deg = PNAConv.get_degree_histogram([_data(x, edge_index)])
    conv = PNASimpleConv(4, 3, deg)
    torch.nn.init.normal_(conv.lin.weight)
    torch.nn.init.normal_(conv.lin.bias)
    bins = torch.arange(deg.numel(), dtype=torch.float)
    avg_log = float(((bins + 1).log() * deg).sum() / deg.sum())
    rows = []
    for node in range(x.size(0)):
        nbrs = x[edge_index[0][edge_index[1] == node]]
        if len(nbrs) == 0:
            rows.append(torch.zeros(12 * 4))
            continue
        mean = nbrs.mean(0)
        std = ((nbrs ** 2).mean(0) - mean ** 2).relu().add(1e-5).sqrt()  # the paper's std
        aggr = torch.cat([mean, nbrs.min(0).values, nbrs.max(0).values, std])
        d = torch.tensor(float(len(nbrs)))
        amp = (d + 1).log() / avg_log
        rows.append(torch.cat([aggr, aggr * amp, aggr / amp]))
    expected = conv.lin(torch.stack(rows))
    torch.testing.assert_close(conv(x, edge_index), expected, atol=1e-5, rtol=1e-5)


def test_pna_simple_conv_starts_with_the_authors_initialisation():
    x, edge_index = small_graph()
    conv = PNASimpleConv(4, 3, PNAConv.get_degree_histogram([_data(x, edge_index)]))
    bound = (1 / 48) * (6 / (48 + 3)) ** 0.5  # Xavier-uniform, gain 1 / fan_in
    assert conv.lin.weight.abs().max() <= bound and conv.lin.weight.abs().max() > bound / 2
    assert torch.equal(conv.lin.bias, torch.zeros(3))
    assert repr(conv) == "PNASimpleConv(4, 3)"


def test_molhiv_recipe_network_has_the_leaderboard_parameter_count():
    deg = torch.tensor([0, 10, 20, 5])
    model = GraphNet("pna-simple", 9, 80, 1, 4, 0.3, "mean", ogb_mol=True, edge_dim=3,
                     deg=deg, head="halving", dropout_after_residual=True)
    count = sum(p.numel() for p in model.parameters())
    # The leaderboard lists 326,081; OGB >= 1.2 adds one chirality row (80
    # weights) to the AtomEncoder.
    atom_rows = sum(e.num_embeddings for e in model.node_encoder.atom_embedding_list)
    assert atom_rows == 174
    assert count == 326_081 + 80
    assert len(model.edge_encoders) == 0  # the leaderboard layer takes no bond features


def test_halving_head_widths():
    model = GraphNet("gin", 5, 32, 3, 2, 0.0, "mean", ogb_mol=False, edge_dim=None,
                     head="halving")
    widths = [m.out_features for m in model.head if isinstance(m, torch.nn.Linear)]
    assert widths == [16, 8, 3]
    with pytest.raises(ValueError, match="Valid heads: mlp, halving"):
        GraphNet("gin", 5, 32, 3, 2, 0.0, "mean", ogb_mol=False, edge_dim=None, head="deep")


@pytest.mark.parametrize("after_residual", [False, True])
def test_dropout_after_residual_drops_the_stream(after_residual):
    x, edge_index = small_graph()
    data = _data(x, edge_index)
    model = GraphNet("gin", 4, 8, 1, 2, 0.999999, "mean", ogb_mol=False, edge_dim=None,
                     dropout_after_residual=after_residual).train()
    pooled = []
    model.head.register_forward_hook(lambda _m, inputs, _out: pooled.append(inputs[0]))
    torch.manual_seed(0)
    model(data)
    # Dropping (almost) every unit of h + conv(h) zeroes the stream; dropping only
    # the branch leaves the encoder's embedding flowing through the residuals.
    assert bool((pooled[0] == 0).all()) is after_residual


def _data(x, edge_index):
    from torch_geometric.data import Batch, Data

    return Batch.from_data_list([Data(x=x, edge_index=edge_index)])


def test_a_new_model_is_one_registry_entry(monkeypatch, tmp_path, capsys):
    from torch_geometric.nn import GraphConv

    from pyg_agg.cli import main
    from pyg_agg.pipelines.models import MODELS, ModelSpec

    built = []

    def graph_conv(in_channels, out_channels, args):
        built.append((in_channels, out_channels))
        return GraphConv(in_channels, out_channels)

    monkeypatch.setitem(MODELS, "graphconv", ModelSpec(graph_conv, divides_hidden="heads"))
    argv = ["train", "--dataset", "synthetic-sbm", "--model", "graphconv", "--hidden", "8",
            "--layers", "2", "--epochs", "1", "--out", str(tmp_path / "run")]
    assert main(argv) == 0
    assert built == [(16, 8), (8, 4)]  # 16 features -> hidden -> 4 classes
    # the entry's constraint is checked before any work
    assert main([*argv[:-1], str(tmp_path / "other"), "--heads", "3"]) == 2
    assert "hidden (8) must be divisible by heads (3)" in capsys.readouterr().err
    assert not (tmp_path / "other").exists()


@pytest.mark.parametrize("ours, pyg", [("gatv2", "gatv2-pyg"), ("pna", "pna-pyg"), ("lcm", "lcm-pyg")])
def test_pyg_versions_of_our_layers_share_weights_and_outputs(ours, pyg):
    from torch_geometric.utils import sort_edge_index

    ring = torch.arange(8)
    # every node has in-degree 2, where PyG's padded LCM equals ours; sorted by target for it
    edge_index = sort_edge_index(torch.stack([torch.cat([ring, (ring + 1) % 8]),
                                              torch.cat([(ring + 1) % 8, ring])]),
                                 sort_by_row=False)
    data = _data(torch.randn(8, 4), edge_index)
    deg = PNAConv.get_degree_histogram([data])
    nets = [GraphNet(model, 4, 8, 2, 2, 0.0, "mean", ogb_mol=False, edge_dim=None, deg=deg).eval()
            for model in (pyg, ours)]
    nets[1].load_state_dict(nets[0].state_dict())  # strict: the same keys and shapes
    torch.testing.assert_close(nets[1](data), nets[0](data), atol=1e-5, rtol=1e-5)
