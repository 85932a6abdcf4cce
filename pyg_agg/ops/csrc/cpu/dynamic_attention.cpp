// Fused dynamic (GATv2) attention over CSR rows, CPU kernels.
//
// Row i (a target node) attends over its edges e in ptr[i]..ptr[i+1], each
// reading source j = col[e]:
//   z_e   = x_src[j] + x_dst[i] (+ W_e edge_attr[e])          [H, C]
//   s_e,h = sum_c att[h, c] * LeakyReLU(z_e,h,c)
//   alpha = softmax over the row of s (per head)
//   out_i = sum_e alpha_e * scale_e * x_src[j]                 [H, C]
// The forward streams the row once with an online softmax (a running max and
// normaliser per head, the accumulator rescaled when the max grows), so no
// [E, H, C] tensor exists; it keeps only the per-row log-sum-exp. The backward
// recomputes z from the inputs. Rows are independent and the source-side
// gradient is gathered over the transposed graph, so nothing needs atomics and
// the results are bitwise reproducible for a fixed thread count.
//
// Entries of col past ptr[N] belong to no row (the layer parks replaced
// self-loops there): they are never read, and their gradients are zero.
//
// The schemas are defined once, in Python (pyg_agg/ops/native.py).
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "csr_parallel.h"

namespace pyg_agg {
namespace {

using at::Tensor;

constexpr int64_t kGrainWork = 1 << 14;

template <typename scalar_t>
const scalar_t* data_or_null(const c10::optional<Tensor>& t) {
  return (t && t->numel() > 0) ? t->data_ptr<scalar_t>() : nullptr;
}

// Everything one edge's pre-activation and score read.
template <typename scalar_t>
struct AttentionInputs {
  const scalar_t* x_src;     // [Ns, H*C]
  const scalar_t* x_dst;     // [Nd, H*C]
  const scalar_t* att;       // [H*C]
  const int64_t* ptr;        // [Nd + 1]
  const int64_t* col;        // [E]
  const scalar_t* edge_attr; // [E, D] or nullptr
  const scalar_t* weight_t;  // [D, H*C] (W_e transposed) or nullptr
  const scalar_t* scale;     // [E, H] or nullptr
  int64_t heads, channels, edge_dim;
  double slope;

