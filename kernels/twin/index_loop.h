// The twins' loops over a kernel's index space: the runner of kernels/shared's run_*
// dispatchers (the kernels pass a grid-stride launch, kernels/cuda/data_launch.cuh's GridRun),
// and the walk over a strided layout that the data-movement kernels make per thread.
#pragma once

#include <cstdint>

#include "kernels/shared/index_math.h"

namespace ampc::kernels::twin {

// f(k) for k = 0, 1, ..., n - 1 in order.
struct IndexLoop {
  template <typename F>
  void operator()(const char* /*what*/, int64_t n, const F& f) const {
    for (int64_t k = 0; k < n; ++k) f(k);
  }
};

// f(offset) for each linear index i of l in order, offset[k] being i's offset in stride set k
// (shared::dm::layout_offsets).
template <int K, typename F>
void for_each_layout_offset(const shared::dm::Layout<K>& l, const F& f) {
  for (int64_t i = 0; i < l.numel; ++i) {
    int64_t offset[K];
    shared::dm::layout_offsets(l, i, offset);
    f(offset);
  }
}

}  // namespace ampc::kernels::twin
