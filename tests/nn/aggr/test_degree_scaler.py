import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.nn.aggr import DegreeScalerAggregation as PyGDegreeScalerAggregation

from pyg_agg.nn import PNAConv
from pyg_agg.nn.aggr import DegreeScalerAggregation

AGGREGATORS = ["mean", "min", "max", "std", "var", "sum"]
SCALERS = ["identity", "amplification", "attenuation", "linear", "inverse_linear"]


def messages(num_nodes=30, num_edges=150, channels=6, isolated=4, seed=0):
    """Messages at random targets; the last ``isolated`` nodes receive none, and a
    few messages repeat so min/max have ties."""
    gen = torch.Generator().manual_seed(seed)
    index = torch.randint(0, num_nodes - isolated, (num_edges,), generator=gen)
    msg = torch.randn(num_edges, channels, generator=gen)
    msg[1::7] = msg[0]
    deg = PNAConv.get_degree_histogram(
        Data(edge_index=torch.stack([index, index]), num_nodes=num_nodes))
    return msg, index, deg


@pytest.mark.parametrize("train_norm", [False, True])
def test_matches_pyg_forward_and_backward(train_norm):
    msg, index, deg = messages()
    reference = PyGDegreeScalerAggregation(AGGREGATORS, SCALERS, deg, train_norm=train_norm)
    ours = DegreeScalerAggregation(AGGREGATORS, SCALERS, deg, train_norm=train_norm)
    ours.load_state_dict(reference.state_dict())
    inputs = [msg.clone().requires_grad_() for _ in range(2)]
    outs = [m(x, index, dim_size=30) for m, x in zip((reference, ours), inputs, strict=True)]
    assert outs[1].shape == (30, len(SCALERS) * len(AGGREGATORS) * 6)
    torch.testing.assert_close(outs[1], outs[0], atol=1e-5, rtol=1e-5)
    weight = torch.randn_like(outs[0])
    for out in outs:
        (out * weight).sum().backward()
    torch.testing.assert_close(inputs[1].grad, inputs[0].grad, atol=1e-5, rtol=1e-5)
    if train_norm:
        for (name, p_ref), (_, p_ours) in zip(reference.named_parameters(),
                                              ours.named_parameters(), strict=True):
            torch.testing.assert_close(p_ours.grad, p_ref.grad, atol=1e-4, rtol=1e-4,
                                       msg=lambda m, name=name: f"grad of {name}: {m}")


def test_state_dict_keys_match_pyg():
    _, _, deg = messages()
    reference = PyGDegreeScalerAggregation(["mean"], ["amplification"], deg)
    assert (DegreeScalerAggregation(["mean"], ["amplification"], deg).state_dict().keys()
            == reference.state_dict().keys())


def test_other_dim_layout_matches_pyg():
    msg, index, deg = messages()
    batched = torch.stack([msg, msg.flip(1)], dim=0)  # [2, E, C]: aggregate along dim 1
    reference = PyGDegreeScalerAggregation(["max", "std"], ["identity", "attenuation"], deg)
    ours = DegreeScalerAggregation(["max", "std"], ["identity", "attenuation"], deg)
    torch.testing.assert_close(ours(batched, index, dim_size=30, dim=1),
                               reference(batched, index, dim_size=30, dim=1),
                               atol=1e-5, rtol=1e-5)


def test_single_scaler_string_with_aggregator_list():
    # PyG checks `aggr` instead of `scaler` for a string and then iterates over
    # the characters of "identity"; here a single name is a single scaler.
    msg, index, _ = messages()
    out = DegreeScalerAggregation(["mean", "max"], "identity")(msg, index, dim_size=30)
    reference = PyGDegreeScalerAggregation(["mean", "max"], ["identity"], torch.ones(2))
    torch.testing.assert_close(out, reference(msg, index, dim_size=30))


def test_isolated_nodes_aggregate_to_zero():
    msg, index, deg = messages()
    out = DegreeScalerAggregation(AGGREGATORS, SCALERS, deg)(msg, index, dim_size=30)
    assert torch.equal(out[-4:], torch.zeros_like(out[-4:]))