  int64_t width() const { return heads * channels; }
};

template <typename scalar_t>
AttentionInputs<scalar_t> attention_inputs(const Tensor& x_src, const Tensor& x_dst, const Tensor& att,
                                           const Tensor& ptr, const Tensor& col,
                                           const c10::optional<Tensor>& edge_attr,
                                           const c10::optional<Tensor>& weight_t,
                                           const c10::optional<Tensor>& scale, double slope) {
  const bool has_edge = edge_attr && edge_attr->numel() > 0;
  return {x_src.data_ptr<scalar_t>(), x_dst.data_ptr<scalar_t>(), att.data_ptr<scalar_t>(),
          ptr.data_ptr<int64_t>(), col.data_ptr<int64_t>(), data_or_null<scalar_t>(edge_attr),
          data_or_null<scalar_t>(weight_t), data_or_null<scalar_t>(scale), att.size(0), att.size(1),
          has_edge ? edge_attr->size(1) : 0, slope};
}

void check_inputs(const Tensor& x_src, const Tensor& x_dst, const Tensor& att, const Tensor& ptr,
                  const Tensor& col, const c10::optional<Tensor>& edge_attr,
                  const c10::optional<Tensor>& weight_t, const c10::optional<Tensor>& scale) {
  TORCH_CHECK(att.dim() == 2 && att.is_contiguous(), "dynamic_attention: att must be a contiguous [H, C] tensor");
  for (const Tensor* x : {&x_src, &x_dst}) {
    TORCH_CHECK(x->dim() == 3 && x->is_contiguous() && x->size(1) == att.size(0) && x->size(2) == att.size(1) &&
                    x->scalar_type() == att.scalar_type(),
                "dynamic_attention: x_src and x_dst must be contiguous [N, H, C] tensors of att's dtype");
  }
  TORCH_CHECK(ptr.dim() == 1 && ptr.scalar_type() == at::kLong && ptr.is_contiguous() &&
                  ptr.numel() == x_dst.size(0) + 1,
              "dynamic_attention: ptr must be a contiguous int64 [N_dst + 1] tensor");
  TORCH_CHECK(col.dim() == 1 && col.scalar_type() == at::kLong && col.is_contiguous(),
              "dynamic_attention: col must be a contiguous int64 [E] tensor");
  if (edge_attr && edge_attr->numel() > 0) {
    TORCH_CHECK(weight_t && edge_attr->dim() == 2 && edge_attr->is_contiguous() &&
                    edge_attr->size(0) == col.numel() && weight_t->is_contiguous() &&
                    weight_t->dim() == 2 && weight_t->size(0) == edge_attr->size(1) &&
                    weight_t->size(1) == att.numel(),
                "dynamic_attention: edge_attr must be a contiguous [E, D] tensor with a [D, H*C] weight_t");
  }
  if (scale && scale->numel() > 0) {
    TORCH_CHECK(scale->dim() == 2 && scale->is_contiguous() && scale->size(0) == col.numel() &&
                    scale->size(1) == att.size(0),
                "dynamic_attention: edge_scale must be a contiguous [E, H] tensor");
  }
}

// z = x_src[col[e]] + x_dst[i] (+ W_e edge_attr[e]), [H*C] in acc_t.
template <typename scalar_t, typename acc_t, bool kEdge>
inline void pre_activation(const AttentionInputs<scalar_t>& in, int64_t i, int64_t e,
                           acc_t* __restrict__ z) {
  const int64_t width = in.width();
  const scalar_t* __restrict__ xs = in.x_src + in.col[e] * width;
  const scalar_t* __restrict__ xd = in.x_dst + i * width;
  for (int64_t k = 0; k < width; ++k) z[k] = static_cast<acc_t>(xs[k]) + static_cast<acc_t>(xd[k]);
  if (kEdge) {
    for (int64_t d = 0; d < in.edge_dim; ++d) {
      const acc_t a = static_cast<acc_t>(in.edge_attr[e * in.edge_dim + d]);
      const scalar_t* __restrict__ w = in.weight_t + d * width;
      for (int64_t k = 0; k < width; ++k) z[k] += a * static_cast<acc_t>(w[k]);
    }
  }
}

// sum_{c < n} term(c) in kLanes independent partial sums, added in a fixed
// order: a plain float reduction is a serial dependency chain that GCC may not
// reorder (it would change the rounding), so it never vectorises; lanes do, and
// the result stays deterministic.
constexpr int64_t kLanes = 16;

template <typename acc_t, typename Term>
inline acc_t lane_sum(int64_t n, Term term) {
  acc_t part[kLanes] = {};
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) part[l] += term(c + l);
  }
  acc_t total = 0;
  for (; c < n; ++c) total += term(c);
  for (int64_t l = 0; l < kLanes; ++l) total += part[l];
  return total;
}

// LeakyReLU as max/min, which vectorise where a compare-and-select did not.
template <typename acc_t>
inline acc_t leaky_relu(acc_t v, acc_t slope) {
  return std::max(v, acc_t(0)) + slope * std::min(v, acc_t(0));
}

// The slope factor of LeakyReLU at v: 1 where v > 0, else the negative slope.
// Written as arithmetic on the comparison so that the loops around it vectorise.
template <typename acc_t>
inline acc_t slope_factor(acc_t v, acc_t slope) {
  return slope + (acc_t(1) - slope) * static_cast<acc_t>(v > acc_t(0));
}

// s_h = sum_c att[h, c] * LeakyReLU(z[h, c])
template <typename scalar_t, typename acc_t>
inline void scores(const AttentionInputs<scalar_t>& in, const acc_t* __restrict__ z, acc_t* __restrict__ s) {
  const acc_t slope = static_cast<acc_t>(in.slope);
  for (int64_t h = 0; h < in.heads; ++h) {
    const acc_t* __restrict__ zh = z + h * in.channels;
    const scalar_t* __restrict__ ah = in.att + h * in.channels;
    s[h] = lane_sum<acc_t>(in.channels, [&](int64_t c) {
      return static_cast<acc_t>(ah[c]) * leaky_relu(zh[c], slope);
    });
  }
}

