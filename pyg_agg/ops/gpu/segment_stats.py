"""Triton kernels of the multi-statistic segment reduction (the CUDA side of
``pyg_agg::segment_stats``; the CPU side is ``csrc/cpu/segment_stats.cpp``).

One program per (CSR row, block of channels) walks the row's edges in order,
so there are no atomics and every result is bitwise reproducible. The maths
is the C++ kernel's: the row's first value shifts the moments, min/max
count their ties (the backward splits the gradient among them), NaN
propagates, empty rows give 0.

The launchers take plain tensors, so with ``TRITON_INTERPRET=1`` set before
this module is imported they run on CPU tensors (the tests do that).
"""
from __future__ import annotations

from typing import Optional

import torch
import triton
import triton.language as tl
from torch import Tensor

_BLOCK_F = 32


def _accumulator(dtype: torch.dtype):
    return tl.float64 if dtype == torch.float64 else tl.float32


@triton.jit
def _edge_value(src, col, edge_term, e, f, fmask, channels,
                HAS_COL: tl.constexpr, HAS_TERM: tl.constexpr, ACC: tl.constexpr):
    if HAS_COL:
        source = tl.load(col + e)
    else:
        source = e
    x = tl.load(src + source * channels + f, mask=fmask, other=0.0).to(ACC)
    if HAS_TERM:
        x += tl.load(edge_term + e * channels + f, mask=fmask, other=0.0).to(ACC)
    return x


@triton.jit
def _forward_kernel(src, ptr, col, edge_term, sum_out, m2_out, lo_out, hi_out, tlo_out, thi_out,
                    channels, HAS_COL: tl.constexpr, HAS_TERM: tl.constexpr,
                    MOMENTS: tl.constexpr, EXTREMES: tl.constexpr, ACC: tl.constexpr,
                    BLOCK_F: tl.constexpr):
    row = tl.program_id(0)
    f = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
    fmask = f < channels
    start = tl.load(ptr + row)
    end = tl.load(ptr + row + 1)
    out = row * channels + f
    if start == end:
        zero = tl.zeros([BLOCK_F], dtype=ACC)
        tl.store(sum_out + out, zero, mask=fmask)
        if MOMENTS:
            tl.store(m2_out + out, zero, mask=fmask)
        if EXTREMES:
            tl.store(lo_out + out, zero, mask=fmask)
            tl.store(hi_out + out, zero, mask=fmask)
            tl.store(tlo_out + out, tl.zeros([BLOCK_F], tl.int32), mask=fmask)
            tl.store(thi_out + out, tl.zeros([BLOCK_F], tl.int32), mask=fmask)
    else:
        first = _edge_value(src, col, edge_term, start, f, fmask, channels, HAS_COL, HAS_TERM, ACC)
        total = first
        s1 = tl.zeros([BLOCK_F], dtype=ACC)
        s2 = tl.zeros([BLOCK_F], dtype=ACC)
        vmin = first
        vmax = first
        nmin = tl.full([BLOCK_F], 1, tl.int32)
        nmax = tl.full([BLOCK_F], 1, tl.int32)
        for e in range(start + 1, end):
            x = _edge_value(src, col, edge_term, e, f, fmask, channels, HAS_COL, HAS_TERM, ACC)
            total += x
            if MOMENTS:
                dx = x - first
                s1 += dx
                s2 += dx * dx
            if EXTREMES:
                # a new extreme restarts the tie count; a NaN replaces a number once
                lower = (x < vmin) | ((x != x) & (vmin == vmin))
                higher = (x > vmax) | ((x != x) & (vmax == vmax))
                nmin = tl.where(lower, 1, tl.where(x == vmin, nmin + 1, nmin))
                nmax = tl.where(higher, 1, tl.where(x == vmax, nmax + 1, nmax))
                vmin = tl.where(lower, x, vmin)
                vmax = tl.where(higher, x, vmax)
        tl.store(sum_out + out, total, mask=fmask)
        if MOMENTS:
            m2 = tl.maximum(s2 - s1 * s1 / (end - start).to(ACC), 0.0)
            tl.store(m2_out + out, m2, mask=fmask)
        if EXTREMES:
            tl.store(lo_out + out, vmin, mask=fmask)
            tl.store(hi_out + out, vmax, mask=fmask)
            tl.store(tlo_out + out, nmin, mask=fmask)
            tl.store(thi_out + out, nmax, mask=fmask)


