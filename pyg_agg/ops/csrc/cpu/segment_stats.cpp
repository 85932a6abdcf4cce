// Multi-statistic segment reduction over CSR rows, CPU kernels.
//
// Row i of the output reduces the values x_e, e in ptr[i]..ptr[i+1], with
//   x_e = src[col[e]] (+ edge_term[e])   (gather form, col given)
//   x_e = src[e]      (+ edge_term[e])   (plain form)
// in one pass: sum, the sum of squared deviations m2 (shifted by the row's
// first value, so var = m2 / d never cancels catastrophically), and min/max
// with the number of entries tied at the extreme (the backward splits the
// gradient evenly among them, as PyG does).  Rows are independent, so the
// kernels need no atomics and are bitwise deterministic.
//
// The schemas are defined once, in Python (pyg_agg/ops/native.py); this file
// only registers the CPU implementations.
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "csr_parallel.h"

namespace pyg_agg {
namespace {

using at::Tensor;

// Work (edges x channels) below which a parallel region costs more than it saves.
constexpr int64_t kGrainWork = 1 << 15;

// Reads x_e for one edge: a pointer to the source row plus the optional edge term.
template <typename scalar_t>
struct EdgeValues {
  const scalar_t* src;
  const int64_t* col;        // nullptr: plain form
  const scalar_t* edge_term; // nullptr: no edge term
  int64_t channels;

