"""Triton kernels of the fused GATv2 attention (the CUDA side of
``pyg_agg::dynamic_attention`` and its backward; the CPU side, whose maths
these follow, is ``csrc/cpu/dynamic_attention.cpp``).

One program per (target row, head) walks the row's edges in blocks of
``_BLOCK_E``, each a ``[BLOCK_E, C]`` tile of gathered ``x_src`` rows, with
a block-wise online softmax (running max and normaliser, the accumulator
rescaled when the max grows). The backward recomputes the pre-activations
from the inputs: a pass over rows (softmax backward, gradients a row owns,
per-row partials of the ``att`` gradient), a pass over chunks of CSR
positions for the ``W_e`` gradient, and a pass over sources through the
transposed graph for the ``x_src`` gradient. Nothing uses atomics: the
partials are summed by torch in a fixed order, so every result is bitwise
reproducible. Sums accumulate in float32 (float64 for float64 inputs).

The launchers take plain tensors, so with ``TRITON_INTERPRET=1`` set before
this module is imported they run on CPU tensors (the tests do that).
"""
from __future__ import annotations

from typing import Optional

import torch
import triton
import triton.language as tl
from torch import Tensor

_BLOCK_E = 16
_MAX_BLOCK_D = 16
# The W_e gradient sums over every edge: this many programs per head each sum one
# chunk of CSR positions into a partial, which bounds the partials' memory.
_WEIGHT_CHUNKS = 512


