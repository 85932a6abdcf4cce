// Parallel loops over the rows of a CSR graph, split by work rather than by
// row count. at::parallel_for splits a range evenly, so on a power-law graph
// one thread can get the hubs: on the benchmarks' 100k-node graph the first
// half of the rows holds 53% of the edges, and where the hubs have the low
// ids (a degree-sorted numbering) it held 91%. Splitting at equal
// (edges + rows) gives each thread the same work; rows stay independent, so
// the results do not depend on the split.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace pyg_agg {

// Calls body(begin, end) on consecutive row ranges covering [0, rows), in
// parallel, each range holding about the same number of edges plus rows
// (ptr: the rows' CSR offsets, rows + 1 of them). Work (edges + rows, times
// `channels`) below `grain_work` runs serially in one call: a parallel region
// would cost more than it saves.
template <typename Body>
void parallel_csr_rows(const int64_t* ptr, int64_t rows, int64_t channels, int64_t grain_work,
                       const Body& body) {
  if (rows <= 0) return;
  const int64_t work = ptr[rows] - ptr[0] + rows;
  const int64_t parts = std::min<int64_t>({at::get_num_threads(), rows,
                                           std::max<int64_t>(1, work * channels / grain_work)});
  if (parts <= 1 || at::in_parallel_region()) {
    body(0, rows);
    return;
  }
  // bounds[k]: the first row whose work before it (edges of the earlier rows,
  // plus the rows) reaches k / parts of the total
  std::vector<int64_t> bounds(parts + 1, rows);
  bounds[0] = 0;
  int64_t row = 0;
  for (int64_t k = 1; k < parts; ++k) {
    const int64_t target = work * k / parts;
    int64_t lo = row, hi = rows;  // the work before row i is ptr[i] - ptr[0] + i, increasing in i
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (ptr[mid] - ptr[0] + mid < target) lo = mid + 1;
      else hi = mid;
    }
    bounds[k] = row = lo;
  }
  at::parallel_for(0, parts, 1, [&](int64_t first, int64_t last) {
    for (int64_t k = first; k < last; ++k) {
      if (bounds[k] < bounds[k + 1]) body(bounds[k], bounds[k + 1]);
    }
  });
}

}  // namespace pyg_agg