@triton.jit
def _edge_gradient(g_sum, g_m2, g_min, g_max, total, low, high, ties_lo, ties_hi, k, x, degree,
                   fmask, HAS_GSUM: tl.constexpr, HAS_GM2: tl.constexpr, HAS_GMIN: tl.constexpr,
                   HAS_GMAX: tl.constexpr, ACC: tl.constexpr):
    """d/dx_e of g_sum.sum + g_m2.m2 + g_min.min + g_max.max (k: the row's offsets);
    x is compared with the extremes after rounding to their dtype, as they were stored."""
    g = tl.zeros_like(x)
    if HAS_GSUM:
        g += tl.load(g_sum + k, mask=fmask, other=0.0).to(ACC)
    if HAS_GM2:
        mean = tl.load(total + k, mask=fmask, other=0.0).to(ACC) / degree
        g += 2.0 * tl.load(g_m2 + k, mask=fmask, other=0.0).to(ACC) * (x - mean)
    if HAS_GMIN:
        extreme = tl.load(low + k, mask=fmask, other=0.0)
        share = tl.load(g_min + k, mask=fmask, other=0.0).to(ACC) / tl.load(ties_lo + k, mask=fmask, other=1)
        g += tl.where(x.to(extreme.dtype) == extreme, share, 0.0)
    if HAS_GMAX:
        extreme = tl.load(high + k, mask=fmask, other=0.0)
        share = tl.load(g_max + k, mask=fmask, other=0.0).to(ACC) / tl.load(ties_hi + k, mask=fmask, other=1)
        g += tl.where(x.to(extreme.dtype) == extreme, share, 0.0)
    return g


@triton.jit
def _backward_kernel(g_sum, g_m2, g_min, g_max, src, ptr, col, edge_term, total, low, high, ties_lo,
                     ties_hi, out_index, grad, channels, HAS_COL: tl.constexpr, HAS_TERM: tl.constexpr,
                     HAS_OUT_INDEX: tl.constexpr, HAS_GSUM: tl.constexpr, HAS_GM2: tl.constexpr,
                     HAS_GMIN: tl.constexpr, HAS_GMAX: tl.constexpr, ACC: tl.constexpr,
                     BLOCK_F: tl.constexpr):
    row = tl.program_id(0)
    f = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
    fmask = f < channels
    start = tl.load(ptr + row)
    end = tl.load(ptr + row + 1)
    k = row * channels + f
    degree = (end - start).to(ACC)
    for e in range(start, end):
        x = _edge_value(src, col, edge_term, e, f, fmask, channels, HAS_COL, HAS_TERM, ACC)
        g = _edge_gradient(g_sum, g_m2, g_min, g_max, total, low, high, ties_lo, ties_hi, k, x,
                           degree, fmask, HAS_GSUM, HAS_GM2, HAS_GMIN, HAS_GMAX, ACC)
        if HAS_OUT_INDEX:
            target = tl.load(out_index + e)
        else:
            target = e
        tl.store(grad + target * channels + f, g, mask=fmask)


@triton.jit
def _backward_gather_kernel(g_sum, g_m2, g_min, g_max, src, ptr, edge_term, total, low, high,
                            ties_lo, ties_hi, csc_ptr, csc_edge, edge_row, grad, channels, HAS_TERM: tl.constexpr,
                            HAS_GSUM: tl.constexpr, HAS_GM2: tl.constexpr, HAS_GMIN: tl.constexpr,
                            HAS_GMAX: tl.constexpr, ACC: tl.constexpr, BLOCK_F: tl.constexpr):
    source = tl.program_id(0)
    f = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
    fmask = f < channels
    x_source = tl.load(src + source * channels + f, mask=fmask, other=0.0).to(ACC)
    acc = tl.zeros([BLOCK_F], dtype=ACC)
    for kk in range(tl.load(csc_ptr + source), tl.load(csc_ptr + source + 1)):
        e = tl.load(csc_edge + kk)
        row = tl.load(edge_row + e)
        x = x_source
        if HAS_TERM:
            x += tl.load(edge_term + e * channels + f, mask=fmask, other=0.0).to(ACC)
        degree = (tl.load(ptr + row + 1) - tl.load(ptr + row)).to(ACC)
        acc += _edge_gradient(g_sum, g_m2, g_min, g_max, total, low, high, ties_lo, ties_hi,
                              row * channels + f, x, degree, fmask, HAS_GSUM, HAS_GM2, HAS_GMIN,
                              HAS_GMAX, ACC)
    tl.store(grad + source * channels + f, acc, mask=fmask)


def _or_dummy(t: Optional[Tensor], like: Tensor) -> Tensor:
    """Triton needs a pointer for every argument; absent ones are never read."""
    return t if t is not None and t.numel() > 0 else like


