"""The native ops: schemas, build and loading, fake kernels and autograd.

Every native op is a ``torch.library`` custom op in the ``pyg_agg``
namespace. Its schema, fake (meta) kernel and autograd formula are defined
here, once; the device kernels register themselves against that schema:

* CPU: C++ in ``csrc/cpu/`` (ATen, ``at::parallel_for``), compiled with
  :func:`torch.utils.cpp_extension.load` into a persistent build cache
  (``$PYG_AGG_CACHE/native/<torch>-<source hash>``, see
  :func:`pyg_agg.datasets.root.cache_root`). ``make install`` builds it
  (``python -m pyg_agg.ops``); otherwise the first import does, once.
* CUDA: Triton kernels in :mod:`pyg_agg.ops.gpu`, registered when Triton
  imports.

Where the C++ build is impossible (no compiler, no ninja) the import still
succeeds: one warning says why, :data:`HAS_NATIVE` is ``False`` and the
pure-torch backend runs. ``PYG_AGG_NATIVE=0`` skips the build and the load.

Because the ops have fake kernels and registered autograd, they trace under
``torch.compile(fullgraph=True)`` with symbolic sizes: no graph break, no
recompilation per graph size.
"""
from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import platform
import warnings
from pathlib import Path
from typing import Optional

import torch
from torch import Tensor

_log = logging.getLogger(__name__)
_CSRC = Path(__file__).parent / "csrc"
_CPU_SOURCES = sorted((_CSRC / "cpu").glob("*.cpp"))
_CPU_HEADERS = sorted((_CSRC / "cpu").glob("*.h"))  # included by the sources: part of the build's key
# -fopenmp: at::parallel_for is an inline OpenMP loop, serial without it.
# -march=native: the channel loops vectorise to the widest registers this CPU has
# (measured about 2x on AVX-512 against the default SSE2); the build directory is
# keyed by the CPU, so a cache shared between different machines never mixes them.
# -fno-math-errno: std::sqrt need not set errno, so the std loops vectorise (with
# errno they call libm once per element: the std slot was 5x the other slots).
_CFLAGS = ["-O3", "-fopenmp", "-march=native", "-fno-math-errno"]

