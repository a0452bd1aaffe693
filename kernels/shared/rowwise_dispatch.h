// Host-side dtype dispatch of the row-wise, reduction and AMP launchers (kernels/cuda) and
// twins (kernels/twin): calls f(T{}) for the storage type T of a DType, or throws ampc::Error.
#pragma once

#include <string>

#include "base/dtype.h"
#include "base/error.h"
#include "base/half.h"
#include "kernels/shared/dtype_visit.h"

namespace ampc::kernels::shared {

// Calls f(T{}) for the TypeEntry whose code is dtype, or throws "<what>: <kind> <dtype> is
// not supported (<supported>)".
template <typename... Entries, typename F>
void dispatch_types(DType dtype, const char* what, const char* kind, const char* supported, F&& f) {
  if (!visit_listed<Entries...>(dtype, [&](auto tag) { f(typename decltype(tag)::type{}); })) {
    throw Error(std::string(what) + ": " + kind + " " + std::string(dtype_name(dtype)) +
                " is not supported (" + supported + ")");
  }
}

// f32, f16, bf16 (the 16-bit types computed in fp32).
template <typename F>
void dispatch_float_types(DType dtype, const char* what, F&& f) {
  dispatch_types<F32Entry, F16Entry, BF16Entry>(dtype, what, "element type", "f32, f16, bf16", f);
}

// The same plus f64 (the AMP ops, which compute fp64 gradients in double as the CPU op).
template <typename F>
void dispatch_float_types_f64(DType dtype, const char* what, F&& f) {
  dispatch_types<F64Entry, F32Entry, F16Entry, BF16Entry>(dtype, what, "element type",
                                                          "f32, f64, f16, bf16", f);
}

// Integer labels: i32, i64.
template <typename F>
void dispatch_label_types(DType dtype, const char* what, F&& f) {
  dispatch_types<I32Entry, I64Entry>(dtype, what, "label type", "i32, i64", f);
}

}  // namespace ampc::kernels::shared
