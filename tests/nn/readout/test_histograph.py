import math

import pytest
import torch

from pyg_agg.nn import HistoGraphReadout

SIZES = [5, 1, 3, 7]  # includes a 1-node graph


def make_batch(sizes, layers=3, channels=8, dtype=torch.float64):
    history = torch.randn(sum(sizes), layers, channels, dtype=dtype)
    batch = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
    return history, batch


def reference_graph(readout, history):
    """The readout of ONE graph written densely with torch's own MHA."""
    layers = [emb(history[:, i]) for i, emb in enumerate(readout.embed)]
    x = torch.stack(layers, 1) + readout.layer_code.to(history.dtype)
    d = readout.hidden_channels
    scores = torch.einsum("nd,nld->nl", readout.lin_query(x[:, -1]), readout.lin_key(x))
    c = scores.mean(0) / math.sqrt(d)
    alpha = torch.softmax(c, 0) if readout.layer_weighting == "softmax" else c / c.sum()
    h = (alpha.view(1, -1, 1) * x).sum(1)
    mha = torch.nn.MultiheadAttention(d, readout.heads, batch_first=True, dtype=history.dtype)
    with torch.no_grad():
        mha.in_proj_weight.copy_(readout.in_proj.weight)
        mha.in_proj_bias.copy_(readout.in_proj.bias)
        mha.out_proj.weight.copy_(readout.out_proj.weight)
        mha.out_proj.bias.copy_(readout.out_proj.bias)
    mha.eval()
    z = mha(h[None], h[None], h[None], need_weights=False)[0][0]
    z = readout.norm(z + h)
    return readout.lin_out(z.mean(0)), alpha


@pytest.mark.parametrize("heads", [1, 4])
@pytest.mark.parametrize("weighting", ["signed", "softmax"])
def test_matches_dense_reference_with_torch_mha(heads, weighting):
    readout = HistoGraphReadout(8, 3, 6, hidden_channels=16, heads=heads,
                                layer_weighting=weighting).double().eval()
    history, batch = make_batch(SIZES)
    out, weights = readout(history, batch, return_weights=True)
    for g, (start, n) in enumerate(zip([0, 5, 6, 9], SIZES, strict=True)):
        expected, alpha = reference_graph(readout, history[start:start + n])
        torch.testing.assert_close(out[g], expected)
        torch.testing.assert_close(weights.layer[g], alpha)


def test_batched_alone_equal_and_unsorted_batch():
    readout = HistoGraphReadout(8, 3, 4).double().eval()
    history, batch = make_batch(SIZES)
    out = readout(history, batch)
    starts = [0, 5, 6, 9]
    for g, (start, n) in enumerate(zip(starts, SIZES, strict=True)):
        alone = readout(history[start:start + n])
        torch.testing.assert_close(out[g:g + 1], alone)
    perm = torch.randperm(history.size(0))  # graphs interleaved in node order
    torch.testing.assert_close(readout(history[perm], batch[perm]), out)


def test_node_permutation_invariance():
    readout = HistoGraphReadout(8, 4, 4, heads=2).double().eval()
    history, batch = make_batch([6, 9], layers=4)
    perm = torch.cat([torch.randperm(6), 6 + torch.randperm(9)])
    torch.testing.assert_close(readout(history[perm], batch[perm]), readout(history, batch))


def test_ptr_and_empty_graph():
    readout = HistoGraphReadout(8, 3, 4).double().eval()
    history, batch = make_batch([2, 3])
    ptr = torch.tensor([0, 2, 5, 5])  # the third graph has no nodes
    out_ptr = readout(history, ptr=ptr)
    out_batch = readout(history, batch, size=3)
    torch.testing.assert_close(out_ptr, out_batch)
    assert out_ptr.shape == (3, 4) and torch.isfinite(out_ptr).all()
    torch.testing.assert_close(out_ptr[2], readout.lin_out.bias)  # embedding 0 for no nodes


def test_gradients_reach_every_layer_with_mixed_widths():
    widths = [3, 8, 5, 8]
    readout = HistoGraphReadout(widths, 4, 2, hidden_channels=8)
    sizes = [4, 1, 2]
    batch = torch.repeat_interleave(torch.arange(3), torch.tensor(sizes))
    layers = [torch.randn(7, w, requires_grad=True) for w in widths]
    readout(layers, batch).pow(2).sum().backward()
    for i, h in enumerate(layers):
        assert h.grad is not None and h.grad.abs().sum() > 0, f"no gradient to layer {i}"
    for name, p in readout.named_parameters():
        assert p.grad is not None, name


def test_signed_normalisation_is_exact_or_bounded():
    readout = HistoGraphReadout(4, 3, 4, signed_eps=0.1)
    c = torch.tensor([[1.0, 2.0, -0.5],            # no cancellation: the paper's c / sum(c)
                      [1.0, -1.0, 1e-9],           # sum ~ 0
                      [0.0, 0.0, 0.0],             # every score 0
                      [-1.0, 0.5 - 1e-7, 0.5]],    # sum ~ -1e-7
                     requires_grad=True)
    alpha = readout._normalise(c)
    torch.testing.assert_close(alpha[0], c[0] / c[0].sum())
    assert torch.isfinite(alpha).all()
    assert (alpha.abs().sum(-1) <= 1 / 0.1 + 1e-5).all()
    torch.testing.assert_close(alpha[2], torch.zeros(3))
    # the clamp keeps the sign of the denominator: -1 here
    torch.testing.assert_close(alpha[3], c[3] / -0.2)
    alpha.sum().backward()
    assert torch.isfinite(c.grad).all()