_LIB = torch.library.Library("pyg_agg", "DEF")  # noqa: TOR901 - the schemas live in Python
# Multi-statistic segment reduction over CSR rows (see csrc/cpu/segment_stats.cpp):
# row i reduces x_e = src[col[e] if col else e] (+ edge_term[e]), e in ptr[i]..ptr[i+1].
# Returns (sum, m2, min, max, ties_min, ties_max); m2 = sum of squared deviations
# from the row mean, ties_* (int32) = how many entries equal the extreme (the
# backward splits its gradient among them). Outputs not asked for (moments,
# extremes) have shape [0]; empty rows give 0. col_is_permutation says col is injective (an
# unsorted index's sort order), so the backward scatters without atomics or a sort.
# The tie counts serve only the min/max backward: ties=False skips them (shape [0]).
_LIB.define(
    "segment_stats(Tensor src, Tensor ptr, Tensor? col, Tensor? edge_term, "
    "bool col_is_permutation, bool moments, bool extremes, bool ties=True) "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)"
)
# Per-edge gradient [E, F] (rows written at out_index[e] when given, into [M, F]).
_LIB.define(
    "segment_stats_backward(Tensor? grad_sum, Tensor? grad_m2, Tensor? grad_min, "
    "Tensor? grad_max, Tensor src, Tensor ptr, Tensor? col, Tensor? edge_term, "
    "Tensor sum, Tensor low, Tensor high, Tensor ties_lo, Tensor ties_hi, Tensor? out_index) -> Tensor"
)
# Gradient [M, F] of the gather form with respect to src, over the transposed graph.
_LIB.define(
    "segment_stats_backward_gather(Tensor? grad_sum, Tensor? grad_m2, Tensor? grad_min, "
    "Tensor? grad_max, Tensor src, Tensor ptr, Tensor col, Tensor? edge_term, "
    "Tensor sum, Tensor low, Tensor high, Tensor ties_lo, Tensor ties_hi, Tensor csc_ptr, Tensor csc_edge, "
    "Tensor edge_row) -> Tensor"
)
# The stacked statistics [N, A, F] of a multi-aggregation from the primitives of
# segment_stats (see csrc/cpu/stack_statistics.cpp): slot a holds statistic
# kinds[a] (multi.STACKABLE's codes: sum, mean, min, max, var, std), the values
# shifted per row by shift (sum by d * shift, var/std not at all); empty rows 0.
# Primitives no kind reads may be [0]. Output row k holds row row_order[k] (a
# permutation of the rows, checked by the caller), or row k without one. With
# scales [N, S] (row i's, in row order) the output is [N, S, A, F], slot (s, a)
# holding scales[i, s] times statistic a.
_LIB.define(
    "stack_statistics(Tensor total, Tensor m2, Tensor low, Tensor high, Tensor counts, "
    "Tensor? shift, int[] kinds, float eps, bool pyg_mode, Tensor? row_order=None, "
    "Tensor? scales=None) -> Tensor"
)
# Gradients of (total, m2, low, high, shift); [0] where not read (shift: has_shift false).
# With scales, grad is [N, S, A, F]; the scales' own gradient is not computed here.
_LIB.define(
    "stack_statistics_backward(Tensor grad, Tensor m2, Tensor counts, int[] kinds, float eps, "
    "bool pyg_mode, bool has_shift, Tensor? row_order=None, Tensor? scales=None) "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor)"
)
# Stable counting sort of a segment index with entries in [0, buckets): returns
# (ptr [buckets + 1], perm [E]), bucket b's entries in input order being
# perm[ptr[b]:ptr[b + 1]]. The CSR of an unsorted index in two passes over it.
_LIB.define("counting_sort(Tensor index, SymInt buckets) -> (Tensor, Tensor)")
# Fused GATv2 attention over CSR rows (see csrc/cpu/dynamic_attention.cpp): row i
# attends over its edges with scores att . LeakyReLU(x_src[col] + x_dst[i]
# (+ W_e edge_attr)) and sums softmax * edge_scale * x_src[col]. Returns
# (out [N, H, C], lse [N, H], alpha [E, H] or [0]); lse is the row's log-sum-exp
# of the scores. weight_t is W_e transposed, [D, H*C]. Entries of col past ptr[-1]
# are parked (in no row). csc_* and edge_row, the transposed graph, are only
# kept for the backward (computed there when absent).
_LIB.define(
    "dynamic_attention(Tensor x_src, Tensor x_dst, Tensor att, Tensor ptr, Tensor col, "
    "Tensor? edge_attr, Tensor? weight_t, Tensor? edge_scale, float negative_slope, "
    "bool return_alpha, Tensor? csc_ptr, Tensor? csc_pos, Tensor? edge_row) -> (Tensor, Tensor, Tensor)"
)
# Gradients (x_src, x_dst, att, edge_attr, weight_t, edge_scale); absent inputs give [0].
_LIB.define(
    "dynamic_attention_backward(Tensor grad_out, Tensor? grad_alpha, Tensor x_src, Tensor x_dst, "
    "Tensor att, Tensor ptr, Tensor col, Tensor? edge_attr, Tensor? weight_t, Tensor? edge_scale, "
    "Tensor lse, float negative_slope, Tensor csc_ptr, Tensor csc_pos, Tensor edge_row) "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)"
)


