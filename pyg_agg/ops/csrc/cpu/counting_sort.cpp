// Stable counting sort of a segment index: the CSR of an unsorted index.
//
// Sorting edge_index by target is part of every call on an unsorted graph;
// a comparison or radix sort (torch.argsort) costs several passes over the
// index, a counting sort two: count per bucket, then place each entry at its
// bucket's cursor. Each thread counts and places one contiguous chunk of the
// entries, its cursors starting after the earlier chunks' entries of the same
// bucket, so the order is stable (and deterministic) for any thread count.
//
// The schema is defined once, in Python (pyg_agg/ops/native.py).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

namespace pyg_agg {
namespace {

using at::Tensor;

// Entries per chunk below which another chunk costs more than it saves.
constexpr int64_t kChunkEntries = 1 << 16;

// Returns (ptr [buckets + 1], perm [E]): the entries of bucket b, in input
// order, are perm[ptr[b]..ptr[b+1]]. Entries must lie in [0, buckets).
std::tuple<Tensor, Tensor> counting_sort_cpu(const Tensor& index, int64_t buckets) {
  TORCH_CHECK(index.dim() == 1 && index.scalar_type() == at::kLong && index.is_contiguous(),
              "counting_sort: index must be a contiguous int64 [E] tensor");
  TORCH_CHECK(buckets >= 0, "counting_sort: buckets must be >= 0");
  const int64_t entries = index.numel();
  Tensor ptr = at::zeros({buckets + 1}, index.options());
  Tensor perm = at::empty({entries}, index.options());
  if (entries == 0) return {ptr, perm};
  const int64_t* idx = index.data_ptr<int64_t>();
  int64_t* p = ptr.data_ptr<int64_t>();
  int64_t* out = perm.data_ptr<int64_t>();
  const int64_t chunks = std::max<int64_t>(
      1, std::min<int64_t>(at::get_num_threads(), entries / kChunkEntries));
  const int64_t chunk_size = (entries + chunks - 1) / chunks;
  // cursor[c * buckets + b]: the count, then the next position, of bucket b in chunk c
  std::vector<int64_t> cursor(chunks * buckets, 0);
  at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      int64_t* count = cursor.data() + c * buckets;
      for (int64_t e = c * chunk_size; e < std::min(entries, (c + 1) * chunk_size); ++e) ++count[idx[e]];
    }
  });
  int64_t position = 0;  // bucket-major, then chunk: the exclusive prefix sum
  for (int64_t b = 0; b < buckets; ++b) {
    p[b] = position;
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t count = cursor[c * buckets + b];
      cursor[c * buckets + b] = position;
      position += count;
    }
  }
  p[buckets] = position;
  at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      int64_t* next = cursor.data() + c * buckets;
      for (int64_t e = c * chunk_size; e < std::min(entries, (c + 1) * chunk_size); ++e) out[next[idx[e]]++] = e;
    }
  });
  return {ptr, perm};
}

}  // namespace

TORCH_LIBRARY_IMPL(pyg_agg, CPU, m) {
  m.impl("counting_sort", &counting_sort_cpu);
}

}  // namespace pyg_agg