template <typename scalar_t, typename acc_t, bool kEdge>
void forward_rows(const AttentionInputs<scalar_t>& in, int64_t begin, int64_t end, scalar_t* out,
                  scalar_t* lse_out, scalar_t* alpha_out) {
  const int64_t heads = in.heads, channels = in.channels, width = in.width();
  std::vector<acc_t> z(width), s(heads), running_max(heads), norm(heads), acc(width);
  for (int64_t i = begin; i < end; ++i) {
    const int64_t first = in.ptr[i], last = in.ptr[i + 1];
    std::fill(running_max.begin(), running_max.end(), -std::numeric_limits<acc_t>::infinity());
    std::fill(norm.begin(), norm.end(), acc_t(0));
    std::fill(acc.begin(), acc.end(), acc_t(0));
    for (int64_t e = first; e < last; ++e) {
      pre_activation<scalar_t, acc_t, kEdge>(in, i, e, z.data());
      scores<scalar_t, acc_t>(in, z.data(), s.data());
      const scalar_t* __restrict__ xs = in.x_src + in.col[e] * width;
      for (int64_t h = 0; h < heads; ++h) {
        acc_t* __restrict__ a = acc.data() + h * channels;
        if (s[h] > running_max[h]) {  // a new maximum: rescale what was summed so far
          const acc_t shrink = std::exp(running_max[h] - s[h]);
          norm[h] *= shrink;
          for (int64_t c = 0; c < channels; ++c) a[c] *= shrink;
          running_max[h] = s[h];
        }
        const acc_t p = std::exp(s[h] - running_max[h]);
        norm[h] += p;
        const acc_t w = in.scale ? p * static_cast<acc_t>(in.scale[e * heads + h]) : p;
        const scalar_t* __restrict__ x = xs + h * channels;
        for (int64_t c = 0; c < channels; ++c) a[c] += w * static_cast<acc_t>(x[c]);
      }
    }
    scalar_t* o = out + i * width;
    for (int64_t h = 0; h < heads; ++h) {
      const bool empty = !(norm[h] > acc_t(0));
      const acc_t inv = empty ? acc_t(0) : acc_t(1) / norm[h];
      for (int64_t c = 0; c < channels; ++c) o[h * channels + c] = static_cast<scalar_t>(acc[h * channels + c] * inv);
      // log-sum-exp of the row's scores: alpha_e = exp(s_e - lse) in the backward
      s[h] = empty ? acc_t(0) : running_max[h] + std::log(norm[h]);
      lse_out[i * heads + h] = static_cast<scalar_t>(s[h]);
    }
    if (alpha_out) {  // the softmax itself, recomputed in acc_t against the exact lse
      std::vector<acc_t> lse(s.begin(), s.end());
      for (int64_t e = first; e < last; ++e) {
        pre_activation<scalar_t, acc_t, kEdge>(in, i, e, z.data());
        scores<scalar_t, acc_t>(in, z.data(), s.data());
        for (int64_t h = 0; h < heads; ++h) alpha_out[e * heads + h] = static_cast<scalar_t>(std::exp(s[h] - lse[h]));
      }
    }
  }
}

std::tuple<Tensor, Tensor, Tensor> dynamic_attention_cpu(
    const Tensor& x_src, const Tensor& x_dst, const Tensor& att, const Tensor& ptr, const Tensor& col,
    const c10::optional<Tensor>& edge_attr, const c10::optional<Tensor>& weight_t,
    const c10::optional<Tensor>& edge_scale, double negative_slope, bool return_alpha,
    const c10::optional<Tensor>& /*csc_ptr*/, const c10::optional<Tensor>& /*csc_pos*/,
    const c10::optional<Tensor>& /*edge_row: the transposed graph, kept for the backward*/) {
  check_inputs(x_src, x_dst, att, ptr, col, edge_attr, weight_t, edge_scale);
  const int64_t rows = x_dst.size(0), heads = att.size(0), edges = col.numel();
  Tensor out = at::empty_like(x_dst);
  // lse is read back only from rows < ptr[N]'s rows; alpha's parked entries stay 0
  Tensor lse = at::empty({rows, heads}, x_dst.options());
  Tensor alpha = return_alpha ? at::zeros({edges, heads}, x_dst.options()) : at::empty({0}, x_dst.options());
  if (rows == 0) return {out, lse, alpha};
  const bool has_edge = edge_attr && edge_attr->numel() > 0;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x_src.scalar_type(), "dynamic_attention_cpu", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const auto in = attention_inputs<scalar_t>(x_src, x_dst, att, ptr, col, edge_attr, weight_t, edge_scale,
                                               negative_slope);
    scalar_t* out_p = out.data_ptr<scalar_t>();
    scalar_t* lse_p = lse.data_ptr<scalar_t>();
    scalar_t* alpha_p = return_alpha ? alpha.data_ptr<scalar_t>() : nullptr;
    const auto run = has_edge ? &forward_rows<scalar_t, acc_t, true> : &forward_rows<scalar_t, acc_t, false>;
    parallel_csr_rows(ptr.data_ptr<int64_t>(), rows, in.width(), kGrainWork, [&](int64_t begin, int64_t end) {
      run(in, begin, end, out_p, lse_p, alpha_p);
    });
  });
  return {out, lse, alpha};
}

