// The twins' runner of kernels/shared's run_* dispatchers (the kernels pass a grid-stride
// launch, kernels/cuda/data_launch.cuh's GridRun): f(k) for k = 0, 1, ..., n - 1 in order.
#pragma once

#include <cstdint>

namespace ampc::kernels::twin {

struct IndexLoop {
  template <typename F>
  void operator()(const char* /*what*/, int64_t n, const F& f) const {
    for (int64_t k = 0; k < n; ++k) f(k);
  }
};

}  // namespace ampc::kernels::twin
