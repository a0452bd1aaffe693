// Pooling (pool.h): one thread per output (MaxPool, AveragePool) or per dx element (the
// gradients, which gather their dy instead of scattering it, so no atomics and the CPU
// kernel's order of additions), grid-stride; GlobalAveragePool one block per plane with a
// fixed-order tree. The per-element math is pool_math.h's.
#include <cstdint>

#include "kernels/cuda/data_launch.cuh"
#include "kernels/cuda/pool.h"
#include "kernels/shared/elementwise_dispatch.h"
#include "kernels/shared/pool_layout.h"
#include "kernels/shared/pool_math.h"

namespace ampc::kernels::cuda {

namespace sh = ampc::kernels::shared;
namespace pm = ampc::kernels::shared::pool;
using detail::grid_for;
using detail::kThreads;

namespace {

using pm::to_geom;
using pm::visit_pool_type;

template <typename T>
__global__ void max_pool_kernel(pm::Geom g, int64_t planes, const T* __restrict__ x,
                                T* __restrict__ y, int64_t* __restrict__ indices,
                                bool column_major) {
  using E = pm::PoolElem<T>;
  const int64_t img = g.image_size(), p = g.cols_size();
  AMPC_GRID_STRIDE(int64_t, k, planes * p) {
    const int64_t pl = k / p;
    int64_t o[3];
    pm::output_coords(g, k - pl * p, o);
    const pm::Window w = pm::window_at(g, o);
    if (!indices) {
      y[k] = E::store(pm::max_window(g, w, x + pl * img));
    } else {
      int64_t arg;
      y[k] = E::store(pm::argmax_window(g, w, x + pl * img, &arg));
      indices[k] = pl * img + (column_major ? pm::column_major_offset(g, arg) : arg);
    }
  }
}

template <typename T>
__global__ void average_pool_kernel(pm::Geom g, int64_t planes, const T* __restrict__ x,
                                    T* __restrict__ y, bool count_include_pad) {
  using E = pm::PoolElem<T>;
  const int64_t img = g.image_size(), p = g.cols_size();
  AMPC_GRID_STRIDE(int64_t, k, planes * p) {
    const int64_t pl = k / p;
    int64_t o[3];
    pm::output_coords(g, k - pl * p, o);
    y[k] = E::store(pm::average_window(g, pm::window_at(g, o), x + pl * img, count_include_pad));
  }
}

template <typename T>
__global__ void __launch_bounds__(pm::kGlobalThreads)
    global_average_pool_kernel(int64_t spatial, const T* __restrict__ x, T* __restrict__ y) {
  using E = pm::PoolElem<T>;
  using M = typename E::Math;
  __shared__ M scratch[pm::kGlobalThreads];
  const int64_t pl = blockIdx.x;
  const M v = pm::thread_sum(x + pl * spatial, spatial, static_cast<int>(threadIdx.x));
  const M sum = detail::block_tree_sum<pm::kGlobalThreads>(v, scratch,
                                                           [](M a, M b) { return pm::padd(a, b); });
  if (threadIdx.x == 0) y[pl] = E::store(pm::global_mean(sum, spatial));
}

template <typename T>
__global__ void max_pool_grad_kernel(pm::Geom g, int64_t planes, const T* __restrict__ x,
                                     const T* __restrict__ dy, T* __restrict__ dx,
                                     bool empty_windows) {
  using E = pm::PoolElem<T>;
  const int64_t img = g.image_size(), p = g.cols_size();
  AMPC_GRID_STRIDE(int64_t, k, planes * img) {
    const int64_t pl = k / img;
    int64_t i[3];
    pm::image_coords(g, k - pl * img, i);
    dx[k] = E::store(pm::max_grad_at(g, x + pl * img, dy + pl * p, i, empty_windows));
  }
}

template <typename T>
__global__ void average_pool_grad_kernel(pm::Geom g, int64_t planes, const T* __restrict__ dy,
                                         T* __restrict__ dx, bool count_include_pad) {
  using E = pm::PoolElem<T>;
  const int64_t img = g.image_size(), p = g.cols_size();
  AMPC_GRID_STRIDE(int64_t, k, planes * img) {
    const int64_t pl = k / img;
    int64_t i[3];
    pm::image_coords(g, k - pl * img, i);
    dx[k] = E::store(pm::average_grad_at(g, dy + pl * p, i, count_include_pad));
  }
}

}  // namespace

void max_pool(DType dtype, const PoolGeometry& geometry, int64_t planes, const void* x, void* y,
              int64_t* indices, bool column_major, cudaStream_t stream) {
  const pm::Geom g = to_geom(geometry);
  visit_pool_type<true>(dtype, "max_pool", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t n = planes * g.cols_size();
    if (n == 0) return;
    max_pool_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(
        g, planes, static_cast<const T*>(x), static_cast<T*>(y), indices, column_major);
    detail::check_launch("max_pool");
  });
}

void average_pool(DType dtype, const PoolGeometry& geometry, int64_t planes, const void* x, void* y,
                  bool count_include_pad, cudaStream_t stream) {
  const pm::Geom g = to_geom(geometry);
  visit_pool_type<false>(dtype, "average_pool", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t n = planes * g.cols_size();
    if (n == 0) return;
    average_pool_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(
        g, planes, static_cast<const T*>(x), static_cast<T*>(y), count_include_pad);
    detail::check_launch("average_pool");
  });
}

void global_average_pool(DType dtype, int64_t planes, int64_t spatial, const void* x, void* y,
                         cudaStream_t stream) {
  visit_pool_type<false>(dtype, "global_average_pool", [&](auto tag) {
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
  const pm::Geom g = to_geom(geometry);
  const bool empty = pm::has_empty_window(g);
  visit_pool_type<false>(dtype, "max_pool_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t n = planes * g.image_size();
    if (n == 0) return;
    max_pool_grad_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(
        g, planes, static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dx), empty);
    detail::check_launch("max_pool_grad");
  });
}

void average_pool_grad(DType dtype, const PoolGeometry& geometry, int64_t planes, const void* dy,
                       void* dx, bool count_include_pad, cudaStream_t stream) {
  const pm::Geom g = to_geom(geometry);
  visit_pool_type<false>(dtype, "average_pool_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t n = planes * g.image_size();
    if (n == 0) return;
    average_pool_grad_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(
        g, planes, static_cast<const T*>(dy), static_cast<T*>(dx), count_include_pad);
    detail::check_launch("average_pool_grad");
  });
}

}  // namespace ampc::kernels::cuda