def _cpu_signature() -> str:
    """The processor's model and instruction-set flags, which -march=native targets."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:  # not Linux: the machine type is what is known
        return platform.machine() + platform.processor()
    lines = [line for line in text.splitlines() if line.startswith(("model name", "flags"))]
    return "\n".join(sorted(set(lines)))


def build_directory() -> Path:
    """Where the C++ ops of this torch version and these sources are built."""
    from pyg_agg.datasets.root import cache_root

    digest = hashlib.sha256(" ".join(_CFLAGS).encode())
    digest.update(_cpu_signature().encode())
    for source in (*_CPU_SOURCES, *_CPU_HEADERS):
        digest.update(source.read_bytes())
    version = torch.__version__.replace("+", "_")
    return cache_root() / "native" / f"{version}-{digest.hexdigest()[:16]}"


_LIBRARY_NAME = "pyg_agg_native"


def _load_cpu_kernels() -> tuple[bool, str]:
    """Builds (once) and loads the C++ kernels; returns (loaded, why not).

    A built library is loaded directly, without asking
    :func:`torch.utils.cpp_extension.load` (which takes a lock file and runs
    ninja on every import). A build runs under an ``flock`` on
    ``build.lock``: the kernel releases it when its holder dies, so a killed
    build never leaves other processes waiting. cpp_extension's own lock
    file, which a killed build does leave behind, is then known to be stale
    and is removed first.
    """
    if os.environ.get("PYG_AGG_NATIVE", "1") == "0":
        return False, "PYG_AGG_NATIVE=0"
    try:
        directory = build_directory()
        library = directory / f"{_LIBRARY_NAME}.so"
        if not library.exists():
            directory.mkdir(parents=True, exist_ok=True)
            with open(directory / "build.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building it
                if not library.exists():
                    _build(directory)
        torch.ops.load_library(str(library))
    except Exception as error:  # no compiler, no ninja, a failed build: fall back, never crash
        reason = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
        return False, f"{type(error).__name__}: {reason}"
    return True, ""


def _build(directory: Path) -> None:
    from torch.utils import cpp_extension

    (directory / "lock").unlink(missing_ok=True)  # left by a killed build: we hold build.lock
    cpp_extension.load(
        name=_LIBRARY_NAME,
        sources=[str(s) for s in _CPU_SOURCES],
        build_directory=str(directory),
        extra_cflags=_CFLAGS,
        extra_ldflags=["-fopenmp"],
        is_python_module=False,
        verbose=False,
    )


HAS_NATIVE, WHY_NOT_NATIVE = _load_cpu_kernels()
if not HAS_NATIVE and WHY_NOT_NATIVE != "PYG_AGG_NATIVE=0":
    warnings.warn(
        f"pyg_agg: the native CPU ops could not be built ({WHY_NOT_NATIVE}); "
        f"the pure-torch backend runs instead. Install a C++ compiler and ninja, "
        f"then `python -m pyg_agg.ops`.",
        RuntimeWarning,
        stacklevel=2,
    )

try:  # the CUDA kernels: Triton, when it imports (a CPU-only machine may lack it)
    from pyg_agg.ops.gpu import register_cuda_kernels

    register_cuda_kernels()
    HAS_TRITON = True
except ImportError:
    HAS_TRITON = False


def has_kernels(device_type: str) -> bool:
    """Whether the native ops have kernels for devices of this type."""
    return {"cpu": HAS_NATIVE, "cuda": HAS_TRITON}.get(device_type, False)


# ---------------------------------------------------------------- fake kernels
@torch.library.register_fake("pyg_agg::segment_stats")
def _segment_stats_fake(src, ptr, col, edge_term, col_is_permutation, moments, extremes, ties=True):
    rows, channels = ptr.shape[0] - 1, src.shape[1]

    def full(dtype=src.dtype):
        return src.new_empty((rows, channels), dtype=dtype)

    def none(dtype=src.dtype):
        return src.new_empty((0,), dtype=dtype)

    return (
        full(),
        full() if moments else none(),
        full() if extremes else none(),
        full() if extremes else none(),
        full(torch.int32) if extremes and ties else none(torch.int32),
        full(torch.int32) if extremes and ties else none(torch.int32),
    )


def _edge_count(src: Tensor, col: Optional[Tensor], edge_term: Optional[Tensor]):
    if col is not None:
        return col.shape[0]
    return edge_term.shape[0] if edge_term is not None else src.shape[0]


@torch.library.register_fake("pyg_agg::segment_stats_backward")
def _segment_stats_backward_fake(grad_sum, grad_m2, grad_min, grad_max, src, ptr, col,
                                 edge_term, sum, low, high, ties_lo, ties_hi, out_index):
    rows = src.shape[0] if out_index is not None else _edge_count(src, col, edge_term)
    return src.new_empty((rows, src.shape[1]))


@torch.library.register_fake("pyg_agg::segment_stats_backward_gather")
def _segment_stats_backward_gather_fake(grad_sum, grad_m2, grad_min, grad_max, src, ptr, col,
                                        edge_term, sum, low, high, ties_lo, ties_hi, csc_ptr,
                                        csc_edge, edge_row):
    return torch.empty_like(src)


# -------------------------------------------------------------------- autograd
def _setup_context(ctx, inputs, output):
    src, ptr, col, edge_term, col_is_permutation, _moments, _extremes, _ties = inputs
    total, _m2, low, high, ties_lo, ties_hi = output
    ctx.col_is_permutation = col_is_permutation
    ctx.save_for_backward(src, ptr, col, edge_term, total, low, high, ties_lo, ties_hi)
    ctx.mark_non_differentiable(ties_lo, ties_hi)
    # the backward takes absent gradients as None: no zero-filled [N, F] tensor
    # for the tie counts (which have none) or for an unused primitive
    ctx.set_materialize_grads(False)


def _present(grad: Optional[Tensor]) -> Optional[Tensor]:
    """A gradient the kernels should read: absent outputs come back empty or None."""
    return grad.contiguous() if grad is not None and grad.numel() > 0 else None


def _edge_gradients_are_smaller(ptr: Tensor, col: Tensor, grads: list[Optional[Tensor]]) -> bool:
    """Whether the gather form's backward should hold the ``[E, F]`` per-edge
    gradients rather than ``segment_stats_backward_gather``'s per-row table of
    coefficients (``[N, w * F]``, ``w`` = 1 for the sum, + 2 with the moments,
    + 2 with min/max): whichever is smaller, so low-degree graphs (molecules,
    about 2 edges per row) stream fewer bytes, and a power-law graph never
    holds an edge-sized tensor."""
    _, grad_m2, grad_min, grad_max = grads
    width = 1 + 2 * (grad_m2 is not None) + 2 * (grad_min is not None or grad_max is not None)
    return col.shape[0] <= width * (ptr.shape[0] - 1)


def _backward(ctx, grad_sum, grad_m2, grad_min, grad_max, _grad_ties_lo, _grad_ties_hi):
    src, ptr, col, edge_term, *saved = ctx.saved_tensors
    grads = [_present(g) for g in (grad_sum, grad_m2, grad_min, grad_max)]
    if all(g is None for g in grads):
        return None, None, None, None, None, None, None, None
    grad_src = grad_edge = None
    needs_src, needs_edge = ctx.needs_input_grad[0], ctx.needs_input_grad[3]
    if needs_edge or (needs_src and col is None):
        grad_edge = torch.ops.pyg_agg.segment_stats_backward(*grads, src, ptr, col, edge_term, *saved, None)
        if col is None:
            grad_src = grad_edge
    if needs_src and col is not None:
        if ctx.col_is_permutation:
            grad_src = torch.ops.pyg_agg.segment_stats_backward(*grads, src, ptr, col, edge_term, *saved, col)
        else:
            from pyg_agg.ops.graph import transpose_csr  # graph imports this module

            csc_ptr, csc_edge, edge_row = transpose_csr(ptr, col, src.shape[0])
            if grad_edge is None and _edge_gradients_are_smaller(ptr, col, grads):
                grad_edge = torch.ops.pyg_agg.segment_stats_backward(*grads, src, ptr, col, edge_term,
                                                                     *saved, None)
            if grad_edge is not None:
                # each source sums the per-edge gradients of its own edges over
                # the transposed graph (the gather kernel's order, so its sums)
                grad_src = torch.ops.pyg_agg.segment_stats(grad_edge, csc_ptr, csc_edge, None, False,
                                                           False, False, False)[0]
            else:
                grad_src = torch.ops.pyg_agg.segment_stats_backward_gather(
                    *grads, src, ptr, col, edge_term, *saved, csc_ptr, csc_edge, edge_row)
    return grad_src, None, None, grad_edge if needs_edge else None, None, None, None, None


torch.library.register_autograd("pyg_agg::segment_stats", _backward, setup_context=_setup_context)


# The kind codes (multi.STACKABLE's order) that read each primitive, and those
# the shift moves.
_READS_TOTAL, _READS_M2, _READS_LOW, _READS_HIGH = (0, 1), (4, 5), (2,), (3,)
_SHIFTED = (0, 1, 2, 3)


@torch.library.register_fake("pyg_agg::stack_statistics")
def _stack_statistics_fake(total, m2, low, high, counts, shift, kinds, eps, pyg_mode,
                           row_order=None, scales=None):
    like = next(t for t in (total, m2, low, high) if t.dim() == 2)
    per_scale = (len(kinds), like.shape[1])
    if scales is None:
        return like.new_empty((counts.shape[0], *per_scale))
    return like.new_empty((counts.shape[0], scales.shape[1], *per_scale))


@torch.library.register_fake("pyg_agg::stack_statistics_backward")
def _stack_statistics_backward_fake(grad, m2, counts, kinds, eps, pyg_mode, has_shift,
                                    row_order=None, scales=None):
    rows, channels = grad.shape[0], grad.shape[-1]

    def made(codes):
        shape = (rows, channels) if any(k in codes for k in kinds) else (0,)
        return grad.new_empty(shape)

    shifted = has_shift and any(k in _SHIFTED for k in kinds)
    return (made(_READS_TOTAL), made(_READS_M2), made(_READS_LOW), made(_READS_HIGH),
            grad.new_empty((rows, channels) if shifted else (0,)))


def _stack_setup_context(ctx, inputs, output):
    total, m2, low, high, counts, shift, kinds, eps, pyg_mode, row_order, scales = inputs
    ctx.kinds, ctx.eps, ctx.pyg_mode, ctx.has_shift = kinds, eps, pyg_mode, shift is not None
    # the scales' gradient (trainable degree normalisers, rarely) recomputes the
    # unscaled statistics, so the primitives are kept only then
    ctx.scales_need_grad = scales is not None and scales.requires_grad
    kept = (total, low, high, shift) if ctx.scales_need_grad else (None,) * 4
    ctx.save_for_backward(m2, counts, row_order, scales, *kept)


def _stack_backward(ctx, grad):
    m2, counts, row_order, scales, total, low, high, shift = ctx.saved_tensors
    grads = torch.ops.pyg_agg.stack_statistics_backward(grad, m2, counts, ctx.kinds, ctx.eps,
                                                         ctx.pyg_mode, ctx.has_shift, row_order,
                                                         scales)
    g_total, g_m2, g_low, g_high, g_shift = (
        g if needed and g.numel() > 0 else None
        for g, needed in zip(grads, (ctx.needs_input_grad[i] for i in (0, 1, 2, 3, 5)), strict=True))
    g_scales = None
    if ctx.scales_need_grad:
        unscaled = torch.ops.pyg_agg.stack_statistics(total, m2, low, high, counts, shift, ctx.kinds,
                                                      ctx.eps, ctx.pyg_mode, row_order)
        # d out[r, s] / d scales[i, s] = stat[r] (row r holding row i = row_order[r])
        g_rows = torch.einsum("rsk,rk->rs", grad.flatten(2), unscaled.flatten(1))
        g_scales = g_rows if row_order is None else torch.empty_like(g_rows).index_copy_(
            0, row_order, g_rows)
    return g_total, g_m2, g_low, g_high, None, g_shift, None, None, None, None, g_scales


torch.library.register_autograd("pyg_agg::stack_statistics", _stack_backward,
                                setup_context=_stack_setup_context)


@torch.library.register_fake("pyg_agg::counting_sort")
def _counting_sort_fake(index, buckets):
    return index.new_empty((buckets + 1,)), torch.empty_like(index)


@torch.library.register_fake("pyg_agg::dynamic_attention")
def _dynamic_attention_fake(x_src, x_dst, att, ptr, col, edge_attr, weight_t, edge_scale,
                            negative_slope, return_alpha, csc_ptr, csc_pos, edge_row):
    alpha_shape = (col.shape[0], att.shape[0]) if return_alpha else (0,)
    return torch.empty_like(x_dst), x_dst.new_empty((x_dst.shape[0], att.shape[0])), \
        x_dst.new_empty(alpha_shape)


@torch.library.register_fake("pyg_agg::dynamic_attention_backward")
def _dynamic_attention_backward_fake(grad_out, grad_alpha, x_src, x_dst, att, ptr, col, edge_attr,
                                     weight_t, edge_scale, lse, negative_slope, csc_ptr, csc_pos,
                                     edge_row):
    def like(t):
        return torch.empty_like(t) if t is not None else att.new_empty((0,))

    return (torch.empty_like(x_src), torch.empty_like(x_dst), torch.empty_like(att),
            like(edge_attr), like(weight_t), like(edge_scale))


def _attention_setup_context(ctx, inputs, output):
    (x_src, x_dst, att, ptr, col, edge_attr, weight_t, edge_scale, negative_slope, _return_alpha,
     csc_ptr, csc_pos, edge_row) = inputs
    ctx.negative_slope = negative_slope
    ctx.save_for_backward(x_src, x_dst, att, ptr, col, edge_attr, weight_t, edge_scale, output[1],
                          csc_ptr, csc_pos, edge_row)
    ctx.mark_non_differentiable(output[1])


def _attention_backward(ctx, grad_out, _grad_lse, grad_alpha):
    (x_src, x_dst, att, ptr, col, edge_attr, weight_t, edge_scale, lse,
     csc_ptr, csc_pos, edge_row) = ctx.saved_tensors
    if csc_ptr is None:
        from pyg_agg.ops.graph import transpose_csr  # graph imports this module

        csc_ptr, csc_pos, edge_row = transpose_csr(ptr, col, x_src.shape[0])
    if grad_out is None:
        grad_out = torch.zeros_like(x_dst)
    grads = torch.ops.pyg_agg.dynamic_attention_backward(
        grad_out.contiguous(), _present(grad_alpha), x_src, x_dst, att, ptr, col, edge_attr,
        weight_t, edge_scale, lse, ctx.negative_slope, csc_ptr, csc_pos, edge_row)
    g_src, g_dst, g_att, g_edge, g_weight, g_scale = (
        g if needed else None for g, needed in zip(
            grads, (ctx.needs_input_grad[i] for i in (0, 1, 2, 5, 6, 7)), strict=True))
    return g_src, g_dst, g_att, None, None, g_edge, g_weight, g_scale, None, None, None, None, None


torch.library.register_autograd("pyg_agg::dynamic_attention", _attention_backward,
                                setup_context=_attention_setup_context)


def segment_stats(src: Tensor, ptr: Tensor, col: Optional[Tensor] = None,
                  edge_term: Optional[Tensor] = None, col_is_permutation: bool = False,
                  moments: bool = True, extremes: bool = True,
                  ties: bool = True) -> tuple[Tensor, ...]:
    """Unchecked call of the native multi-statistic segment reduction.

    Callers validate first (see :func:`pyg_agg.ops.segment_statistics`):
    ``src`` ``[M, F]`` floating, ``ptr`` int64 ``[N + 1]``, ``col`` int64
    ``[E]`` with entries in ``[0, M)``, ``edge_term`` ``[E, F]``. ``ties=False``
    skips the tie counts of min/max, which only their backward reads: pass
    it when no gradient will be taken (see :func:`needs_ties`).
    """
    return torch.ops.pyg_agg.segment_stats(src, ptr, col, edge_term, col_is_permutation,
                                           moments, extremes, ties)


def needs_ties(*inputs: Optional[Tensor]) -> bool:
    """Whether a backward through ``segment_stats`` of these inputs can happen."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in inputs)


def stack_statistics(total: Tensor, m2: Tensor, low: Tensor, high: Tensor, counts: Tensor,
                     shift: Optional[Tensor], kinds: list[int], eps: float,
                     pyg_mode: bool, row_order: Optional[Tensor] = None,
                     scales: Optional[Tensor] = None) -> Tensor:
    """Unchecked call of the native epilogue: the statistics ``kinds`` stacked as
    ``[N, A, F]`` from the primitives of :func:`segment_stats` and int64
    ``counts``, in ``row_order`` (a permutation) when given, and times each of
    the ``[N, S]`` ``scales`` as ``[N, S, A, F]`` when given (see
    :func:`pyg_agg.ops.stacked_statistics`)."""
    def dense(t: Optional[Tensor]) -> Optional[Tensor]:
        return None if t is None else t.contiguous()

    return torch.ops.pyg_agg.stack_statistics(total, m2, low, high, counts.contiguous(), dense(shift),
                                              kinds, float(eps), pyg_mode, dense(row_order),
                                              dense(scales))
