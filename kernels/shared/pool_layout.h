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

template <typename G>
Geom to_geom(const G& g) {
  Geom r;
  for (int d = 0; d < 3; ++d) {
    r.image[d] = g.image[d];
    r.cols[d] = g.cols[d];
    r.kernel[d] = g.kernel[d];
    r.stride[d] = g.stride[d];
    r.dilation[d] = g.dilation[d];
    r.pad[d] = g.pad[d];
    r.pad_end[d] = g.pad_end[d];
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

}  // namespace ampc::kernels::shared::pool