def _accumulator(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _triton_type(dtype: torch.dtype):
    return tl.float64 if dtype == torch.float64 else tl.float32


@triton.jit
def _leaky_relu(z, slope):
    return tl.maximum(z, 0.0) + slope * tl.minimum(z, 0.0)


@triton.jit
def _score_gradient(ds, att_h, z, slope):
    """d(score)/dz times ds: [BLOCK_E, BLOCK_C]."""
    return ds[:, None] * att_h[None, :] * tl.where(z > 0.0, 1.0, slope)


@triton.jit
def _head_columns(att, slope_ptr, channels, ACC: tl.constexpr, BLOCK_C: tl.constexpr):
    """This program's head (grid axis 1), its columns of a [*, H*C] row, their
    mask (C need not be a power of two), the slope and att[head]."""
    head = tl.program_id(1)
    c = tl.arange(0, BLOCK_C)
    cmask = c < channels
    offs = head * channels + c
    att_h = tl.load(att + offs, mask=cmask, other=0.0).to(ACC)
    return head, offs, cmask, tl.load(slope_ptr), att_h


@triton.jit
def _gather(base, rows, offs, mask, width, ACC: tl.constexpr):
    """The tile base[rows, offs] of a [*, width] tensor, [BLOCK_E, BLOCK_C]."""
    return tl.load(base + rows[:, None] * width + offs[None, :], mask=mask, other=0.0).to(ACC)


@triton.jit
def _pre_activation(xs, xd, edge_attr, weight_t, e, emask, offs, cmask, width, edge_dim,
                    HAS_EDGE: tl.constexpr, ACC: tl.constexpr):
    """z = x_src[j] + x_dst[i] (+ W_e edge_attr[e]), in the C kernel's order of additions."""
    z = xs + xd
    if HAS_EDGE:
        for d in range(edge_dim):
            a = tl.load(edge_attr + e * edge_dim + d, mask=emask, other=0.0).to(ACC)
            w = tl.load(weight_t + d * width + offs, mask=cmask, other=0.0).to(ACC)
            z += a[:, None] * w[None, :]
    return z


@triton.jit
def _edge_scale(edge_scale, e, emask, head, heads, like, HAS_SCALE: tl.constexpr,
                ACC: tl.constexpr):
    if HAS_SCALE:
        scale = tl.load(edge_scale + e * heads + head, mask=emask, other=0.0).to(ACC)
    else:
        scale = tl.zeros_like(like) + 1.0
    return scale


@triton.jit
def _row_block(x_src, col, edge_attr, weight_t, att_h, xd, start, last, offs, cmask, slope, width,
               edge_dim, HAS_EDGE: tl.constexpr, ACC: tl.constexpr, BLOCK_E: tl.constexpr):
    """The row's edges start..start + BLOCK_E (masked at last): positions, mask,
    x_src tile, pre-activations and scores (-inf on masked lanes)."""
    e = start + tl.arange(0, BLOCK_E)
    emask = e < last
    j = tl.load(col + e, mask=emask, other=0)
    xs = _gather(x_src, j, offs, emask[:, None] & cmask[None, :], width, ACC)
    z = _pre_activation(xs, xd[None, :], edge_attr, weight_t, e, emask, offs, cmask, width,
                        edge_dim, HAS_EDGE, ACC)
    s = tl.sum(att_h[None, :] * _leaky_relu(z, slope), axis=1)
    return e, emask, xs, z, tl.where(emask, s, float("-inf"))


@triton.jit
def _forward_kernel(x_src, x_dst, att, ptr, col, edge_attr, weight_t, edge_scale, slope_ptr, out,
                    lse, alpha, heads, channels, edge_dim, HAS_EDGE: tl.constexpr,
                    HAS_SCALE: tl.constexpr, RETURN_ALPHA: tl.constexpr, ACC: tl.constexpr,
                    BLOCK_E: tl.constexpr, BLOCK_C: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # row * width may pass 2**31
    head, offs, cmask, slope, att_h = _head_columns(att, slope_ptr, channels, ACC, BLOCK_C)
    width = heads * channels
    xd = tl.load(x_dst + row * width + offs, mask=cmask, other=0.0).to(ACC)
    first = tl.load(ptr + row)
    last = tl.load(ptr + row + 1)
    running_max = tl.full([], float("-inf"), ACC)
    norm = tl.zeros([], ACC)
    acc = tl.zeros([BLOCK_C], ACC)
    for start in range(first, last, BLOCK_E):
        e, emask, xs, z, s = _row_block(x_src, col, edge_attr, weight_t, att_h, xd, start, last,
                                        offs, cmask, slope, width, edge_dim, HAS_EDGE, ACC, BLOCK_E)
        new_max = tl.maximum(running_max, tl.max(s, axis=0))
        shrink = tl.exp(running_max - new_max)  # a new maximum rescales what was summed so far
        p = tl.exp(s - new_max)
        weight = p * _edge_scale(edge_scale, e, emask, head, heads, p, HAS_SCALE, ACC)
        norm = norm * shrink + tl.sum(p, axis=0)
        acc = acc * shrink + tl.sum(weight[:, None] * xs, axis=0)
        running_max = new_max
    nonempty = norm > 0.0
    safe_norm = tl.where(nonempty, norm, 1.0)
    tl.store(out + row * width + offs, tl.where(nonempty, acc / safe_norm, 0.0), mask=cmask)
    # the row's log-sum-exp: alpha_e = exp(s_e - lse) in the backward
    row_lse = tl.where(nonempty, running_max + tl.log(safe_norm), 0.0)
    tl.store(lse + row * heads + head, row_lse)
    if RETURN_ALPHA:  # the softmax itself, recomputed against the unrounded lse
        for start in range(first, last, BLOCK_E):
            e, emask, xs, z, s = _row_block(x_src, col, edge_attr, weight_t, att_h, xd, start,
                                            last, offs, cmask, slope, width, edge_dim, HAS_EDGE,
                                            ACC, BLOCK_E)
            tl.store(alpha + e * heads + head, tl.exp(s - row_lse), mask=emask)


@triton.jit
def _row_block_backward(x_src, col, edge_attr, weight_t, edge_scale, grad_alpha, att_h, xd, g,
                        row_lse, start, last, offs, cmask, slope, head, heads, width, edge_dim,
                        HAS_EDGE: tl.constexpr, HAS_SCALE: tl.constexpr,
                        HAS_GRAD_ALPHA: tl.constexpr, ACC: tl.constexpr, BLOCK_E: tl.constexpr):
    """A block of the row's edges as _row_block reads it, with alpha, scale,
    <g_i, x_j> and dL/dalpha (0 on masked lanes)."""
    e, emask, xs, z, s = _row_block(x_src, col, edge_attr, weight_t, att_h, xd, start, last, offs,
                                    cmask, slope, width, edge_dim, HAS_EDGE, ACC, BLOCK_E)
    alpha = tl.where(emask, tl.exp(s - row_lse), 0.0)
    dot = tl.sum(g[None, :] * xs, axis=1)
    scale = _edge_scale(edge_scale, e, emask, head, heads, dot, HAS_SCALE, ACC)
    dalpha = scale * dot
    if HAS_GRAD_ALPHA:
        dalpha += tl.load(grad_alpha + e * heads + head, mask=emask, other=0.0).to(ACC)
    return e, emask, z, alpha, scale, dot, dalpha


@triton.jit
def _backward_rows_kernel(grad_out, grad_alpha, x_src, x_dst, att, ptr, col, edge_attr, weight_t,
                          edge_scale, lse, slope_ptr, weight_buf, ds_buf, grad_dst,
                          grad_edge_parts, grad_scale, grad_att_parts, heads, channels, edge_dim,
                          HAS_EDGE: tl.constexpr, HAS_SCALE: tl.constexpr,
                          HAS_GRAD_ALPHA: tl.constexpr, ACC: tl.constexpr, BLOCK_E: tl.constexpr,
                          BLOCK_C: tl.constexpr):
    """Softmax backward of row i, head h: writes ds and alpha * scale per CSR
    position (for the other passes), the gradients of x_dst[i], edge_scale,
    edge_attr (per head, summed over heads by the launcher) and row i's term
    of the att gradient."""
    row = tl.program_id(0).to(tl.int64)  # row * width may pass 2**31
    head, offs, cmask, slope, att_h = _head_columns(att, slope_ptr, channels, ACC, BLOCK_C)
    width = heads * channels
    xd = tl.load(x_dst + row * width + offs, mask=cmask, other=0.0).to(ACC)
    g = tl.load(grad_out + row * width + offs, mask=cmask, other=0.0).to(ACC)
    row_lse = tl.load(lse + row * heads + head).to(ACC)
    first = tl.load(ptr + row)
    last = tl.load(ptr + row + 1)
    # total = sum_e alpha_e dalpha_e, which every ds of the row needs
    total = tl.zeros([], ACC)
    for start in range(first, last, BLOCK_E):
        e, emask, z, alpha, scale, dot, dalpha = _row_block_backward(
            x_src, col, edge_attr, weight_t, edge_scale, grad_alpha, att_h, xd, g, row_lse, start,
            last, offs, cmask, slope, head, heads, width, edge_dim, HAS_EDGE, HAS_SCALE,
            HAS_GRAD_ALPHA, ACC, BLOCK_E)
        total += tl.sum(alpha * dalpha, axis=0)
    grad_dst_acc = tl.zeros([BLOCK_C], ACC)
    grad_att_acc = tl.zeros([BLOCK_C], ACC)
    for start in range(first, last, BLOCK_E):
        e, emask, z, alpha, scale, dot, dalpha = _row_block_backward(
            x_src, col, edge_attr, weight_t, edge_scale, grad_alpha, att_h, xd, g, row_lse, start,
            last, offs, cmask, slope, head, heads, width, edge_dim, HAS_EDGE, HAS_SCALE,
            HAS_GRAD_ALPHA, ACC, BLOCK_E)
        ds = alpha * (dalpha - total)
        tl.store(ds_buf + e * heads + head, ds, mask=emask)
        tl.store(weight_buf + e * heads + head, alpha * scale, mask=emask)
        if HAS_SCALE:
            tl.store(grad_scale + e * heads + head, alpha * dot, mask=emask)
        grad_att_acc += tl.sum(ds[:, None] * _leaky_relu(z, slope), axis=0)
        dz = _score_gradient(ds, att_h, z, slope)
        grad_dst_acc += tl.sum(dz, axis=0)
        if HAS_EDGE:
            for d in range(edge_dim):
                w = tl.load(weight_t + d * width + offs, mask=cmask, other=0.0).to(ACC)
                tl.store(grad_edge_parts + (e * heads + head) * edge_dim + d,
                         tl.sum(dz * w[None, :], axis=1), mask=emask)
    tl.store(grad_dst + row * width + offs, grad_dst_acc, mask=cmask)
    tl.store(grad_att_parts + row * width + offs, grad_att_acc, mask=cmask)


@triton.jit
def _backward_weight_kernel(x_src, x_dst, att, col, edge_attr, weight_t, edge_row, ds_buf,
                            slope_ptr, grad_weight_parts, rows, edges, chunk_size, heads, channels,
                            edge_dim, ACC: tl.constexpr, BLOCK_E: tl.constexpr,
                            BLOCK_C: tl.constexpr, BLOCK_D: tl.constexpr):
    """Chunk k's partial of the W_e^T gradient, sum_e edge_attr[e]^T dz_e over
    CSR positions k * chunk_size.., for one head and one block of D."""
    chunk = tl.program_id(0)
    head, offs, cmask, slope, att_h = _head_columns(att, slope_ptr, channels, ACC, BLOCK_C)
    width = heads * channels
    d = tl.program_id(2) * BLOCK_D + tl.arange(0, BLOCK_D)
    dmask = d < edge_dim
    acc = tl.zeros([BLOCK_D, BLOCK_C], ACC)
    begin = chunk * chunk_size
    for start in range(begin, begin + chunk_size, BLOCK_E):
        e = start + tl.arange(0, BLOCK_E)
        in_range = e < edges
        i = tl.load(edge_row + e, mask=in_range, other=rows)
        emask = in_range & (i < rows)  # parked entries are in no row
        i = tl.where(emask, i, 0)
        j = tl.load(col + e, mask=emask, other=0)
        tile = emask[:, None] & cmask[None, :]
        z = _pre_activation(_gather(x_src, j, offs, tile, width, ACC),
                            _gather(x_dst, i, offs, tile, width, ACC), edge_attr, weight_t, e,
                            emask, offs, cmask, width, edge_dim, True, ACC)
        ds = tl.load(ds_buf + e * heads + head, mask=emask, other=0.0)
        dz = _score_gradient(ds, att_h, z, slope)
        a = tl.load(edge_attr + e[:, None] * edge_dim + d[None, :],
                    mask=emask[:, None] & dmask[None, :], other=0.0).to(ACC)
        acc += tl.sum(a[:, :, None] * dz[:, None, :], axis=0)
    tl.store(grad_weight_parts + (chunk * edge_dim + d[:, None]) * width + offs[None, :], acc,
             mask=dmask[:, None] & cmask[None, :])


@triton.jit
def _backward_sources_kernel(grad_out, x_src, x_dst, att, edge_attr, weight_t, csc_ptr, csc_pos,
                             edge_row, weight_buf, ds_buf, slope_ptr, grad_src, rows, heads,
                             channels, edge_dim, HAS_EDGE: tl.constexpr, ACC: tl.constexpr,
                             BLOCK_E: tl.constexpr, BLOCK_C: tl.constexpr):
    """x_src[j] receives, from each out-edge e into row i, weight_e * grad_out[i]
    (the aggregation) and ds_e * att * LeakyReLU'(z_e) (the score)."""
    source = tl.program_id(0).to(tl.int64)  # source * width may pass 2**31
    head, offs, cmask, slope, att_h = _head_columns(att, slope_ptr, channels, ACC, BLOCK_C)
    width = heads * channels
    xs = tl.load(x_src + source * width + offs, mask=cmask, other=0.0).to(ACC)
    last = tl.load(csc_ptr + source + 1)
    acc = tl.zeros([BLOCK_C], ACC)
    for start in range(tl.load(csc_ptr + source), last, BLOCK_E):
        k = start + tl.arange(0, BLOCK_E)
        kmask = k < last
        e = tl.load(csc_pos + k, mask=kmask, other=0)
        i = tl.load(edge_row + e, mask=kmask, other=rows)
        emask = kmask & (i < rows)  # parked entries are in no row
        i = tl.where(emask, i, 0)
        tile = emask[:, None] & cmask[None, :]
        z = _pre_activation(xs[None, :], _gather(x_dst, i, offs, tile, width, ACC), edge_attr,
                            weight_t, e, emask, offs, cmask, width, edge_dim, HAS_EDGE, ACC)
        weight = tl.load(weight_buf + e * heads + head, mask=emask, other=0.0)
        ds = tl.load(ds_buf + e * heads + head, mask=emask, other=0.0)
        g = _gather(grad_out, i, offs, tile, width, ACC)
        acc += tl.sum(weight[:, None] * g + _score_gradient(ds, att_h, z, slope), axis=0)
    tl.store(grad_src + source * width + offs, acc, mask=cmask)


def _present(t: Optional[Tensor]) -> bool:
    return t is not None and t.numel() > 0


def _or_dummy(t: Optional[Tensor], like: Tensor) -> Tensor:
    """Triton needs a pointer for every argument; absent ones are never read."""
    return t if _present(t) else like


def _slope(negative_slope: float, like: Tensor) -> Tensor:
    """The slope as a one-element tensor of the accumulator's dtype: a Python
    float argument would reach the kernel rounded to float32."""
    return torch.tensor([negative_slope], dtype=_accumulator(like.dtype), device=like.device)


def _block_c(channels: int) -> int:
    return triton.next_power_of_2(channels)


def dynamic_attention(x_src: Tensor, x_dst: Tensor, att: Tensor, ptr: Tensor, col: Tensor,
                      edge_attr: Optional[Tensor], weight_t: Optional[Tensor],
                      edge_scale: Optional[Tensor], negative_slope: float, return_alpha: bool,
                      csc_ptr: Optional[Tensor], csc_pos: Optional[Tensor],
                      edge_row: Optional[Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    """The forward (csc_ptr, csc_pos, edge_row are only kept for the backward)."""
    rows, heads, channels = x_dst.shape
    has_edge = _present(edge_attr)
    out = torch.empty_like(x_dst)
    lse = x_dst.new_empty(rows, heads)
    # parked entries are in no row: their alpha stays 0
    alpha = x_dst.new_zeros(col.numel(), heads) if return_alpha else x_dst.new_empty(0)
    if rows > 0 and heads > 0:
        _forward_kernel[(rows, heads)](
            x_src, x_dst, att, ptr, col, _or_dummy(edge_attr, x_src), _or_dummy(weight_t, x_src),
            _or_dummy(edge_scale, x_src), _slope(negative_slope, x_src), out, lse,
            _or_dummy(alpha, out), heads, channels, edge_attr.size(1) if has_edge else 0,
            HAS_EDGE=has_edge, HAS_SCALE=_present(edge_scale), RETURN_ALPHA=return_alpha,
            ACC=_triton_type(x_src.dtype), BLOCK_E=_BLOCK_E, BLOCK_C=_block_c(channels))
    return out, lse, alpha


def dynamic_attention_backward(grad_out: Tensor, grad_alpha: Optional[Tensor], x_src: Tensor,
                               x_dst: Tensor, att: Tensor, ptr: Tensor, col: Tensor,
                               edge_attr: Optional[Tensor], weight_t: Optional[Tensor],
                               edge_scale: Optional[Tensor], lse: Tensor, negative_slope: float,
                               csc_ptr: Tensor, csc_pos: Tensor,
                               edge_row: Tensor) -> tuple[Tensor, ...]:
    """Gradients (x_src, x_dst, att, edge_attr, weight_t, edge_scale); absent inputs give [0]."""
    rows, heads, channels = x_dst.shape
    sources, edges = x_src.size(0), col.numel()
    has_edge, has_scale = _present(edge_attr), _present(edge_scale)
    edge_dim = edge_attr.size(1) if has_edge else 0
    acc_dtype = _accumulator(x_src.dtype)
    slope = _slope(negative_slope, x_src)
    kernel_types = dict(ACC=_triton_type(x_src.dtype), BLOCK_E=_BLOCK_E, BLOCK_C=_block_c(channels))
    absent = att.new_empty(0)
    # per CSR position: ds (the score gradient) and alpha * scale, which the
    # source and W_e passes read; parked positions are never written nor read
    ds_buf = x_src.new_empty(edges, heads, dtype=acc_dtype)
    weight_buf = x_src.new_empty(edges, heads, dtype=acc_dtype)
    grad_dst = torch.empty_like(x_dst)
    grad_att_parts = x_src.new_empty(rows, heads, channels, dtype=acc_dtype)
    # zeros: parked entries' gradients stay 0
    grad_edge_parts = x_src.new_zeros(edges, heads, edge_dim, dtype=acc_dtype)
    grad_scale = torch.zeros_like(edge_scale) if has_scale else absent
    if rows > 0 and heads > 0:
        _backward_rows_kernel[(rows, heads)](
            grad_out, _or_dummy(grad_alpha, x_src), x_src, x_dst, att, ptr, col,
            _or_dummy(edge_attr, x_src), _or_dummy(weight_t, x_src), _or_dummy(edge_scale, x_src),
            lse, slope, weight_buf, ds_buf, grad_dst, _or_dummy(grad_edge_parts, ds_buf),
            _or_dummy(grad_scale, x_src), grad_att_parts, heads, channels, edge_dim,
            HAS_EDGE=has_edge, HAS_SCALE=has_scale, HAS_GRAD_ALPHA=_present(grad_alpha),
            **kernel_types)
    grad_weight_t = absent
    if has_edge:
        chunk_size = _BLOCK_E * triton.cdiv(triton.cdiv(edges, _WEIGHT_CHUNKS), _BLOCK_E)
        chunks = triton.cdiv(edges, chunk_size)
        block_d = min(_MAX_BLOCK_D, triton.next_power_of_2(edge_dim))
        grad_weight_parts = x_src.new_zeros(chunks, edge_dim, heads * channels, dtype=acc_dtype)
        if chunks > 0 and heads > 0:
            _backward_weight_kernel[(chunks, heads, triton.cdiv(edge_dim, block_d))](
                x_src, x_dst, att, col, edge_attr, weight_t, edge_row, ds_buf, slope,
                grad_weight_parts, rows, edges, chunk_size, heads, channels, edge_dim,
                BLOCK_D=block_d, **kernel_types)
        grad_weight_t = grad_weight_parts.sum(0).to(weight_t.dtype)
    grad_src = torch.empty_like(x_src)
    if sources > 0 and heads > 0:
        _backward_sources_kernel[(sources, heads)](
            grad_out, x_src, x_dst, att, _or_dummy(edge_attr, x_src), _or_dummy(weight_t, x_src),
            csc_ptr, csc_pos, edge_row, weight_buf, ds_buf, slope, grad_src, rows, heads,
            channels, edge_dim, HAS_EDGE=has_edge, **kernel_types)
    grad_att = grad_att_parts.sum(0).to(att.dtype)
    grad_edge_attr = grad_edge_parts.sum(1).to(edge_attr.dtype) if has_edge else absent
    return grad_src, grad_dst, grad_att, grad_edge_attr, grad_weight_t, grad_scale