  const scalar_t* source_row(int64_t e) const {
    return src + (col ? col[e] : e) * channels;
  }
  template <typename acc_t>
  acc_t value(const scalar_t* row, int64_t e, int64_t f) const {
    acc_t x = static_cast<acc_t>(row[f]);
    if (edge_term) x += static_cast<acc_t>(edge_term[e * channels + f]);
    return x;
  }
};

template <typename scalar_t>
EdgeValues<scalar_t> edge_values(const Tensor& src, const c10::optional<Tensor>& col,
                                 const c10::optional<Tensor>& edge_term) {
  return {src.data_ptr<scalar_t>(), col ? col->data_ptr<int64_t>() : nullptr,
          edge_term ? edge_term->data_ptr<scalar_t>() : nullptr, src.size(1)};
}

void check_inputs(const Tensor& src, const Tensor& ptr, const c10::optional<Tensor>& col,
                  const c10::optional<Tensor>& edge_term) {
  TORCH_CHECK(src.dim() == 2 && src.is_contiguous(), "segment_stats: src must be a contiguous [M, F] tensor");
  TORCH_CHECK(ptr.dim() == 1 && ptr.scalar_type() == at::kLong && ptr.is_contiguous(),
              "segment_stats: ptr must be a contiguous int64 [N + 1] tensor");
  if (col) {
    TORCH_CHECK(col->dim() == 1 && col->scalar_type() == at::kLong && col->is_contiguous(),
                "segment_stats: col must be a contiguous int64 [E] tensor");
  }
  if (edge_term) {
    TORCH_CHECK(edge_term->dim() == 2 && edge_term->is_contiguous() && edge_term->size(1) == src.size(1) &&
                    edge_term->scalar_type() == src.scalar_type(),
                "segment_stats: edge_term must be a contiguous [E, F] tensor of src's dtype");
  }
}

// How many edges ahead the gather form prefetches its source rows: the rows are
// read in random order, so without it every row costs a memory latency.
constexpr int64_t kPrefetchAhead = 8;

template <typename scalar_t>
inline void prefetch_row(const scalar_t* row, int64_t channels) {
  const char* bytes = reinterpret_cast<const char*>(row);
  for (int64_t b = 0; b < channels * static_cast<int64_t>(sizeof(scalar_t)); b += 64) {
    __builtin_prefetch(bytes + b);
  }
}

// Per-thread accumulators of one row, reused across the thread's rows. The
// extremes and their tie counts are double-buffered: each edge reads one copy
// and writes the other (see accumulate_edge).
template <typename acc_t>
struct RowAccumulators {
  std::vector<acc_t> total, shift, s1, s2, vmin, vmax, vmin_next, vmax_next;
  std::vector<int32_t> nmin, nmax, nmin_next, nmax_next;
  explicit RowAccumulators(int64_t channels)
      : total(channels), shift(channels), s1(channels), s2(channels), vmin(channels), vmax(channels),
        vmin_next(channels), vmax_next(channels), nmin(channels), nmax(channels), nmin_next(channels),
        nmax_next(channels) {}
};

// One edge's update of a row's accumulators. Out of line with __restrict__
// parameters: GCC honours restrict on parameters, and without it the loop is
// only vectorised behind a runtime alias check that fell back to scalar code.
// The extremes and tie counts are read from one buffer and written to another:
// updated in place, GCC turned `v = lower ? x : v` into masked stores, which
// the next edge's loads cannot forward from (a stall per edge, most of the
// forward on molecule-sized rows).
template <typename scalar_t, typename acc_t, bool kTerm, bool kMoments, bool kExtremes, bool kTies>
__attribute__((noinline)) void accumulate_edge(
    const scalar_t* __restrict__ row, const scalar_t* __restrict__ term, acc_t* __restrict__ total,
    const acc_t* __restrict__ shift, acc_t* __restrict__ s1, acc_t* __restrict__ s2,
    const acc_t* __restrict__ vmin, const acc_t* __restrict__ vmax, const int32_t* __restrict__ nmin,
    const int32_t* __restrict__ nmax, acc_t* __restrict__ vmin_next, acc_t* __restrict__ vmax_next,
    int32_t* __restrict__ nmin_next, int32_t* __restrict__ nmax_next, int64_t channels) {
  for (int64_t f = 0; f < channels; ++f) {
    acc_t x = static_cast<acc_t>(row[f]);
    if (kTerm) x += static_cast<acc_t>(term[f]);
    total[f] += x;
    if (kMoments) {
      const acc_t dx = x - shift[f];
      s1[f] += dx;
      s2[f] += dx * dx;
    }
    if (kExtremes) {
      // A new extreme restarts the tie count, an equal value adds one; a NaN
      // replaces a number once. Selects, not branches (nor int multiplies,
      // which cost 10 cycles a vector), so that GCC vectorises the loop with
      // mask blends.
      const acc_t lo = vmin[f], hi = vmax[f];
      const bool x_nan = x != x;
      const bool lower = (x < lo) | (x_nan & (lo == lo));
      const bool higher = (x > hi) | (x_nan & (hi == hi));
      if (kTies) {
        nmin_next[f] = lower ? 1 : nmin[f] + static_cast<int32_t>(x == lo);
        nmax_next[f] = higher ? 1 : nmax[f] + static_cast<int32_t>(x == hi);
      }
      vmin_next[f] = lower ? x : lo;
      vmax_next[f] = higher ? x : hi;
    }
  }
}

// An empty row (its values from `out` on): every statistic 0, no ties.
// Shared by both reducers; the outputs a flag leaves out are null.
template <typename scalar_t, bool kMoments, bool kExtremes, bool kTies>
inline void zero_row(scalar_t* sum_p, scalar_t* m2_p, scalar_t* lo_p, scalar_t* hi_p, int32_t* tlo_p,
                     int32_t* thi_p, int64_t out, int64_t channels) {
  for (int64_t f = out; f < out + channels; ++f) {
    sum_p[f] = scalar_t(0);
    if (kMoments) m2_p[f] = scalar_t(0);
    if (kExtremes) lo_p[f] = hi_p[f] = scalar_t(0);
    if (kTies) tlo_p[f] = thi_p[f] = 0;
  }
}

// A row's first edge sets its accumulators; its results are written once.
// Both out of line with __restrict__ parameters, like accumulate_edge: in
// the row loop the compiler cannot tell the arrays apart and kept these loops
// scalar, which cost more than the edges themselves on rows of degree ~2.
template <typename scalar_t, typename acc_t, bool kTerm, bool kMoments, bool kExtremes>
__attribute__((noinline)) void start_row(
    const scalar_t* __restrict__ row, const scalar_t* __restrict__ term, acc_t* __restrict__ total,
    acc_t* __restrict__ shift, acc_t* __restrict__ s1, acc_t* __restrict__ s2, acc_t* __restrict__ vmin,
    acc_t* __restrict__ vmax, int32_t* __restrict__ nmin, int32_t* __restrict__ nmax, int64_t channels) {
  for (int64_t f = 0; f < channels; ++f) {
    acc_t x = static_cast<acc_t>(row[f]);
    if (kTerm) x += static_cast<acc_t>(term[f]);
    total[f] = x;
    if (kMoments) { shift[f] = x; s1[f] = acc_t(0); s2[f] = acc_t(0); }
    if (kExtremes) { vmin[f] = x; vmax[f] = x; nmin[f] = 1; nmax[f] = 1; }
  }
}

template <typename scalar_t, typename acc_t, bool kMoments, bool kExtremes, bool kTies>
__attribute__((noinline)) void finish_row(
    const acc_t* __restrict__ total, const acc_t* __restrict__ s1, const acc_t* __restrict__ s2,
    const acc_t* __restrict__ vmin, const acc_t* __restrict__ vmax, const int32_t* __restrict__ nmin,
    const int32_t* __restrict__ nmax, acc_t degree, scalar_t* __restrict__ sum_out,
    scalar_t* __restrict__ m2_out, scalar_t* __restrict__ lo_out, scalar_t* __restrict__ hi_out,
    int32_t* __restrict__ tlo_out, int32_t* __restrict__ thi_out, int64_t channels) {
  const acc_t inv_degree = acc_t(1) / degree;
  for (int64_t f = 0; f < channels; ++f) {
    sum_out[f] = static_cast<scalar_t>(total[f]);
    if (kMoments) m2_out[f] = static_cast<scalar_t>(std::max(acc_t(0), s2[f] - s1[f] * s1[f] * inv_degree));
    if (kExtremes) {
      lo_out[f] = static_cast<scalar_t>(vmin[f]);
      hi_out[f] = static_cast<scalar_t>(vmax[f]);
    }
    if (kTies) {
      tlo_out[f] = nmin[f];
      thi_out[f] = nmax[f];
    }
  }
}

// Reduces rows [begin, end). The flags are template parameters so that each
// inner loop over channels is branch-free and vectorises: comparisons become
// selects, the tie counts blend in the same lanes as the values. The tie
// counts serve only the backward (kTies: asked for when a gradient will be).
template <typename scalar_t, typename acc_t, bool kTerm, bool kMoments, bool kExtremes, bool kTies>
void reduce_rows(const EdgeValues<scalar_t>& in, const int64_t* p, int64_t begin, int64_t end,
                 scalar_t* sum_p, scalar_t* m2_p, scalar_t* lo_p, scalar_t* hi_p, int32_t* tlo_p,
                 int32_t* thi_p) {
  const int64_t channels = in.channels;
  RowAccumulators<acc_t> acc(channels);
  acc_t* __restrict__ total = acc.total.data();
  acc_t* __restrict__ shift = acc.shift.data();
  acc_t* __restrict__ s1 = acc.s1.data();
  acc_t* __restrict__ s2 = acc.s2.data();
  // the current extremes and tie counts, and the buffers the next edge writes
  acc_t *vmin = acc.vmin.data(), *vmin_next = acc.vmin_next.data();
  acc_t *vmax = acc.vmax.data(), *vmax_next = acc.vmax_next.data();
  int32_t *nmin = acc.nmin.data(), *nmin_next = acc.nmin_next.data();
  int32_t *nmax = acc.nmax.data(), *nmax_next = acc.nmax_next.data();
  const int64_t last_edge = p[end];
  for (int64_t i = begin; i < end; ++i) {
    const int64_t first = p[i], last = p[i + 1];
    const int64_t out = i * channels;
    if (first == last) {
      zero_row<scalar_t, kMoments, kExtremes, kTies>(sum_p, m2_p, lo_p, hi_p, tlo_p, thi_p, out, channels);
      continue;
    }
    for (int64_t e = first; e < last; ++e) {
      if (in.col && e + kPrefetchAhead < last_edge) prefetch_row(in.source_row(e + kPrefetchAhead), channels);
      const scalar_t* __restrict__ row = in.source_row(e);
      const scalar_t* __restrict__ term = kTerm ? in.edge_term + e * channels : nullptr;
      if (e == first) {  // the first edge initialises every accumulator
        start_row<scalar_t, acc_t, kTerm, kMoments, kExtremes>(row, term, total, shift, s1, s2, vmin, vmax, nmin,
                                                               nmax, channels);
        continue;
      }
      accumulate_edge<scalar_t, acc_t, kTerm, kMoments, kExtremes, kTies>(
          row, term, total, shift, s1, s2, vmin, vmax, nmin, nmax, vmin_next, vmax_next, nmin_next, nmax_next,
          channels);
      if (kExtremes) {
        std::swap(vmin, vmin_next);
        std::swap(vmax, vmax_next);
        if (kTies) {
          std::swap(nmin, nmin_next);
          std::swap(nmax, nmax_next);
        }
      }
    }
    finish_row<scalar_t, acc_t, kMoments, kExtremes, kTies>(
        total, s1, s2, vmin, vmax, nmin, nmax, static_cast<acc_t>(last - first), sum_p + out,
        kMoments ? m2_p + out : nullptr, kExtremes ? lo_p + out : nullptr, kExtremes ? hi_p + out : nullptr,
        kTies ? tlo_p + out : nullptr, kTies ? thi_p + out : nullptr, channels);
  }
}

// The same reduction for float rows of a multiple of kBlock channels, with
// the accumulators in registers. reduce_rows keeps them in per-thread arrays,
// so every edge loads and stores each of them (16 memory operations a vector
// of channels with min/max and ties, for one load of the edge's values); the
// register pressure of all of them across a whole row's width is too high.
// Here a row runs a block of channels at a time over a tile of its edges:
// the tile's values stay in L1 for the next block, and the accumulators
// touch memory once a tile (most rows are one tile). Each channel sees the
// same operations in the same order as in accumulate_edge, start_row and
// finish_row, so the results are the same bit for bit.
constexpr int64_t kBlock = 16;
constexpr int64_t kTile = 32;
using FloatBlock = float __attribute__((vector_size(kBlock * sizeof(float))));
using IntBlock = int32_t __attribute__((vector_size(kBlock * sizeof(int32_t))));

template <typename block_t, typename T>
inline block_t load_block(const T* p) {
  block_t v;
  std::memcpy(&v, p, sizeof(block_t));
  return v;
}

template <typename block_t, typename T>
inline void store_block(T* p, const block_t& v) {
  std::memcpy(p, &v, sizeof(block_t));
}

template <bool kTerm, bool kMoments, bool kExtremes, bool kTies>
void reduce_rows_blocked(const EdgeValues<float>& in, const int64_t* p, int64_t begin, int64_t end,
                         float* sum_p, float* m2_p, float* lo_p, float* hi_p, int32_t* tlo_p, int32_t* thi_p) {
  const int64_t channels = in.channels;
  RowAccumulators<float> acc(channels);  // a row's accumulators between its tiles
  const int64_t last_edge = p[end];
  const FloatBlock zero = {};
  const IntBlock unit = IntBlock{} + 1;
  for (int64_t i = begin; i < end; ++i) {
    const int64_t first = p[i], last = p[i + 1];
    const int64_t out = i * channels;
    if (first == last) {
      zero_row<float, kMoments, kExtremes, kTies>(sum_p, m2_p, lo_p, hi_p, tlo_p, thi_p, out, channels);
      continue;
    }
    const float inv_degree = 1.0f / static_cast<float>(last - first);
    for (int64_t tile = first; tile < last; tile += kTile) {
      const int64_t tile_end = std::min(last, tile + kTile);
      for (int64_t b = 0; b < channels; b += kBlock) {
        auto value = [&](int64_t e) {
          FloatBlock x = load_block<FloatBlock>(in.source_row(e) + b);
          if (kTerm) x += load_block<FloatBlock>(in.edge_term + e * channels + b);
          return x;
        };
        FloatBlock total, shift = zero, s1 = zero, s2 = zero, lo = zero, hi = zero;
        IntBlock nlo = {}, nhi = {};
        int64_t e = tile;
        if (tile == first) {  // the first edge initialises every accumulator
          if (b == 0 && in.col && e + kPrefetchAhead < last_edge) {
            prefetch_row(in.source_row(e + kPrefetchAhead), channels);
          }
          total = value(e);
          if (kMoments) shift = total;
          if (kExtremes) lo = hi = total;
          if (kTies) nlo = nhi = unit;
          ++e;
        } else {
          total = load_block<FloatBlock>(acc.total.data() + b);
          if (kMoments) {
            shift = load_block<FloatBlock>(acc.shift.data() + b);
            s1 = load_block<FloatBlock>(acc.s1.data() + b);
            s2 = load_block<FloatBlock>(acc.s2.data() + b);
          }
          if (kExtremes) {
            lo = load_block<FloatBlock>(acc.vmin.data() + b);
            hi = load_block<FloatBlock>(acc.vmax.data() + b);
          }
          if (kTies) {
            nlo = load_block<IntBlock>(acc.nmin.data() + b);
            nhi = load_block<IntBlock>(acc.nmax.data() + b);
          }
        }
        for (; e < tile_end; ++e) {
          if (b == 0 && in.col && e + kPrefetchAhead < last_edge) {
            prefetch_row(in.source_row(e + kPrefetchAhead), channels);
          }
          const FloatBlock x = value(e);
          total += x;
          if (kMoments) {
            const FloatBlock dx = x - shift;
            s1 += dx;
            s2 += dx * dx;
          }
          if (kExtremes) {  // as in accumulate_edge
            const IntBlock x_nan = x != x;
            const IntBlock lower = (x < lo) | (x_nan & (lo == lo));
            const IntBlock higher = (x > hi) | (x_nan & (hi == hi));
            if (kTies) {
              nlo = lower ? unit : nlo - (x == lo);  // a comparison is -1 where true
              nhi = higher ? unit : nhi - (x == hi);
            }
            lo = lower ? x : lo;
            hi = higher ? x : hi;
          }
        }
        if (tile_end < last) {  // the row goes on in the next tile
          store_block(acc.total.data() + b, total);
          if (kMoments) {
            store_block(acc.shift.data() + b, shift);
            store_block(acc.s1.data() + b, s1);
            store_block(acc.s2.data() + b, s2);
          }
          if (kExtremes) {
            store_block(acc.vmin.data() + b, lo);
            store_block(acc.vmax.data() + b, hi);
          }
          if (kTies) {
            store_block(acc.nmin.data() + b, nlo);
            store_block(acc.nmax.data() + b, nhi);
          }
          continue;
        }
        store_block(sum_p + out + b, total);  // as in finish_row
        if (kMoments) {
          const FloatBlock m2 = s2 - s1 * s1 * inv_degree;
          store_block(m2_p + out + b, zero < m2 ? m2 : zero);
        }
        if (kExtremes) {
          store_block(lo_p + out + b, lo);
          store_block(hi_p + out + b, hi);
        }
        if (kTies) {
          store_block(tlo_p + out + b, nlo);
          store_block(thi_p + out + b, nhi);
        }
      }
    }
  }
}

template <typename scalar_t, typename acc_t, bool kTerm>
auto pick_reducer(bool moments, bool extremes, bool ties, int64_t channels) {
  if constexpr (std::is_same<scalar_t, float>::value) {
    if (channels % kBlock == 0) {
      if (moments && extremes && ties) return &reduce_rows_blocked<kTerm, true, true, true>;
      if (moments && extremes) return &reduce_rows_blocked<kTerm, true, true, false>;
      if (moments) return &reduce_rows_blocked<kTerm, true, false, false>;
      if (extremes && ties) return &reduce_rows_blocked<kTerm, false, true, true>;
      if (extremes) return &reduce_rows_blocked<kTerm, false, true, false>;
      return &reduce_rows_blocked<kTerm, false, false, false>;
    }
  }
  if (moments && extremes && ties) return &reduce_rows<scalar_t, acc_t, kTerm, true, true, true>;
  if (moments && extremes) return &reduce_rows<scalar_t, acc_t, kTerm, true, true, false>;
  if (moments) return &reduce_rows<scalar_t, acc_t, kTerm, true, false, false>;
  if (extremes && ties) return &reduce_rows<scalar_t, acc_t, kTerm, false, true, true>;
  if (extremes) return &reduce_rows<scalar_t, acc_t, kTerm, false, true, false>;
  return &reduce_rows<scalar_t, acc_t, kTerm, false, false, false>;
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor> segment_stats_cpu(
    const Tensor& src, const Tensor& ptr, const c10::optional<Tensor>& col,
    const c10::optional<Tensor>& edge_term, bool /*col_is_permutation: read by the backward only*/,
    bool moments, bool extremes, bool ties) {
  ties = ties && extremes;
  check_inputs(src, ptr, col, edge_term);
  const int64_t rows = ptr.numel() - 1, channels = src.size(1);
  auto opts = src.options();
  auto none = [&](const at::TensorOptions& o) { return at::empty({0}, o); };
  Tensor sum = at::empty({rows, channels}, opts);
  Tensor m2 = moments ? at::empty({rows, channels}, opts) : none(opts);
  Tensor lo = extremes ? at::empty({rows, channels}, opts) : none(opts);
  Tensor hi = extremes ? at::empty({rows, channels}, opts) : none(opts);
  auto iopts = opts.dtype(at::kInt);
  Tensor ties_lo = ties ? at::empty({rows, channels}, iopts) : none(iopts);
  Tensor ties_hi = ties ? at::empty({rows, channels}, iopts) : none(iopts);
  if (rows == 0 || channels == 0) return {sum, m2, lo, hi, ties_lo, ties_hi};

  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, src.scalar_type(), "segment_stats_cpu", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const auto in = edge_values<scalar_t>(src, col, edge_term);
    const int64_t* p = ptr.data_ptr<int64_t>();
    const auto reduce = edge_term ? pick_reducer<scalar_t, acc_t, true>(moments, extremes, ties, channels)
                                  : pick_reducer<scalar_t, acc_t, false>(moments, extremes, ties, channels);
    scalar_t* sum_p = sum.data_ptr<scalar_t>();
    scalar_t* m2_p = moments ? m2.data_ptr<scalar_t>() : nullptr;
    scalar_t* lo_p = extremes ? lo.data_ptr<scalar_t>() : nullptr;
    scalar_t* hi_p = extremes ? hi.data_ptr<scalar_t>() : nullptr;
    int32_t* tlo_p = ties ? ties_lo.data_ptr<int32_t>() : nullptr;
    int32_t* thi_p = ties ? ties_hi.data_ptr<int32_t>() : nullptr;
    parallel_csr_rows(p, rows, channels, kGrainWork, [&](int64_t begin, int64_t end) {
      reduce(in, p, begin, end, sum_p, m2_p, lo_p, hi_p, tlo_p, thi_p);
    });
  });
  return {sum, m2, lo, hi, ties_lo, ties_hi};
}

// d/dx_e of  g_sum.sum + g_m2.m2 + g_min.min + g_max.max  at edge e of row i:
//   g_sum + 2 g_m2 (x_e - mean_i) + [x_e = min_i] g_min / ties_min_i + (same for max)
// (x_e is compared after rounding to scalar_t, as the extreme was stored).
//
// Everything but x_e is a per-row coefficient, so each backward first computes
// a row's coefficients once (the mean and the tie shares need divisions), then
// streams the row's edges through a branch-free loop that vectorises. The
// fields of one row's block of `width` values, each `channels` long:
//   a = g_sum,  mean, b = 2 g_m2           (kMoments; without: a only)
//   c = g_min / ties_min,  d = g_max / ties_max   (kExtremes)
// with the extremes themselves read from `low` / `high`.
template <typename scalar_t>
struct StatGradients {
  const scalar_t *g_sum, *g_m2, *g_min, *g_max, *sum, *low, *high;
  const int32_t *ties_lo, *ties_hi;
  const int64_t* ptr;
  int64_t channels;
};

template <typename scalar_t>
const scalar_t* optional_data(const c10::optional<Tensor>& t) {
  return (t && t->numel() > 0) ? t->data_ptr<scalar_t>() : nullptr;
}

template <typename scalar_t>
const scalar_t* optional_data(const Tensor& t) {
  return t.numel() > 0 ? t.data_ptr<scalar_t>() : nullptr;
}

template <typename scalar_t>
StatGradients<scalar_t> stat_gradients(
    const c10::optional<Tensor>& grad_sum, const c10::optional<Tensor>& grad_m2,
    const c10::optional<Tensor>& grad_min, const c10::optional<Tensor>& grad_max, const Tensor& sum,
    const Tensor& low, const Tensor& high, const Tensor& ties_lo, const Tensor& ties_hi, const Tensor& ptr,
    int64_t channels) {
  return {optional_data<scalar_t>(grad_sum), optional_data<scalar_t>(grad_m2), optional_data<scalar_t>(grad_min),
          optional_data<scalar_t>(grad_max), sum.data_ptr<scalar_t>(),  optional_data<scalar_t>(low),
          optional_data<scalar_t>(high),     optional_data<int32_t>(ties_lo), optional_data<int32_t>(ties_hi),
          ptr.data_ptr<int64_t>(),           channels};
}

inline int64_t coefficient_width(bool moments, bool extremes) {
  return (moments ? 3 : 1) + (extremes ? 2 : 0);
}

// c = g / ties: each tied entry's share of an extreme's gradient. An empty
// row (no ties) has no edges to read its share, so it divides by 1 instead
// of branching: under a condition the division stayed scalar, a third of a
// molecule backward.
template <typename scalar_t, typename acc_t>
__attribute__((noinline)) void tie_shares(const scalar_t* __restrict__ g, const int32_t* __restrict__ ties,
                                          acc_t* __restrict__ out, int64_t channels) {
  if (!g) {
    std::fill(out, out + channels, acc_t(0));
    return;
  }
  for (int64_t f = 0; f < channels; ++f) {
    out[f] = static_cast<acc_t>(g[f]) / std::max(static_cast<acc_t>(ties[f]), acc_t(1));
  }
}

// The coefficients of one row, out of line with __restrict__ parameters (see
// start_row): `block` holds coefficient_width(...) * channels values. Absent
// gradients are tested once per row, outside the channel loops.
template <typename scalar_t, typename acc_t, bool kMoments, bool kExtremes>
__attribute__((noinline)) void fill_coefficients(
    const scalar_t* __restrict__ g_sum, const scalar_t* __restrict__ g_m2, const scalar_t* __restrict__ g_min,
    const scalar_t* __restrict__ g_max, const scalar_t* __restrict__ sum, const int32_t* __restrict__ ties_lo,
    const int32_t* __restrict__ ties_hi, acc_t inv_degree, acc_t* __restrict__ block, int64_t channels) {
  acc_t* __restrict__ a = block;
  acc_t* __restrict__ mean = block + channels;
  acc_t* __restrict__ b = block + 2 * channels;
  acc_t* __restrict__ c = block + (kMoments ? 3 : 1) * channels;
  acc_t* __restrict__ d = c + channels;
  if (g_sum) {
    for (int64_t f = 0; f < channels; ++f) a[f] = static_cast<acc_t>(g_sum[f]);
  } else {
    std::fill(a, a + channels, acc_t(0));
  }
  if (kMoments) {
    for (int64_t f = 0; f < channels; ++f) mean[f] = static_cast<acc_t>(sum[f]) * inv_degree;
    if (g_m2) {
      for (int64_t f = 0; f < channels; ++f) b[f] = acc_t(2) * static_cast<acc_t>(g_m2[f]);
    } else {
      std::fill(b, b + channels, acc_t(0));
    }
  }
  if (kExtremes) {
    tie_shares(g_min, ties_lo, c, channels);
    tie_shares(g_max, ties_hi, d, channels);
  }
}

// Fills row i's coefficient block (coefficient_width(...) * channels values).
template <typename scalar_t, typename acc_t, bool kMoments, bool kExtremes>
void row_coefficients(const StatGradients<scalar_t>& g, int64_t i, acc_t* block) {
  const int64_t F = g.channels, k0 = i * F;
  const int64_t degree = g.ptr[i + 1] - g.ptr[i];
  const acc_t inv_degree = degree > 0 ? acc_t(1) / static_cast<acc_t>(degree) : acc_t(0);
  auto at_row = [k0](const auto* p) { return p ? p + k0 : p; };
  fill_coefficients<scalar_t, acc_t, kMoments, kExtremes>(
      at_row(g.g_sum), at_row(g.g_m2), at_row(g.g_min), at_row(g.g_max), g.sum + k0, at_row(g.ties_lo),
      at_row(g.ties_hi), inv_degree, block, F);
}

// acc (+)= the gradient of one edge's values, given its row's coefficients.
template <typename scalar_t, typename acc_t, bool kTerm, bool kMoments, bool kExtremes, bool kAdd>
__attribute__((noinline)) void edge_gradient(
    const scalar_t* __restrict__ row, const scalar_t* __restrict__ term, const acc_t* __restrict__ block,
    const scalar_t* __restrict__ low, const scalar_t* __restrict__ high, acc_t* __restrict__ acc,
    int64_t channels) {
  const acc_t* __restrict__ a = block;
  const acc_t* __restrict__ mean = block + channels;
  const acc_t* __restrict__ b = block + 2 * channels;
  const acc_t* __restrict__ c = block + (kMoments ? 3 : 1) * channels;
  const acc_t* __restrict__ d = c + channels;
  for (int64_t f = 0; f < channels; ++f) {
    acc_t x = static_cast<acc_t>(row[f]);
    if (kTerm) x += static_cast<acc_t>(term[f]);
    acc_t g = a[f];
    if (kMoments) g += b[f] * (x - mean[f]);
    if (kExtremes) {
      const scalar_t stored = static_cast<scalar_t>(x);
      g += (stored == low[f] ? c[f] : acc_t(0)) + (stored == high[f] ? d[f] : acc_t(0));
    }
    acc[f] = kAdd ? acc[f] + g : g;
  }
}

// Per-edge gradient, one pass over the CSR rows.  Row e of the result is
// written at out_index[e] (an injective map into src's rows, e.g. the sort
// permutation of an unsorted index), or at e.
template <typename scalar_t, typename acc_t, bool kTerm, bool kMoments, bool kExtremes>
void backward_rows(const StatGradients<scalar_t>& g, const EdgeValues<scalar_t>& in, const int64_t* dst,
                   scalar_t* out, int64_t begin, int64_t end) {
  const int64_t F = g.channels;
  std::vector<acc_t> block(coefficient_width(kMoments, kExtremes) * F), edge(F);
  for (int64_t i = begin; i < end; ++i) {
    if (g.ptr[i] == g.ptr[i + 1]) continue;
    row_coefficients<scalar_t, acc_t, kMoments, kExtremes>(g, i, block.data());
    const scalar_t* low = kExtremes ? g.low + i * F : nullptr;
    const scalar_t* high = kExtremes ? g.high + i * F : nullptr;
    for (int64_t e = g.ptr[i]; e < g.ptr[i + 1]; ++e) {
      const scalar_t* term = kTerm ? in.edge_term + e * F : nullptr;
      edge_gradient<scalar_t, acc_t, kTerm, kMoments, kExtremes, false>(in.source_row(e), term, block.data(),
                                                                        low, high, edge.data(), F);
      scalar_t* target = out + (dst ? dst[e] : e) * F;
      for (int64_t f = 0; f < F; ++f) target[f] = static_cast<scalar_t>(edge[f]);
    }
  }
}

// backward_rows for float rows of a multiple of kBlock channels, with the
// row's coefficients in registers (see reduce_rows_blocked): a block of
// channels at a time over a tile of the row's edges, each edge's gradient
// block (one cache line) written straight to its place. The same operations
// per channel as edge_gradient, so the same bits.
template <bool kTerm, bool kMoments, bool kExtremes>
void backward_rows_blocked(const StatGradients<float>& g, const EdgeValues<float>& in, const int64_t* dst,
                           float* out, int64_t begin, int64_t end) {
  const int64_t F = g.channels;
  std::vector<float> coefficients(coefficient_width(kMoments, kExtremes) * F);
  const float* a_row = coefficients.data();
  const float* mean_row = a_row + F;
  const float* b_row = a_row + 2 * F;
  const float* c_row = a_row + (kMoments ? 3 : 1) * F;
  const float* d_row = c_row + F;
  const FloatBlock zero = {};
  for (int64_t i = begin; i < end; ++i) {
    const int64_t first = g.ptr[i], last = g.ptr[i + 1];
    if (first == last) continue;
    row_coefficients<float, float, kMoments, kExtremes>(g, i, coefficients.data());
    for (int64_t tile = first; tile < last; tile += kTile) {
      const int64_t tile_end = std::min(last, tile + kTile);
      for (int64_t b = 0; b < F; b += kBlock) {
        const FloatBlock a = load_block<FloatBlock>(a_row + b);
        FloatBlock mean = zero, slope = zero, c = zero, d = zero, low = zero, high = zero;
        if (kMoments) {
          mean = load_block<FloatBlock>(mean_row + b);
          slope = load_block<FloatBlock>(b_row + b);
        }
        if (kExtremes) {
          c = load_block<FloatBlock>(c_row + b);
          d = load_block<FloatBlock>(d_row + b);
          low = load_block<FloatBlock>(g.low + i * F + b);
          high = load_block<FloatBlock>(g.high + i * F + b);
        }
        for (int64_t e = tile; e < tile_end; ++e) {
          FloatBlock x = load_block<FloatBlock>(in.source_row(e) + b);
          if (kTerm) x += load_block<FloatBlock>(in.edge_term + e * F + b);
          FloatBlock gradient = a;
          if (kMoments) gradient += slope * (x - mean);
          if (kExtremes) gradient += (x == low ? c : zero) + (x == high ? d : zero);
          store_block(out + (dst ? dst[e] : e) * F + b, gradient);
        }
      }
    }
  }
}

// Calls body(kTerm, kMoments, kExtremes) with the flags as std::bool_constant
// arguments, so that the body instantiates one branch-free kernel per case.
template <typename Body>
void with_flags(bool term, bool moments, bool extremes, Body&& body) {
  auto inner = [&](auto kTerm) {
    if (moments && extremes) body(kTerm, std::true_type{}, std::true_type{});
    else if (moments) body(kTerm, std::true_type{}, std::false_type{});
    else if (extremes) body(kTerm, std::false_type{}, std::true_type{});
    else body(kTerm, std::false_type{}, std::false_type{});
  };
  if (term) inner(std::true_type{});
  else inner(std::false_type{});
}

Tensor segment_stats_backward_cpu(
    const c10::optional<Tensor>& grad_sum, const c10::optional<Tensor>& grad_m2,
    const c10::optional<Tensor>& grad_min, const c10::optional<Tensor>& grad_max,
    const Tensor& src, const Tensor& ptr, const c10::optional<Tensor>& col,
    const c10::optional<Tensor>& edge_term, const Tensor& sum, const Tensor& low,
    const Tensor& high, const Tensor& ties_lo, const Tensor& ties_hi,
    const c10::optional<Tensor>& out_index) {
  check_inputs(src, ptr, col, edge_term);
  const int64_t rows = ptr.numel() - 1, channels = src.size(1);
  const int64_t edges = col ? col->numel() : (edge_term ? edge_term->size(0) : src.size(0));
  // Scattered through an injective out_index, rows no edge reads keep a zero gradient.
  const int64_t out_rows = out_index ? src.size(0) : edges;
  Tensor grad = (out_index && edges < out_rows) ? at::zeros({out_rows, channels}, src.options())
                                                : at::empty({out_rows, channels}, src.options());
  const bool moments = grad_m2 && grad_m2->numel() > 0;
  const bool extremes = (grad_min && grad_min->numel() > 0) || (grad_max && grad_max->numel() > 0);
  TORCH_CHECK(!extremes || ties_lo.numel() > 0,
              "segment_stats: the min/max gradient needs the tie counts; run the forward with ties=True");
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, src.scalar_type(), "segment_stats_backward_cpu", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const auto in = edge_values<scalar_t>(src, col, edge_term);
    const auto g = stat_gradients<scalar_t>(grad_sum, grad_m2, grad_min, grad_max, sum, low, high, ties_lo,
                                            ties_hi, ptr, channels);
    const int64_t* dst = out_index ? out_index->data_ptr<int64_t>() : nullptr;
    scalar_t* out = grad.data_ptr<scalar_t>();
    with_flags(edge_term.has_value(), moments, extremes, [&](auto term_flag, auto moments_flag, auto extremes_flag) {
      constexpr bool kTerm = decltype(term_flag)::value, kMoments = decltype(moments_flag)::value;
      constexpr bool kExtremes = decltype(extremes_flag)::value;
      parallel_csr_rows(g.ptr, rows, channels, kGrainWork, [&](int64_t begin, int64_t end) {
        if constexpr (std::is_same<scalar_t, float>::value) {
          if (channels % kBlock == 0) {
            backward_rows_blocked<kTerm, kMoments, kExtremes>(g, in, dst, out, begin, end);
            return;
          }
        }
        backward_rows<scalar_t, acc_t, kTerm, kMoments, kExtremes>(g, in, dst, out, begin, end);
      });
    });
  });
  return grad;
}

