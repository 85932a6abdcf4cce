// The epilogue of the multi-statistic reduction: the statistics that a
// multi-aggregation stacks ([N, A, F], slot a holding statistic kinds[a]),
// derived from the primitives of segment_stats (count d, sum, M = sum of
// squared deviations, min, max) with an optional per-row shift of the values,
// in one pass; and its backward, in one pass too.
//
//   sum  = total + d * shift      mean = total / d + shift
//   min  = low + shift            max  = high + shift
//   var  = M / d                  std  = "pyg": var > eps ? sqrt(var) : 0
//                                        "eps": sqrt(max(var, 0) + eps)
//
// Empty rows give 0 in every slot, with zero gradients (as
// pyg_agg/ops/multi.py, stack_statistics_reference). The kind codes are
// STACKABLE's positions in multi.py. With a row_order (a permutation of the
// rows, checked by the caller), output row k holds row row_order[k]: the
// rows come out already grouped (e.g. by degree), with no gather after.
// With scales ([N, S], e.g. PNA's degree scalers), the output is [N, S, A, F],
// slot (s, a) holding scales[i, s] times statistic kinds[a]: the scaled copy
// is written by the epilogue, with no stacked intermediate, and its backward
// sums the gradient over the scalers in the same pass (the scales' own
// gradient, rarely needed, is left to the caller).
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>
#include <vector>

