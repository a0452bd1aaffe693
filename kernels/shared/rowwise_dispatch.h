// Host-side dtype dispatch of the row-wise, reduction and AMP launchers (kernels/cuda) and
// twins (kernels/twin): calls f(T{}) for the storage type T of a DType, or throws ampc::Error.
#pragma once

#include <string>

#include "base/dtype.h"
#include "base/error.h"
#include "base/half.h"

namespace ampc::kernels::shared {

// f32, f16, bf16 (the 16-bit types computed in fp32).
template <typename F>
void dispatch_float_types(DType dtype, const char* what, F&& f) {
  switch (dtype) {
    case DType::kFloat32:
      return f(float{});
    case DType::kFloat16:
      return f(Half{});
    case DType::kBFloat16:
      return f(BFloat16{});
    default:
      throw Error(std::string(what) + ": element type " + std::string(dtype_name(dtype)) +
                  " is not supported (f32, f16, bf16)");
  }
}

// The same plus f64 (the AMP ops, which compute fp64 gradients in double as the CPU op).
template <typename F>
void dispatch_float_types_f64(DType dtype, const char* what, F&& f) {
  if (dtype == DType::kFloat64) return f(double{});
  if (dtype != DType::kFloat32 && dtype != DType::kFloat16 && dtype != DType::kBFloat16) {
    throw Error(std::string(what) + ": element type " + std::string(dtype_name(dtype)) +
                " is not supported (f32, f64, f16, bf16)");
  }
  dispatch_float_types(dtype, what, f);
}

// Integer labels: i32, i64.
template <typename F>
void dispatch_label_types(DType dtype, const char* what, F&& f) {
  switch (dtype) {
    case DType::kInt32:
      return f(int32_t{});
    case DType::kInt64:
      return f(int64_t{});
    default:
      throw Error(std::string(what) + ": label type " + std::string(dtype_name(dtype)) +
                  " is not supported (i32, i64)");
  }
}

}  // namespace ampc::kernels::shared
