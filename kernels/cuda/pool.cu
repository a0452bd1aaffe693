// Pooling (pool.h): one thread per output (MaxPool, AveragePool) or per dx element (the
// gradients, which gather their dy instead of scattering it, so no atomics and the CPU
// kernel's order of additions), grid-stride; GlobalAveragePool one block per plane with a
// fixed-order tree. The per-element math is pool_math.h's functors, which the twin runs in a
// loop (pool_layout.h's run_pool / run_pool_grad).
#include <cstdint>

#include "kernels/cuda/data_launch.cuh"
#include "kernels/cuda/pool.h"
#include "kernels/shared/pool_layout.h"
#include "kernels/shared/pool_math.h"

namespace ampc::kernels::cuda {

namespace sh = ampc::kernels::shared;
namespace pm = ampc::kernels::shared::pool;

namespace {

template <typename T>
__global__ void __launch_bounds__(pm::kGlobalThreads)
    global_average_pool_kernel(int64_t spatial, const T* __restrict__ x, T* __restrict__ y) {
  using E = pm::PoolElem<T>;
  using M = typename E::Math;
  __shared__ M scratch[pm::kGlobalThreads];
  const int64_t pl = blockIdx.x;
  const M v = pm::thread_sum(x + pl * spatial, spatial, static_cast<int>(threadIdx.x));
  const M sum = detail::block_tree_sum<pm::kGlobalThreads>(v, scratch,
                                                           [](M a, M b) { return sh::add(a, b); });
  if (threadIdx.x == 0) y[pl] = E::store(pm::global_mean(sum, spatial));
}

}  // namespace

void max_pool(DType dtype, const PoolGeometry& geometry, int64_t planes, const void* x, void* y,
              int64_t* indices, bool column_major, cudaStream_t stream) {
  pm::run_pool<false>(detail::GridRun{stream}, "max_pool", dtype, geometry, planes, x, y, false,
                      indices, column_major);
}

void average_pool(DType dtype, const PoolGeometry& geometry, int64_t planes, const void* x, void* y,
                  bool count_include_pad, cudaStream_t stream) {
  pm::run_pool<true>(detail::GridRun{stream}, "average_pool", dtype, geometry, planes, x, y,
                     count_include_pad, nullptr, false);
}

void global_average_pool(DType dtype, int64_t planes, int64_t spatial, const void* x, void* y,
                         cudaStream_t stream) {
  pm::visit_pool_type<false>(dtype, "global_average_pool", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (planes <= 0) return;
    if (planes >= (int64_t(1) << 31)) throw Error("global_average_pool: too many planes");
    global_average_pool_kernel<T><<<static_cast<unsigned>(planes), pm::kGlobalThreads, 0, stream>>>(
        spatial, static_cast<const T*>(x), static_cast<T*>(y));
    detail::check_launch("global_average_pool");
  });
}

void max_pool_grad(DType dtype, const PoolGeometry& geometry, int64_t planes, const void* x,
                   const void* dy, void* dx, cudaStream_t stream) {
  pm::run_pool_grad<false>(detail::GridRun{stream}, "max_pool_grad", dtype, geometry, planes, x, dy,
                           dx, false);
}

void average_pool_grad(DType dtype, const PoolGeometry& geometry, int64_t planes, const void* dy,
                       void* dx, bool count_include_pad, cudaStream_t stream) {
  pm::run_pool_grad<true>(detail::GridRun{stream}, "average_pool_grad", dtype, geometry, planes,
                          nullptr, dy, dx, count_include_pad);
}

}  // namespace ampc::kernels::cuda
