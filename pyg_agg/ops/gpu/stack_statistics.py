"""Triton kernels of the statistics' epilogue (the CUDA side of
``pyg_agg::stack_statistics``; the CPU side is ``csrc/cpu/stack_statistics.cpp``,
whose formulas these repeat).

One program per (row, block of channels) reads the row's primitives once and
writes every slot of the stacked ``[N, A, F]`` output; the backward reads the
row's ``A`` gradient slots once and writes each primitive's gradient once. The
kind codes (``multi.STACKABLE``) come as a small int32 tensor. With a
``row_order``, program ``r`` serves row ``row_order[r]``: output (and gradient)
row ``r``, primitive row ``row_order[r]``. With ``scales`` (``[N, S]``) the
program writes the row's ``S`` scaled copies, ``[N, S, A, F]``, and the
backward sums the ``S`` gradient copies as it reads them.
"""
from __future__ import annotations

from typing import Optional

import torch
import triton
import triton.language as tl
from torch import Tensor

from pyg_agg.ops.gpu.segment_stats import _accumulator, _grid, _or_dummy

_BLOCK_F = 32
# The codes of multi.STACKABLE and the primitive each reads.
_SUM, _MEAN, _MIN, _MAX, _VAR, _STD = range(6)


@triton.jit
def _load(base, offs, fmask, PRESENT: tl.constexpr, ACC: tl.constexpr, BLOCK_F: tl.constexpr):
    if PRESENT:
        return tl.load(base + offs, mask=fmask, other=0.0).to(ACC)
    return tl.zeros([BLOCK_F], dtype=ACC)


@triton.jit
def _std(var, eps, PYG_MODE: tl.constexpr):
    if PYG_MODE:
        return tl.where(var > eps, tl.sqrt(var), 0.0)
    return tl.sqrt(tl.where(var < 0.0, 0.0, var) + eps)  # NaN stays NaN, as std::max


@triton.jit
def _row(m2, counts, order, channels, eps, HAS_M2: tl.constexpr, HAS_ORDER: tl.constexpr,
         PYG_MODE: tl.constexpr, ACC: tl.constexpr, BLOCK_F: tl.constexpr):
    """This program's output row, its primitives' row, channels and offsets,
    the row's count, degree (at least 1), variance and std."""
    out_row = tl.program_id(0)
    if HAS_ORDER:
        row = tl.load(order + out_row)
    else:
        row = out_row
    f = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
    fmask = f < channels
    offs = row * channels + f
    count = tl.load(counts + row)
    degree = tl.maximum(count, 1).to(ACC)
    var = _load(m2, offs, fmask, HAS_M2, ACC, BLOCK_F) / degree
    return out_row, row, f, fmask, offs, count, degree, var, _std(var, eps, PYG_MODE)


@triton.jit
def _stack_kernel(total, m2, low, high, counts, shift, kinds, order, scales, out, slots, channels,
                  num_scales, eps, HAS_TOTAL: tl.constexpr, HAS_M2: tl.constexpr,
                  HAS_LOW: tl.constexpr, HAS_HIGH: tl.constexpr, HAS_SHIFT: tl.constexpr,
                  HAS_ORDER: tl.constexpr, HAS_SCALES: tl.constexpr, PYG_MODE: tl.constexpr,
                  ACC: tl.constexpr, BLOCK_F: tl.constexpr):
    out_row, row, f, fmask, offs, count, degree, var, std = _row(
        m2, counts, order, channels, eps, HAS_M2, HAS_ORDER, PYG_MODE, ACC, BLOCK_F)
    t = _load(total, offs, fmask, HAS_TOTAL, ACC, BLOCK_F)
    lo = _load(low, offs, fmask, HAS_LOW, ACC, BLOCK_F)
    hi = _load(high, offs, fmask, HAS_HIGH, ACC, BLOCK_F)
    sh = _load(shift, offs, fmask, HAS_SHIFT, ACC, BLOCK_F)
    for a in range(0, slots):
        kind = tl.load(kinds + a)
        value = tl.where(kind == _SUM, t + degree * sh,
                         tl.where(kind == _MEAN, t / degree + sh,
                                  tl.where(kind == _MIN, lo + sh,
                                           tl.where(kind == _MAX, hi + sh,
                                                    tl.where(kind == _VAR, var, std)))))
        value = tl.where(count > 0, value, 0.0)
        if HAS_SCALES:
            for j in range(0, num_scales):
                factor = tl.load(scales + row * num_scales + j).to(ACC)
                tl.store(out + ((out_row * num_scales + j) * slots + a) * channels + f,
                         factor * value, mask=fmask)
        else:
            tl.store(out + (out_row * slots + a) * channels + f, value, mask=fmask)