def test_softmax_weighting_and_returned_attention():
    readout = HistoGraphReadout(8, 3, 4, heads=2, layer_weighting="softmax").eval()
    history, batch = make_batch(SIZES, dtype=torch.float32)
    _, w = readout(history, batch, return_weights=True)
    assert w.layer.shape == (4, 3) and (w.layer >= 0).all()
    torch.testing.assert_close(w.layer.sum(-1), torch.ones(4))
    assert [tuple(a.shape) for a in w.node] == [(2, n, n) for n in SIZES]
    for attn in w.node:
        torch.testing.assert_close(attn.sum(-1), torch.ones(attn.shape[:2]))


def test_returned_attention_matches_torch_mha_per_graph():
    readout = HistoGraphReadout(8, 3, 4, hidden_channels=16, heads=2).double().eval()
    sizes = [2, 9, 3, 16, 1]  # several size buckets
    history, batch = make_batch(sizes)
    perm = torch.randperm(history.size(0))
    _, w = readout(history[perm], batch[perm], return_weights=True)
    _, w_sorted = readout(history, batch, return_weights=True)
    mha = torch.nn.MultiheadAttention(16, 2, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(readout.in_proj.weight)
        mha.in_proj_bias.copy_(readout.in_proj.bias)
    start = 0
    for g, n in enumerate(sizes):
        _, alpha = reference_graph(readout, history[start:start + n])
        h = (alpha.view(1, -1, 1) * (torch.stack([e(history[start:start + n, i]) for i, e in
             enumerate(readout.embed)], 1) + readout.layer_code.double())).sum(1)
        expected = mha(h[None], h[None], h[None], average_attn_weights=False)[1][0]
        torch.testing.assert_close(w_sorted.node[g], expected)
        # with shuffled node ids, rows/cols follow the graph's nodes in increasing id order
        ids = (batch[perm] == g).nonzero().view(-1)
        order = perm[ids] - start
        torch.testing.assert_close(w.node[g], expected[:, order][:, :, order])
        start += n


def test_without_residual_and_layer_norm():
    readout = HistoGraphReadout(8, 3, 4, residual=False, layer_norm=False).double().eval()
    history, batch = make_batch([3, 2])
    out = readout(history, batch)
    assert readout.norm is None and out.shape == (2, 4)
    torch.testing.assert_close(out[1:], readout(history[3:]))


def test_node_level():
    readout = HistoGraphReadout([8, 8, 8], 3, 5, hidden_channels=8, level="node").double().eval()
    history, _ = make_batch([4, 3])
    out, w = readout(history, return_weights=True)
    assert out.shape == (7, 5) and w.layer.shape == (7, 3) and w.node is None
    # per node: alpha_v = s_v / sum_l s_v,l and out_v = W (sum_l alpha_v,l x~_v,l)
    x = torch.stack([e(history[:, i]) for i, e in enumerate(readout.embed)], 1)
    x = x + readout.layer_code.double()
    s = torch.einsum("nd,nld->nl", readout.lin_query(x[:, -1]), readout.lin_key(x))
    s = s / math.sqrt(8)
    torch.testing.assert_close(w.layer, s / s.sum(-1, keepdim=True))
    torch.testing.assert_close(out, readout.lin_out((w.layer[..., None] * x).sum(1)))
    # a node's output depends on that node alone
    torch.testing.assert_close(readout(history[:4]), out[:4])


def test_bad_input_errors():
    readout = HistoGraphReadout(8, 3, 4)
    history, batch = make_batch([3, 2], dtype=torch.float32)
    with pytest.raises(ValueError, match=r"`history` must be \[N, L, F\]"):
        readout(history[:, 0])
    with pytest.raises(ValueError, match="every layer must hold the same N"):
        readout([history[:, 0], history[:4, 1], history[:, 2]])
    with pytest.raises(ValueError, match="`batch` has 4 entries"):
        readout(history, batch[:4])
    with pytest.raises(ValueError, match="holds 2 layers"):
        readout(history[:, :2])
    with pytest.raises(ValueError, match="expected 8"):
        readout(torch.randn(5, 3, 6))
    with pytest.raises(ValueError, match=r"`history\[1\]` must be a 2-D"):
        readout([history[:, 0], history[:, 1:], history[:, 2]])
    with pytest.raises(ValueError, match="divisible by `heads`"):
        HistoGraphReadout(8, 3, 6, heads=4)
    with pytest.raises(ValueError, match="`layer_weighting`"):
        HistoGraphReadout(8, 3, 4, layer_weighting="mean")
    with pytest.raises(ValueError, match="lists 2 widths"):
        HistoGraphReadout([8, 8], 3, 4)


def test_reset_parameters_and_repr():
    readout = HistoGraphReadout(8, 3, 4)
    before = readout.lin_key.weight.clone()
    readout.reset_parameters()
    assert not torch.equal(before, readout.lin_key.weight)
    assert "HistoGraphReadout(8, num_layers=3" in repr(readout)