namespace pyg_agg {
namespace {

using at::Tensor;

enum Kind : int64_t { kSum = 0, kMean = 1, kMin = 2, kMax = 3, kVar = 4, kStd = 5 };
constexpr int64_t kKinds = 6;
constexpr int64_t kGrainWork = 1 << 15;

template <typename scalar_t>
scalar_t* data_or_null(const Tensor& t) {
  return t.numel() > 0 ? t.data_ptr<scalar_t>() : nullptr;
}

// One slot of one row. Out of line with __restrict__ parameters and the shift
// as a template flag, so that every channel loop vectorises.
template <typename scalar_t, typename acc_t, typename out_t, bool kShift>
__attribute__((noinline)) void forward_slot(
    int64_t kind, const scalar_t* __restrict__ total, const scalar_t* __restrict__ m2,
    const scalar_t* __restrict__ low, const scalar_t* __restrict__ high, const scalar_t* __restrict__ shift,
    acc_t degree, acc_t eps, bool pyg_mode, out_t* __restrict__ out, int64_t channels) {
  const acc_t inv = acc_t(1) / degree;
  switch (kind) {
    case kSum:
      for (int64_t f = 0; f < channels; ++f) {
        acc_t v = static_cast<acc_t>(total[f]);
        if (kShift) v += degree * static_cast<acc_t>(shift[f]);
        out[f] = static_cast<out_t>(v);
      }
      break;
    case kMean:
      for (int64_t f = 0; f < channels; ++f) {
        acc_t v = static_cast<acc_t>(total[f]) * inv;
        if (kShift) v += static_cast<acc_t>(shift[f]);
        out[f] = static_cast<out_t>(v);
      }
      break;
    case kMin:
    case kMax: {
      const scalar_t* __restrict__ extreme = kind == kMin ? low : high;
      for (int64_t f = 0; f < channels; ++f) {
        acc_t v = static_cast<acc_t>(extreme[f]);
        if (kShift) v += static_cast<acc_t>(shift[f]);
        out[f] = static_cast<out_t>(v);
      }
      break;
    }
    case kVar:
      for (int64_t f = 0; f < channels; ++f) out[f] = static_cast<out_t>(static_cast<acc_t>(m2[f]) * inv);
      break;
    default:  // kStd
      if (pyg_mode) {
        for (int64_t f = 0; f < channels; ++f) {
          const acc_t var = static_cast<acc_t>(m2[f]) * inv;
          out[f] = static_cast<out_t>(var > eps ? std::sqrt(var) : acc_t(0));
        }
      } else {
        for (int64_t f = 0; f < channels; ++f) {
          const acc_t var = static_cast<acc_t>(m2[f]) * inv;
          out[f] = static_cast<out_t>(std::sqrt(std::max(var, acc_t(0)) + eps));
        }
      }
  }
}

// Which primitives the kinds read: (total, m2, low, high).
std::tuple<bool, bool, bool, bool> reads(at::IntArrayRef kinds) {
  bool total = false, m2 = false, low = false, high = false;
  for (const int64_t kind : kinds) {
    TORCH_CHECK(kind >= 0 && kind < kKinds, "stack_statistics: unknown statistic code ", kind);
    total |= kind == kSum || kind == kMean;
    m2 |= kind == kVar || kind == kStd;
    low |= kind == kMin;
    high |= kind == kMax;
  }
  return {total, m2, low, high};
}

void check_row_tensor(const Tensor& t, int64_t rows, int64_t channels, const char* name) {
  TORCH_CHECK(t.dim() == 2 && t.size(0) == rows && t.size(1) == channels && t.is_contiguous(),
              "stack_statistics: ", name, " must be a contiguous [", rows, ", ", channels, "] tensor");
}

// The rows' order: row_order's data, or null for the identity.
const int64_t* order_data(const c10::optional<Tensor>& row_order, int64_t rows) {
  if (!row_order) return nullptr;
  TORCH_CHECK(row_order->dim() == 1 && row_order->numel() == rows && row_order->scalar_type() == at::kLong &&
                  row_order->is_contiguous(),
              "stack_statistics: row_order must be a contiguous int64 [", rows, "] tensor");
  return row_order->data_ptr<int64_t>();
}

// The scales' data ([rows, S], like's dtype) and S, or null and 1 without.
template <typename scalar_t>
std::pair<const scalar_t*, int64_t> scales_data(const c10::optional<Tensor>& scales, const Tensor& like,
                                                int64_t rows) {
  if (!scales) return {nullptr, 1};
  TORCH_CHECK(scales->dim() == 2 && scales->size(0) == rows && scales->is_contiguous() &&
                  scales->scalar_type() == like.scalar_type(),
              "stack_statistics: scales must be a contiguous [", rows, ", S] tensor of the statistics' dtype");
  return {scales->data_ptr<scalar_t>(), scales->size(1)};
}

Tensor stack_statistics_cpu(const Tensor& total, const Tensor& m2, const Tensor& low, const Tensor& high,
                            const Tensor& counts, const c10::optional<Tensor>& shift, at::IntArrayRef kinds,
                            double eps, bool pyg_mode, const c10::optional<Tensor>& row_order,
                            const c10::optional<Tensor>& scales) {
  TORCH_CHECK(counts.dim() == 1 && counts.scalar_type() == at::kLong && counts.is_contiguous(),
              "stack_statistics: counts must be a contiguous int64 [N] tensor");
  const int64_t rows = counts.numel(), slots = static_cast<int64_t>(kinds.size());
  const auto [needs_total, needs_m2, needs_low, needs_high] = reads(kinds);
  const Tensor& like = needs_total ? total : needs_m2 ? m2 : needs_low ? low : high;
  TORCH_CHECK(like.dim() == 2, "stack_statistics: the primitives must be [N, F] tensors");
  const int64_t channels = like.size(1), row_size = slots * channels;
  if (needs_total) check_row_tensor(total, rows, channels, "total");
  if (needs_m2) check_row_tensor(m2, rows, channels, "m2");
  if (needs_low) check_row_tensor(low, rows, channels, "low");
  if (needs_high) check_row_tensor(high, rows, channels, "high");
  if (shift) check_row_tensor(*shift, rows, channels, "shift");
  const int64_t* order = order_data(row_order, rows);
  Tensor out = scales ? at::empty({rows, scales->size(1), slots, channels}, like.options())
                      : at::empty({rows, slots, channels}, like.options());
  if (out.numel() == 0) return out;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, like.scalar_type(), "stack_statistics_cpu", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* t = needs_total ? total.data_ptr<scalar_t>() : nullptr;
    const scalar_t* m = needs_m2 ? m2.data_ptr<scalar_t>() : nullptr;
    const scalar_t* lo = needs_low ? low.data_ptr<scalar_t>() : nullptr;
    const scalar_t* hi = needs_high ? high.data_ptr<scalar_t>() : nullptr;
    const scalar_t* s = shift ? shift->data_ptr<scalar_t>() : nullptr;
    const auto [sc, num_scales] = scales_data<scalar_t>(scales, like, rows);
    const int64_t* d = counts.data_ptr<int64_t>();
    scalar_t* o = out.data_ptr<scalar_t>();
    const acc_t e = static_cast<acc_t>(eps);
    at::parallel_for(0, rows, std::max<int64_t>(1, kGrainWork / std::max<int64_t>(num_scales * row_size, 1)),
                     [&](int64_t begin, int64_t end) {
      std::vector<acc_t> unscaled(sc ? row_size : 0);  // the row's statistics, before the scales
      for (int64_t r = begin; r < end; ++r) {
        const int64_t i = order ? order[r] : r;
        scalar_t* row_out = o + r * num_scales * row_size;
        if (d[i] == 0) {
          std::fill(row_out, row_out + num_scales * row_size, scalar_t(0));
          continue;
        }
        const int64_t k = i * channels;
        auto at_row = [k](const scalar_t* p) { return p ? p + k : p; };
        for (int64_t a = 0; a < slots; ++a) {
          const acc_t degree = static_cast<acc_t>(d[i]);
          if (sc) {
            auto slot = s ? forward_slot<scalar_t, acc_t, acc_t, true> : forward_slot<scalar_t, acc_t, acc_t, false>;
            slot(kinds[a], at_row(t), at_row(m), at_row(lo), at_row(hi), at_row(s), degree, e, pyg_mode,
                 unscaled.data() + a * channels, channels);
          } else {
            auto slot = s ? forward_slot<scalar_t, acc_t, scalar_t, true>
                          : forward_slot<scalar_t, acc_t, scalar_t, false>;
            slot(kinds[a], at_row(t), at_row(m), at_row(lo), at_row(hi), at_row(s), degree, e, pyg_mode,
                 row_out + a * channels, channels);
          }
        }
        if (!sc) continue;
        for (int64_t j = 0; j < num_scales; ++j) {
          const acc_t factor = static_cast<acc_t>(sc[i * num_scales + j]);
          scalar_t* __restrict__ dst = row_out + j * row_size;
          const acc_t* __restrict__ src = unscaled.data();
          for (int64_t c = 0; c < row_size; ++c) dst[c] = static_cast<scalar_t>(factor * src[c]);
        }
      }
    });
  });
  return out;
}