def _extremes(low, high, ties_lo, ties_hi, values: Tensor, ints: Tensor) -> tuple[Tensor, ...]:
    return (_or_dummy(low, values), _or_dummy(high, values), _or_dummy(ties_lo, ints),
            _or_dummy(ties_hi, ints))


def _grid(rows: int, channels: int) -> tuple[int, int]:
    return (rows, triton.cdiv(channels, _BLOCK_F))


def segment_stats(src: Tensor, ptr: Tensor, col: Optional[Tensor], edge_term: Optional[Tensor],
                  col_is_permutation: bool, moments: bool, extremes: bool,
                  ties: bool = True) -> tuple[Tensor, ...]:
    rows, channels = ptr.numel() - 1, src.size(1)
    full = src.new_empty(rows, channels)
    none = src.new_empty(0)
    total = full
    m2 = src.new_empty(rows, channels) if moments else none
    lo = src.new_empty(rows, channels) if extremes else none
    hi = src.new_empty(rows, channels) if extremes else none
    tlo = src.new_empty(rows, channels, dtype=torch.int32) if extremes else none.int()
    thi = src.new_empty(rows, channels, dtype=torch.int32) if extremes else none.int()
    if rows > 0 and channels > 0:
        _forward_kernel[_grid(rows, channels)](
            src, ptr, _or_dummy(col, ptr), _or_dummy(edge_term, src), total, _or_dummy(m2, total),
            _or_dummy(lo, total), _or_dummy(hi, total), _or_dummy(tlo, ptr), _or_dummy(thi, ptr),
            channels, HAS_COL=col is not None, HAS_TERM=edge_term is not None, MOMENTS=moments,
            EXTREMES=extremes, ACC=_accumulator(src.dtype), BLOCK_F=_BLOCK_F)
    if not ties:  # counted anyway (one kernel), returned only when asked for, as on CPU
        tlo = thi = none.int()
    return total, m2, lo, hi, tlo, thi


def _gradient_flags(grads: tuple[Optional[Tensor], ...]) -> dict[str, bool]:
    present = [g is not None and g.numel() > 0 for g in grads]
    return dict(zip(("HAS_GSUM", "HAS_GM2", "HAS_GMIN", "HAS_GMAX"), present, strict=True))


def segment_stats_backward(grad_sum, grad_m2, grad_min, grad_max, src, ptr, col, edge_term, total,
                           low, high, ties_lo, ties_hi, out_index) -> Tensor:
    rows, channels = ptr.numel() - 1, src.size(1)
    edges = col.numel() if col is not None else (edge_term.size(0) if edge_term is not None
                                                 else src.size(0))
    out_rows = src.size(0) if out_index is not None else edges
    make = torch.zeros if out_index is not None and edges < out_rows else torch.empty
    grad = make(out_rows, channels, dtype=src.dtype, device=src.device)
    grads = (grad_sum, grad_m2, grad_min, grad_max)
    if rows > 0 and channels > 0:
        _backward_kernel[_grid(rows, channels)](
            *(_or_dummy(g, total) for g in grads), src, ptr, _or_dummy(col, ptr),
            _or_dummy(edge_term, src), total, *_extremes(low, high, ties_lo, ties_hi, total, ptr),
            _or_dummy(out_index, ptr), grad, channels, HAS_COL=col is not None,
            HAS_TERM=edge_term is not None, HAS_OUT_INDEX=out_index is not None,
            **_gradient_flags(grads), ACC=_accumulator(src.dtype), BLOCK_F=_BLOCK_F)
    return grad


def segment_stats_backward_gather(grad_sum, grad_m2, grad_min, grad_max, src, ptr, col, edge_term,
                                  total, low, high, ties_lo, ties_hi, csc_ptr, csc_edge,
                                  edge_row) -> Tensor:
    sources, channels = src.shape
    grad = torch.empty_like(src)
    grads = (grad_sum, grad_m2, grad_min, grad_max)
    if sources > 0 and channels > 0:
        _backward_gather_kernel[_grid(sources, channels)](
            *(_or_dummy(g, total) for g in grads), src, ptr, _or_dummy(edge_term, src), total,
            *_extremes(low, high, ties_lo, ties_hi, total, ptr), csc_ptr, csc_edge, edge_row, grad,
            channels, HAS_TERM=edge_term is not None, **_gradient_flags(grads),
            ACC=_accumulator(src.dtype), BLOCK_F=_BLOCK_F)
    return grad