@triton.jit
def _stack_backward_kernel(grad, m2, counts, kinds, order, scales, g_total, g_m2, g_low, g_high,
                           g_shift, slots, channels, num_scales, eps, HAS_TOTAL: tl.constexpr,
                           HAS_M2: tl.constexpr, HAS_LOW: tl.constexpr, HAS_HIGH: tl.constexpr,
                           HAS_SHIFT: tl.constexpr, HAS_ORDER: tl.constexpr,
                           HAS_SCALES: tl.constexpr, PYG_MODE: tl.constexpr, ACC: tl.constexpr,
                           BLOCK_F: tl.constexpr):
    out_row, row, f, fmask, offs, count, degree, var, std = _row(
        m2, counts, order, channels, eps, HAS_M2, HAS_ORDER, PYG_MODE, ACC, BLOCK_F)
    if PYG_MODE:
        live = var > eps
    else:
        live = var > 0.0
    d_std = tl.where(live, 0.5 / tl.where(live, std * degree, 1.0), 0.0)  # no 1/0 where dead
    acc_total = tl.zeros([BLOCK_F], dtype=ACC)
    acc_m2 = tl.zeros([BLOCK_F], dtype=ACC)
    acc_low = tl.zeros([BLOCK_F], dtype=ACC)
    acc_high = tl.zeros([BLOCK_F], dtype=ACC)
    acc_shift = tl.zeros([BLOCK_F], dtype=ACC)
    for a in range(0, slots):
        kind = tl.load(kinds + a)
        if HAS_SCALES:  # the gradient summed over the scalers
            g = tl.zeros([BLOCK_F], dtype=ACC)
            for j in range(0, num_scales):
                factor = tl.load(scales + row * num_scales + j).to(ACC)
                g += factor * tl.load(grad + ((out_row * num_scales + j) * slots + a) * channels + f,
                                      mask=fmask, other=0.0).to(ACC)
        else:
            g = tl.load(grad + (out_row * slots + a) * channels + f, mask=fmask, other=0.0).to(ACC)
        acc_total += tl.where(kind == _SUM, g, tl.where(kind == _MEAN, g / degree, 0.0))
        acc_shift += tl.where(kind == _SUM, degree * g, tl.where(kind <= _MAX, g, 0.0))
        acc_low += tl.where(kind == _MIN, g, 0.0)
        acc_high += tl.where(kind == _MAX, g, 0.0)
        acc_m2 += tl.where(kind == _VAR, g / degree, tl.where(kind == _STD, g * d_std, 0.0))
    nonempty = count > 0  # an empty row's slots are constants: zero gradients
    if HAS_TOTAL:
        tl.store(g_total + offs, tl.where(nonempty, acc_total, 0.0), mask=fmask)
    if HAS_M2:
        tl.store(g_m2 + offs, tl.where(nonempty, acc_m2, 0.0), mask=fmask)
    if HAS_LOW:
        tl.store(g_low + offs, tl.where(nonempty, acc_low, 0.0), mask=fmask)
    if HAS_HIGH:
        tl.store(g_high + offs, tl.where(nonempty, acc_high, 0.0), mask=fmask)
    if HAS_SHIFT:
        tl.store(g_shift + offs, tl.where(nonempty, acc_shift, 0.0), mask=fmask)


def _reads(kinds: list[int]) -> dict[str, bool]:
    """Which primitives the kinds read."""
    return {"HAS_TOTAL": any(k in (_SUM, _MEAN) for k in kinds),
            "HAS_M2": any(k in (_VAR, _STD) for k in kinds),
            "HAS_LOW": _MIN in kinds, "HAS_HIGH": _MAX in kinds}


def stack_statistics(total: Tensor, m2: Tensor, low: Tensor, high: Tensor, counts: Tensor,
                     shift: Optional[Tensor], kinds: list[int], eps: float,
                     pyg_mode: bool, row_order: Optional[Tensor] = None,
                     scales: Optional[Tensor] = None) -> Tensor:
    reads = _reads(kinds)
    like = next(t for t, read in zip((total, m2, low, high), reads.values(), strict=True) if read)
    rows, channels = counts.numel(), like.size(1)
    num_scales = 1 if scales is None else scales.size(1)
    per_scale = (len(kinds), channels)
    out = like.new_empty(rows, *per_scale) if scales is None else like.new_empty(rows, num_scales,
                                                                                 *per_scale)
    if out.numel() > 0:
        codes = torch.tensor(kinds, dtype=torch.int32, device=like.device)
        _stack_kernel[_grid(rows, channels)](
            _or_dummy(total, like), _or_dummy(m2, like), _or_dummy(low, like),
            _or_dummy(high, like), counts, _or_dummy(shift, like), codes,
            _or_dummy(row_order, counts), _or_dummy(scales, like), out, len(kinds), channels,
            num_scales, eps, **reads, HAS_SHIFT=shift is not None,
            HAS_ORDER=row_order is not None, HAS_SCALES=scales is not None, PYG_MODE=pyg_mode,
            ACC=_accumulator(like.dtype), BLOCK_F=_BLOCK_F)
    return out


def stack_statistics_backward(grad: Tensor, m2: Tensor, counts: Tensor, kinds: list[int],
                              eps: float, pyg_mode: bool, has_shift: bool,
                              row_order: Optional[Tensor] = None,
                              scales: Optional[Tensor] = None) -> tuple[Tensor, ...]:
    grad = grad.contiguous()
    rows, channels = grad.size(0), grad.size(-1)
    num_scales = 1 if scales is None else scales.size(1)
    reads = _reads(kinds)
    shifted = has_shift and (reads["HAS_TOTAL"] or reads["HAS_LOW"] or reads["HAS_HIGH"])
    present = [*reads.values(), shifted]
    outs = [grad.new_empty(rows, channels) if p else grad.new_empty(0) for p in present]
    if rows > 0 and channels > 0:
        codes = torch.tensor(kinds, dtype=torch.int32, device=grad.device)
        _stack_backward_kernel[_grid(rows, channels)](
            grad, _or_dummy(m2, grad), counts, codes, _or_dummy(row_order, counts),
            _or_dummy(scales, grad), *(_or_dummy(o, grad) for o in outs), len(kinds), channels,
            num_scales, eps, **reads, HAS_SHIFT=shifted, HAS_ORDER=row_order is not None,
            HAS_SCALES=scales is not None, PYG_MODE=pyg_mode, ACC=_accumulator(grad.dtype),
            BLOCK_F=_BLOCK_F)
    return tuple(outs)
