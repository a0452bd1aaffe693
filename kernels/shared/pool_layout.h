// Host side of the pooling kernels (kernels/cuda/pool.cu) and twin (kernels/twin/pool.cc): the
// geometry of the launch API (PoolGeometry, kernel_args.h; twin:: and cuda:: name the same type) as
// pool_math.h's Geom, checked, and the dtype dispatch.
#pragma once

#include <cstdint>

#include "base/dtype.h"
#include "base/error.h"
#include "kernels/shared/elementwise_dispatch.h"
#include "kernels/shared/pool_math.h"

namespace ampc::kernels::shared::pool {

inline Geom to_geom(const PoolGeometry& g) {
  const Geom r{g};
  for (int d = 0; d < 3; ++d) {
    if (g.kernel[d] <= 0 || g.stride[d] <= 0 || g.dilation[d] <= 0)
      throw Error("pool: kernel, strides and dilations must be positive");
    if (g.image[d] < 0 || g.cols[d] < 0) throw Error("pool: negative image or output size");
  }
  return r;
}

// f(TypeTag<T>) for the float types (f32, f64, f16, bf16), with kWithBytes also int8 / uint8
// (MaxPool); throws for other dtypes.
template <bool kWithBytes, typename F>
void visit_pool_type(DType t, const char* what, F&& f) {
  if constexpr (kWithBytes) {
    if (t == DType::kInt8) return f(TypeTag<int8_t>{});
    if (t == DType::kUInt8) return f(TypeTag<uint8_t>{});
  }
  if (!visit_float(t, f)) unsupported(what, t);
}

// The launch API's max_pool / average_pool (kAverage) and max_pool_grad / average_pool_grad,
// for the kernels and the twin alike: run(what, n, f) calls f(k) for every k in [0, n) (a
// grid-stride kernel on the device, a loop in the twin) with pool_math.h's per-index functors.
// Arguments a pass does not take are ignored (MaxPool: count_include_pad; AveragePool:
// indices, column_major; AveragePoolGrad: x).
template <bool kAverage, typename Run>
void run_pool(const Run& run, const char* what, DType dtype, const PoolGeometry& geometry,
              int64_t planes, const void* x, void* y, bool count_include_pad, int64_t* indices,
              bool column_major) {
  const Geom g = to_geom(geometry);
  visit_pool_type<!kAverage>(dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    run(what, planes * g.cols_size(),
        PoolOutput<T, kAverage>{g, static_cast<const T*>(x), static_cast<T*>(y), count_include_pad,
                                indices, column_major});
  });
}

template <bool kAverage, typename Run>
void run_pool_grad(const Run& run, const char* what, DType dtype, const PoolGeometry& geometry,
                   int64_t planes, const void* x, const void* dy, void* dx,
                   bool count_include_pad) {
  const Geom g = to_geom(geometry);
  const bool empty = !kAverage && has_empty_window(g);
  visit_pool_type<false>(dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    run(what, planes * g.image_size(),
        PoolGradElement<T, kAverage>{g, static_cast<const T*>(dy), static_cast<T*>(dx),
                                     count_include_pad, static_cast<const T*>(x), empty});
  });
}

}  // namespace ampc::kernels::shared::pool