// The gradient of one slot added into the primitives' gradient rows (null
// where the slot does not read that primitive); the shift's gradient as a
// template flag, so that every channel loop vectorises.
template <typename scalar_t, typename acc_t, typename grad_t, bool kShift>
__attribute__((noinline)) void backward_slot(
    int64_t kind, const grad_t* __restrict__ grad, const scalar_t* __restrict__ m2, acc_t degree, acc_t eps,
    bool pyg_mode, acc_t* __restrict__ g_total, acc_t* __restrict__ g_m2, acc_t* __restrict__ g_low,
    acc_t* __restrict__ g_high, acc_t* __restrict__ g_shift, int64_t channels) {
  const acc_t inv = acc_t(1) / degree;
  switch (kind) {
    case kSum:
    case kMean: {
      const acc_t scale = kind == kSum ? acc_t(1) : inv, shift_scale = kind == kSum ? degree : acc_t(1);
      for (int64_t f = 0; f < channels; ++f) {
        const acc_t g = static_cast<acc_t>(grad[f]);
        g_total[f] += g * scale;
        if (kShift) g_shift[f] += g * shift_scale;
      }
      break;
    }
    case kMin:
    case kMax: {
      acc_t* __restrict__ g_extreme = kind == kMin ? g_low : g_high;
      for (int64_t f = 0; f < channels; ++f) {
        const acc_t g = static_cast<acc_t>(grad[f]);
        g_extreme[f] += g;
        if (kShift) g_shift[f] += g;
      }
      break;
    }
    case kVar:
      for (int64_t f = 0; f < channels; ++f) g_m2[f] += static_cast<acc_t>(grad[f]) * inv;
      break;
    default:  // kStd: d std / d M = 1 / (2 std d) where the std follows the variance, else 0
      for (int64_t f = 0; f < channels; ++f) {
        const acc_t var = static_cast<acc_t>(m2[f]) * inv;
        const bool live = pyg_mode ? var > eps : var > acc_t(0);
        const acc_t std = std::sqrt(pyg_mode ? var : std::max(var, acc_t(0)) + eps);
        g_m2[f] += live ? static_cast<acc_t>(grad[f]) * acc_t(0.5) / (std * degree) : acc_t(0);
      }
  }
}