// Per-thread sums of the weight gradients (att, W_e), added up in thread order.
template <typename acc_t>
struct ThreadPartials {
  std::vector<std::vector<acc_t>> att, weight;
  ThreadPartials(int64_t width, int64_t weight_size)
      : att(at::get_num_threads(), std::vector<acc_t>(width)),
        weight(at::get_num_threads(), std::vector<acc_t>(weight_size)) {}
};

// Pass over the target rows: the softmax backward, and every gradient that a
// row owns (x_dst, edge_attr, edge_scale) or that sums over edges (att, W_e).
// Writes, per CSR position, the weight alpha * scale and the score gradient ds,
// which the source pass needs.
template <typename scalar_t, typename acc_t, bool kEdge>
void backward_rows(const AttentionInputs<scalar_t>& in, const scalar_t* grad_out, const scalar_t* grad_alpha,
                   const scalar_t* lse, int64_t begin, int64_t end, acc_t* weight_buf, acc_t* ds_buf,
                   scalar_t* grad_dst, scalar_t* grad_edge_attr, scalar_t* grad_scale, acc_t* att_sum,
                   acc_t* weight_sum) {
  const int64_t heads = in.heads, channels = in.channels, width = in.width();
  const acc_t slope = static_cast<acc_t>(in.slope);
  std::vector<acc_t> z(width), s(heads), dot(heads), total(heads), dz(width), gd(width);
  std::vector<acc_t> row_alpha, row_dalpha;
  for (int64_t i = begin; i < end; ++i) {
    const int64_t first = in.ptr[i], last = in.ptr[i + 1], degree = last - first;
    const scalar_t* __restrict__ g = grad_out + i * width;
    row_alpha.resize(degree * heads);
    row_dalpha.resize(degree * heads);
    std::fill(total.begin(), total.end(), acc_t(0));
    // dalpha_e = scale_e <g_i, x_j> (+ grad of the returned alpha); total = sum_e alpha_e dalpha_e
    for (int64_t e = first; e < last; ++e) {
      pre_activation<scalar_t, acc_t, kEdge>(in, i, e, z.data());
      scores<scalar_t, acc_t>(in, z.data(), s.data());
      const scalar_t* __restrict__ xs = in.x_src + in.col[e] * width;
      for (int64_t h = 0; h < heads; ++h) {
        const scalar_t* __restrict__ gh = g + h * channels;
        const scalar_t* __restrict__ xh = xs + h * channels;
        const acc_t d = lane_sum<acc_t>(
            channels, [&](int64_t c) { return static_cast<acc_t>(gh[c]) * static_cast<acc_t>(xh[c]); });
        const acc_t alpha = std::exp(s[h] - static_cast<acc_t>(lse[i * heads + h]));
        const acc_t scale = in.scale ? static_cast<acc_t>(in.scale[e * heads + h]) : acc_t(1);
        acc_t dalpha = scale * d;
        if (grad_alpha) dalpha += static_cast<acc_t>(grad_alpha[e * heads + h]);
        if (grad_scale) grad_scale[e * heads + h] = static_cast<scalar_t>(alpha * d);
        row_alpha[(e - first) * heads + h] = alpha;
        row_dalpha[(e - first) * heads + h] = dalpha;
        weight_buf[e * heads + h] = alpha * scale;
        total[h] += alpha * dalpha;
      }
    }
    std::fill(gd.begin(), gd.end(), acc_t(0));
    for (int64_t e = first; e < last; ++e) {
      pre_activation<scalar_t, acc_t, kEdge>(in, i, e, z.data());
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t k = (e - first) * heads + h;
        const acc_t ds = row_alpha[k] * (row_dalpha[k] - total[h]);
        ds_buf[e * heads + h] = ds;
        const acc_t* __restrict__ zh = z.data() + h * channels;
        const scalar_t* __restrict__ a = in.att + h * channels;
        acc_t* __restrict__ att_h = att_sum + h * channels;
        acc_t* __restrict__ dz_h = dz.data() + h * channels;
        for (int64_t c = 0; c < channels; ++c) {
          att_h[c] += ds * leaky_relu(zh[c], slope);
          dz_h[c] = ds * static_cast<acc_t>(a[c]) * slope_factor(zh[c], slope);
        }
      }
      for (int64_t q = 0; q < width; ++q) gd[q] += dz[q];
      if (kEdge) {
        for (int64_t d = 0; d < in.edge_dim; ++d) {
          const scalar_t* __restrict__ w = in.weight_t + d * width;
          acc_t* __restrict__ wsum = weight_sum + d * width;
          const acc_t a = static_cast<acc_t>(in.edge_attr[e * in.edge_dim + d]);
          const acc_t* __restrict__ dzp = dz.data();
          for (int64_t q = 0; q < width; ++q) wsum[q] += a * dzp[q];
          const acc_t ge = lane_sum<acc_t>(width, [&](int64_t q) { return dzp[q] * static_cast<acc_t>(w[q]); });
          if (grad_edge_attr) grad_edge_attr[e * in.edge_dim + d] = static_cast<scalar_t>(ge);
        }
      }
    }
    for (int64_t q = 0; q < width; ++q) grad_dst[i * width + q] = static_cast<scalar_t>(gd[q]);
  }
}