// Gradient of the gather form with respect to src, one pass over the
// transposed graph: source j sums the per-edge gradients of its out-edges,
// csc_edge[csc_ptr[j]..csc_ptr[j+1]] (CSR positions), edge_row[e] being the
// target row of CSR position e.  No atomics, so the sums are deterministic.
// The rows' coefficients are computed once, in a first pass, into a
// [rows, width * F] table: the second pass reads each edge's row block in one
// contiguous stretch instead of dividing per edge.
Tensor segment_stats_backward_gather_cpu(
    const c10::optional<Tensor>& grad_sum, const c10::optional<Tensor>& grad_m2,
    const c10::optional<Tensor>& grad_min, const c10::optional<Tensor>& grad_max,
    const Tensor& src, const Tensor& ptr, const Tensor& col, const c10::optional<Tensor>& edge_term,
    const Tensor& sum, const Tensor& low, const Tensor& high, const Tensor& ties_lo,
    const Tensor& ties_hi, const Tensor& csc_ptr,
    const Tensor& csc_edge, const Tensor& edge_row) {
  check_inputs(src, ptr, col, edge_term);
  const int64_t sources = src.size(0), channels = src.size(1);
  const int64_t rows = ptr.numel() - 1;
  Tensor grad = at::empty({sources, channels}, src.options());
  const bool moments = grad_m2 && grad_m2->numel() > 0;
  const bool extremes = (grad_min && grad_min->numel() > 0) || (grad_max && grad_max->numel() > 0);
  TORCH_CHECK(!extremes || ties_lo.numel() > 0,
              "segment_stats: the min/max gradient needs the tie counts; run the forward with ties=True");
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, src.scalar_type(), "segment_stats_backward_gather_cpu", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const auto g = stat_gradients<scalar_t>(grad_sum, grad_m2, grad_min, grad_max, sum, low, high, ties_lo,
                                            ties_hi, ptr, channels);
    const scalar_t* x_src = src.data_ptr<scalar_t>();
    const scalar_t* term = optional_data<scalar_t>(edge_term);
    const int64_t* cp = csc_ptr.data_ptr<int64_t>();
    const int64_t* ce = csc_edge.data_ptr<int64_t>();
    const int64_t* er = edge_row.data_ptr<int64_t>();
    scalar_t* out = grad.data_ptr<scalar_t>();
    with_flags(term != nullptr, moments, extremes, [&](auto term_flag, auto moments_flag, auto extremes_flag) {
      constexpr bool kTerm = decltype(term_flag)::value, kMoments = decltype(moments_flag)::value;
      constexpr bool kExtremes = decltype(extremes_flag)::value;
      const int64_t width = coefficient_width(kMoments, kExtremes) * channels;
      Tensor table = at::empty({rows, width}, src.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
      acc_t* coef = table.data_ptr<acc_t>();
      at::parallel_for(0, rows, std::max<int64_t>(1, kGrainWork / width), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          row_coefficients<scalar_t, acc_t, kMoments, kExtremes>(g, i, coef + i * width);
        }
      });
      parallel_csr_rows(cp, sources, channels, kGrainWork, [&](int64_t begin, int64_t end) {
        std::vector<acc_t> acc(channels);
        for (int64_t j = begin; j < end; ++j) {
          std::fill(acc.begin(), acc.end(), acc_t(0));
          const scalar_t* row = x_src + j * channels;
          for (int64_t k = cp[j]; k < cp[j + 1]; ++k) {
            const int64_t e = ce[k], i = er[e];
            if (k + kPrefetchAhead < cp[end]) {  // the next edges' row blocks are at random places
              const int64_t ahead = er[ce[k + kPrefetchAhead]];
              prefetch_row(coef + ahead * width, width);
            }
            edge_gradient<scalar_t, acc_t, kTerm, kMoments, kExtremes, true>(
                row, kTerm ? term + e * channels : nullptr, coef + i * width,
                kExtremes ? g.low + i * channels : nullptr, kExtremes ? g.high + i * channels : nullptr,
                acc.data(), channels);
          }
          for (int64_t f = 0; f < channels; ++f) out[j * channels + f] = static_cast<scalar_t>(acc[f]);
        }
      });
    });
  });
  return grad;
}

}  // namespace

TORCH_LIBRARY_IMPL(pyg_agg, CPU, m) {
  m.impl("segment_stats", &segment_stats_cpu);
  m.impl("segment_stats_backward", &segment_stats_backward_cpu);
  m.impl("segment_stats_backward_gather", &segment_stats_backward_gather_cpu);
}

}  // namespace pyg_agg
