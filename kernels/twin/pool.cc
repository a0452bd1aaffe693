// CPU twin of kernels/cuda/pool.cu: pool_math.h's per-output and per-dx-element functors over
// every index (pool_layout.h's run_pool / run_pool_grad with a loop), and GlobalAveragePool's
// block reduction (thread sums, then the tree) emulated.
#include "kernels/twin/pool.h"

#include <vector>

#include "kernels/shared/pool_layout.h"
#include "kernels/shared/pool_math.h"
#include "kernels/shared/rowwise_tree.h"
#include "kernels/twin/index_loop.h"

namespace ampc::kernels::twin {

namespace pm = ampc::kernels::shared::pool;

void max_pool(DType dtype, const PoolGeometry& geometry, int64_t planes, const void* x, void* y,
              int64_t* indices, bool column_major) {
  pm::run_pool<false>(IndexLoop{}, "max_pool", dtype, geometry, planes, x, y, false, indices,
                      column_major);
}

void average_pool(DType dtype, const PoolGeometry& geometry, int64_t planes, const void* x, void* y,
                  bool count_include_pad) {
  pm::run_pool<true>(IndexLoop{}, "average_pool", dtype, geometry, planes, x, y, count_include_pad,
                     nullptr, false);
}

void global_average_pool(DType dtype, int64_t planes, int64_t spatial, const void* x, void* y) {
  pm::visit_pool_type<false>(dtype, "global_average_pool", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using E = pm::PoolElem<T>;
    using M = typename E::Math;
    const T* xs = static_cast<const T*>(x);
    T* ys = static_cast<T*>(y);
    std::vector<M> v(pm::kGlobalThreads);
    for (int64_t pl = 0; pl < planes; ++pl) {
      for (int t = 0; t < pm::kGlobalThreads; ++t)
        v[t] = pm::thread_sum(xs + pl * spatial, spatial, t);
      // The block's tree (data_launch.cuh's block_tree_sum) halves as a warp's does.
      shared::warp_tree_host(v.data(), pm::kGlobalThreads,
                             [](M a, M b) { return shared::add(a, b); });
      ys[pl] = E::store(pm::global_mean(v[0], spatial));
    }
  });
}

void max_pool_grad(DType dtype, const PoolGeometry& geometry, int64_t planes, const void* x,
                   const void* dy, void* dx) {
  pm::run_pool_grad<false>(IndexLoop{}, "max_pool_grad", dtype, geometry, planes, x, dy, dx, false);
}

void average_pool_grad(DType dtype, const PoolGeometry& geometry, int64_t planes, const void* dy,
                       void* dx, bool count_include_pad) {
  pm::run_pool_grad<true>(IndexLoop{}, "average_pool_grad", dtype, geometry, planes, nullptr, dy,
                          dx, count_include_pad);
}

}  // namespace ampc::kernels::twin