def test_bad_arguments_name_the_argument():
    _, _, deg = messages()
    with pytest.raises(ValueError, match=r"Unknown aggr \['median'\]"):
        DegreeScalerAggregation(["mean", "median"], "identity")
    with pytest.raises(ValueError, match=r"Unknown scaler \['cubic'\]"):
        DegreeScalerAggregation("mean", ["cubic"], deg)
    with pytest.raises(ValueError, match="`deg` is required"):
        DegreeScalerAggregation("mean", ["amplification"])
    with pytest.raises(ValueError, match="aggr_kwargs"):
        DegreeScalerAggregation(["std"], "identity", aggr_kwargs=[{"semi_grad": True}])
    from torch_geometric.nn.aggr import MeanAggregation
    with pytest.raises(ValueError, match="`aggr` must be aggregator names"):
        DegreeScalerAggregation(MeanAggregation(), "identity")
    msg, index, deg = messages()
    with pytest.raises(ValueError, match="index"):
        DegreeScalerAggregation("mean", "identity")(msg, index + 100, dim_size=30)


def test_repr():
    _, _, deg = messages()
    agg = DegreeScalerAggregation(["mean", "max"], ["identity"], None)
    assert repr(agg) == repr(PyGDegreeScalerAggregation(["mean", "max"], ["identity"], deg))
    assert repr(agg) == "DegreeScalerAggregation()"


def test_zero_messages_give_zeros_like_pyg():
    _, _, deg = messages()
    msg, index = torch.empty(0, 6), torch.empty(0, dtype=torch.long)
    reference = PyGDegreeScalerAggregation(AGGREGATORS, SCALERS, deg)
    ours = DegreeScalerAggregation(AGGREGATORS, SCALERS, deg)
    out = ours(msg, index, dim_size=5)
    torch.testing.assert_close(out, reference(msg, index, dim_size=5))
    assert out.shape == (5, len(SCALERS) * len(AGGREGATORS) * 6) and not out.any()


def test_zero_messages_as_the_aggr_of_a_message_passing_layer():
    from torch_geometric.nn import SAGEConv

    _, _, deg = messages()
    # the aggregation widens 6 channels to 2 aggregators x 6; SAGEConv's lin_l sees 12
    conv = SAGEConv((12, 6), 4, aggr=DegreeScalerAggregation(["mean", "std"], ["identity"], deg))
    out = conv((torch.randn(3, 6), torch.randn(3, 6)), torch.empty(2, 0, dtype=torch.long))
    assert out.shape == (3, 4) and out.isfinite().all()


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_deg_with_nan_or_inf_is_rejected(bad):
    with pytest.raises(ValueError, match="`deg` is a histogram and must hold finite counts"):
        DegreeScalerAggregation(["mean"], ["amplification"], torch.tensor([1.0, bad, 2.0]))


@pytest.mark.parametrize("with_edge_term", [False, True])
def test_gathered_statistics_match_the_materialised_messages(with_edge_term):
    """src[col] + edge_term + shift over CSR rows equals `statistics` of the built
    messages, values and gradients, empty rows (the last 4) included."""
    gen = torch.Generator().manual_seed(1)
    num_nodes, num_edges, channels = 30, 150, 5
    target = torch.randint(0, num_nodes - 4, (num_edges,), generator=gen).sort().values
    col = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    ptr = torch.cat([torch.zeros(1, dtype=torch.long),
                     torch.bincount(target, minlength=num_nodes).cumsum(0)])
    leaves = [torch.randn(num_nodes, channels, generator=gen), torch.randn(num_nodes, channels, generator=gen),
              torch.randn(num_edges, channels, generator=gen) if with_edge_term else None]
    aggr = DegreeScalerAggregation(AGGREGATORS, "identity")
    assert aggr.gathers
    results = []
    for gathered in (True, False):
        src, shift, edge_term = [None if t is None else t.clone().requires_grad_() for t in leaves]
        if gathered:
            stacked, count = aggr.gathered_statistics(src, ptr, col, edge_term, shift)
        else:
            msg = src[col] + shift[target] + (0 if edge_term is None else edge_term)
            stacked, count = aggr.statistics(msg, target, num_nodes)
        (stacked * torch.linspace(-1, 1, stacked.numel()).view_as(stacked)).sum().backward()
        results.append([stacked, count] + [t.grad for t in (src, shift, edge_term) if t is not None])
    assert results[0][0][-4:].abs().max() == 0  # empty rows stay 0, not the shift
    for got, expected in zip(*results, strict=True):
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_gather_form_only_where_the_shift_matters():
    assert not DegreeScalerAggregation(["std", "var"], "identity").gathers
    assert not DegreeScalerAggregation(["mean", "moment3"], "identity").gathers
    assert DegreeScalerAggregation(["std", "max"], "identity").gathers