// Pass over the sources (the transposed graph): x_src[j] receives, from each
// out-edge e into row i, weight_e * grad_out[i] (the aggregation) and
// ds_e * att * LeakyReLU'(z_e) (the score).
template <typename scalar_t, typename acc_t, bool kEdge>
void backward_sources(const AttentionInputs<scalar_t>& in, const scalar_t* grad_out, const int64_t* csc_ptr,
                      const int64_t* csc_pos, const int64_t* edge_row, int64_t rows, const acc_t* weight_buf,
                      const acc_t* ds_buf, int64_t begin, int64_t end, scalar_t* grad_src) {
  const int64_t heads = in.heads, channels = in.channels, width = in.width();
  const acc_t slope = static_cast<acc_t>(in.slope);
  std::vector<acc_t> z(width), acc(width);
  for (int64_t j = begin; j < end; ++j) {
    std::fill(acc.begin(), acc.end(), acc_t(0));
    for (int64_t k = csc_ptr[j]; k < csc_ptr[j + 1]; ++k) {
      const int64_t e = csc_pos[k], i = edge_row[e];
      if (i >= rows) continue;  // a parked entry, in no row
      pre_activation<scalar_t, acc_t, kEdge>(in, i, e, z.data());
      for (int64_t h = 0; h < heads; ++h) {
        const acc_t w = weight_buf[e * heads + h], ds = ds_buf[e * heads + h];
        const scalar_t* __restrict__ g = grad_out + i * width + h * channels;
        const scalar_t* __restrict__ a = in.att + h * channels;
        const acc_t* __restrict__ zh = z.data() + h * channels;
        acc_t* __restrict__ out = acc.data() + h * channels;
        for (int64_t c = 0; c < channels; ++c) {
          out[c] += w * static_cast<acc_t>(g[c]) + ds * static_cast<acc_t>(a[c]) * slope_factor(zh[c], slope);
        }
      }
    }
    for (int64_t q = 0; q < width; ++q) grad_src[j * width + q] = static_cast<scalar_t>(acc[q]);
  }
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor> dynamic_attention_backward_cpu(
    const Tensor& grad_out, const c10::optional<Tensor>& grad_alpha, const Tensor& x_src, const Tensor& x_dst,
    const Tensor& att, const Tensor& ptr, const Tensor& col, const c10::optional<Tensor>& edge_attr,
    const c10::optional<Tensor>& weight_t, const c10::optional<Tensor>& edge_scale, const Tensor& lse,
    double negative_slope, const Tensor& csc_ptr, const Tensor& csc_pos, const Tensor& edge_row) {
  check_inputs(x_src, x_dst, att, ptr, col, edge_attr, weight_t, edge_scale);
  TORCH_CHECK(grad_out.sizes() == x_dst.sizes() && grad_out.is_contiguous(),
              "dynamic_attention_backward: grad_out must be contiguous and shaped like x_dst");
  const int64_t rows = x_dst.size(0), sources = x_src.size(0), heads = att.size(0), edges = col.numel();
  const bool has_edge = edge_attr && edge_attr->numel() > 0;
  const bool has_scale = edge_scale && edge_scale->numel() > 0;
  Tensor grad_src = at::empty_like(x_src);
  Tensor grad_dst = at::empty_like(x_dst);
  Tensor grad_att = at::empty_like(att);
  // parked entries are in no row: their edge gradients stay zero
  Tensor grad_edge_attr = has_edge ? at::zeros_like(*edge_attr) : at::empty({0}, att.options());
  Tensor grad_weight_t = has_edge ? at::empty_like(*weight_t) : at::empty({0}, att.options());
  Tensor grad_scale = has_scale ? at::zeros_like(*edge_scale) : at::empty({0}, att.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x_src.scalar_type(), "dynamic_attention_backward_cpu", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const auto in = attention_inputs<scalar_t>(x_src, x_dst, att, ptr, col, edge_attr, weight_t, edge_scale,
                                               negative_slope);
    const int64_t width = in.width(), weight_size = has_edge ? in.edge_dim * width : 0;
    const auto acc_options = x_src.options().dtype(c10::CppTypeToScalarType<acc_t>::value);
    Tensor weight_buf = at::empty({edges, heads}, acc_options);
    Tensor ds_buf = at::empty({edges, heads}, acc_options);
    ThreadPartials<acc_t> partials(width, weight_size);
    const scalar_t* g = grad_out.data_ptr<scalar_t>();
    const scalar_t* ga = data_or_null<scalar_t>(grad_alpha);
    const scalar_t* lse_p = lse.data_ptr<scalar_t>();
    acc_t* w_p = weight_buf.data_ptr<acc_t>();
    acc_t* ds_p = ds_buf.data_ptr<acc_t>();
    scalar_t* gd_p = grad_dst.data_ptr<scalar_t>();
    scalar_t* ge_p = has_edge ? grad_edge_attr.data_ptr<scalar_t>() : nullptr;
    scalar_t* gs_p = has_scale ? grad_scale.data_ptr<scalar_t>() : nullptr;
    const auto rows_pass = has_edge ? &backward_rows<scalar_t, acc_t, true> : &backward_rows<scalar_t, acc_t, false>;
    parallel_csr_rows(ptr.data_ptr<int64_t>(), rows, width, kGrainWork, [&](int64_t begin, int64_t end) {
      const int thread = at::get_thread_num();
      rows_pass(in, g, ga, lse_p, begin, end, w_p, ds_p, gd_p, ge_p, gs_p, partials.att[thread].data(),
                has_edge ? partials.weight[thread].data() : nullptr);
    });
    const auto sources_pass =
        has_edge ? &backward_sources<scalar_t, acc_t, true> : &backward_sources<scalar_t, acc_t, false>;
    const int64_t* cp = csc_ptr.data_ptr<int64_t>();
    const int64_t* cpos = csc_pos.data_ptr<int64_t>();
    const int64_t* er = edge_row.data_ptr<int64_t>();
    scalar_t* gs_src = grad_src.data_ptr<scalar_t>();
    parallel_csr_rows(cp, sources, width, kGrainWork, [&](int64_t begin, int64_t end) {
      sources_pass(in, g, cp, cpos, er, rows, w_p, ds_p, begin, end, gs_src);
    });
    // the per-thread sums, added in thread order
    auto reduce = [](const std::vector<std::vector<acc_t>>& parts, scalar_t* out, int64_t size) {
      for (int64_t q = 0; q < size; ++q) {
        acc_t total = 0;
        for (const auto& part : parts) total += part[q];
        out[q] = static_cast<scalar_t>(total);
      }
    };
    reduce(partials.att, grad_att.data_ptr<scalar_t>(), width);
    if (has_edge) reduce(partials.weight, grad_weight_t.data_ptr<scalar_t>(), weight_size);
  });
  return {grad_src, grad_dst, grad_att, grad_edge_attr, grad_weight_t, grad_scale};
}

}  // namespace

TORCH_LIBRARY_IMPL(pyg_agg, CPU, m) {
  m.impl("dynamic_attention", &dynamic_attention_cpu);
  m.impl("dynamic_attention_backward", &dynamic_attention_backward_cpu);
}

}  // namespace pyg_agg