// Returns the gradients of (total, m2, low, high, shift); [0] where the kinds
// do not read the primitive, or for the shift when has_shift is false. With
// scales, grad is [N, S, A, F] and is summed over the scalers first.
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> stack_statistics_backward_cpu(
    const Tensor& grad, const Tensor& m2, const Tensor& counts, at::IntArrayRef kinds, double eps, bool pyg_mode,
    bool has_shift, const c10::optional<Tensor>& row_order, const c10::optional<Tensor>& scales) {
  const int64_t slot_dim = scales ? 2 : 1;
  TORCH_CHECK(grad.dim() == slot_dim + 2 && grad.size(0) == counts.numel() &&
                  grad.size(slot_dim) == static_cast<int64_t>(kinds.size()) &&
                  (!scales || grad.size(1) == scales->size(1)),
              "stack_statistics_backward: grad must be [N, A, F], or [N, S, A, F] with scales");
  const Tensor g = grad.contiguous();
  const int64_t rows = g.size(0), slots = g.size(slot_dim), channels = g.size(slot_dim + 1);
  const int64_t row_size = slots * channels;
  const auto [needs_total, needs_m2, needs_low, needs_high] = reads(kinds);
  const bool std_slot = std::find(kinds.begin(), kinds.end(), int64_t(kStd)) != kinds.end();
  if (std_slot) check_row_tensor(m2, rows, channels, "m2");
  const int64_t* order = order_data(row_order, rows);
  auto make = [&](bool need) { return need ? at::empty({rows, channels}, g.options()) : g.new_empty({0}); };
  Tensor g_total = make(needs_total), g_m2 = make(needs_m2), g_low = make(needs_low), g_high = make(needs_high),
         g_shift = make(has_shift && (needs_total || needs_low || needs_high));
  if (rows == 0 || channels == 0) return {g_total, g_m2, g_low, g_high, g_shift};
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, g.scalar_type(), "stack_statistics_backward_cpu", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* gin = g.data_ptr<scalar_t>();
    const scalar_t* m = std_slot ? m2.data_ptr<scalar_t>() : nullptr;
    const auto [sc, num_scales] = scales_data<scalar_t>(scales, g, rows);
    const int64_t* d = counts.data_ptr<int64_t>();
    scalar_t* outs[5] = {data_or_null<scalar_t>(g_total), data_or_null<scalar_t>(g_m2),
                         data_or_null<scalar_t>(g_low), data_or_null<scalar_t>(g_high),
                         data_or_null<scalar_t>(g_shift)};
    const acc_t e = static_cast<acc_t>(eps);
    at::parallel_for(0, rows, std::max<int64_t>(1, kGrainWork / std::max<int64_t>(num_scales * row_size, 1)),
                     [&](int64_t begin, int64_t end) {
      std::vector<acc_t> acc(5 * channels);
      std::vector<acc_t> summed(sc ? row_size : 0);  // the row's gradient summed over the scalers
      acc_t* rows_acc[5];
      for (int p = 0; p < 5; ++p) rows_acc[p] = outs[p] ? acc.data() + p * channels : nullptr;
      for (int64_t r = begin; r < end; ++r) {
        const int64_t i = order ? order[r] : r;  // grad row r belongs to row i
        std::fill(acc.begin(), acc.end(), acc_t(0));
        if (d[i] > 0) {  // an empty row's slots are constants: zero gradients
          const scalar_t* row_grad = gin + r * num_scales * row_size;
          if (sc) {
            std::fill(summed.begin(), summed.end(), acc_t(0));
            for (int64_t j = 0; j < num_scales; ++j) {
              const acc_t factor = static_cast<acc_t>(sc[i * num_scales + j]);
              const scalar_t* __restrict__ src = row_grad + j * row_size;
              acc_t* __restrict__ dst = summed.data();
              for (int64_t c = 0; c < row_size; ++c) dst[c] += factor * static_cast<acc_t>(src[c]);
            }
          }
          const acc_t degree = static_cast<acc_t>(d[i]);
          const scalar_t* row_m2 = m ? m + i * channels : nullptr;
          for (int64_t a = 0; a < slots; ++a) {
            if (sc) {
              auto slot = rows_acc[4] ? backward_slot<scalar_t, acc_t, acc_t, true>
                                      : backward_slot<scalar_t, acc_t, acc_t, false>;
              slot(kinds[a], summed.data() + a * channels, row_m2, degree, e, pyg_mode, rows_acc[0], rows_acc[1],
                   rows_acc[2], rows_acc[3], rows_acc[4], channels);
            } else {
              auto slot = rows_acc[4] ? backward_slot<scalar_t, acc_t, scalar_t, true>
                                      : backward_slot<scalar_t, acc_t, scalar_t, false>;
              slot(kinds[a], row_grad + a * channels, row_m2, degree, e, pyg_mode, rows_acc[0], rows_acc[1],
                   rows_acc[2], rows_acc[3], rows_acc[4], channels);
            }
          }
        }
        for (int p = 0; p < 5; ++p) {
          if (!outs[p]) continue;
          scalar_t* dst = outs[p] + i * channels;
          for (int64_t f = 0; f < channels; ++f) dst[f] = static_cast<scalar_t>(rows_acc[p][f]);
        }
      }
    });
  });
  return {g_total, g_m2, g_low, g_high, g_shift};
}

}  // namespace

TORCH_LIBRARY_IMPL(pyg_agg, CPU, m) {
  m.impl("stack_statistics", &stack_statistics_cpu);
  m.impl("stack_statistics_backward", &stack_statistics_backward_cpu);
}

}  // namespace pyg_agg