# one grouped_mm where it applies (one tower, float32, rows of 16-byte multiples:
# widths 8 -> 4), else one matmul per group (towers, float64, widths 6 -> 5)
@pytest.mark.parametrize("dtype,width,out_width", [(torch.float64, 6, 5), (torch.float32, 8, 4),
                                                   (torch.float32, 6, 5)])
@pytest.mark.parametrize("towers", [1, 3])
def test_scaled_linear_grouped_by_degree_equals_every_scaler_weighted(towers, dtype, width, out_width):
    gen = torch.Generator().manual_seed(towers)
    deg = torch.tensor([3, 5, 2, 4, 0, 0, 0, 1])
    aggr = DegreeScalerAggregation(["mean", "max"], ["identity", "amplification", "attenuation", "linear"],
                                   deg, train_norm=True).to(dtype)
    count = torch.tensor([0, 1, 2, 3, 7])[torch.randint(0, 5, (300,), generator=gen)]
    ptr = torch.cat([count.new_zeros(1), count.cumsum(0)])
    stacked = torch.randn(300, towers, width, generator=gen, dtype=dtype, requires_grad=True)
    weight = torch.randn(towers, 4, out_width, width, generator=gen, dtype=dtype, requires_grad=True)
    groups = aggr.degree_groups(ptr)  # 5 degrees among 300 nodes: grouped
    assert groups is not None and groups.degrees.tolist() == [0, 1, 2, 3, 7]
    assert torch.equal(count[groups.order], count.sort(stable=True).values)

    add = torch.randn(300, towers, out_width, generator=gen, dtype=dtype, requires_grad=True)

    def run(rows, groups, plus):
        out = aggr.scaled_linear(rows, count, weight, groups, add=plus)
        wrt = [stacked, weight, aggr.avg_deg_log, aggr.avg_deg_lin] + ([add] if plus is not None else [])
        return out, torch.autograd.grad(out.square().sum(), wrt)

    # float32: the combined matrices round differently from the weighted sum
    tolerance = {} if dtype == torch.float64 else {"rtol": 1e-4, "atol": 1e-4}
    for plus in (None, add):
        grouped = run(stacked[groups.order], groups, plus)
        weighted = run(stacked, None, plus)
        assert grouped[0].shape == (300, towers, out_width)
        torch.testing.assert_close(grouped[0], weighted[0], **tolerance)
        for a, b in zip(grouped[1], weighted[1], strict=True):
            torch.testing.assert_close(a, b, **tolerance)
    torch.testing.assert_close(run(stacked, None, add)[0], run(stacked, None, None)[0] + add)


def test_degree_groups_only_where_grouping_pays():
    aggr = DegreeScalerAggregation(["mean"], ["identity", "amplification"], torch.tensor([0, 2, 1]))
    few = torch.arange(0, 301, 3)  # 100 rows, all of degree 3
    assert aggr.degree_groups(few).sizes == [100]
    many = torch.cat([torch.zeros(1, dtype=torch.long), torch.arange(1, 81).cumsum(0)])
    assert aggr.degree_groups(many) is None  # 80 distinct degrees
    assert aggr.degree_groups(torch.arange(0, 41, 4)) is None  # 10 rows: too few per degree
    assert DegreeScalerAggregation(["mean"], "identity").degree_groups(few) is None  # one scaler
