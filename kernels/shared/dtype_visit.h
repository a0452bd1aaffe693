// Host-side dispatch from a runtime DType to a C++ type out of a list: the one definition that
// elementwise_dispatch.h's visit_* and rowwise_dispatch.h's dispatch_* build their type sets on.
#pragma once

#include <cstdint>

#include "base/dtype.h"
#include "base/half.h"

namespace ampc::kernels::shared {

template <typename T>
struct TypeTag {
  using type = T;
};

// One type a dispatch accepts: its DType code and its C++ type.
template <DType kCode, typename T>
struct TypeEntry {
  static constexpr DType code = kCode;
  using type = T;
};

// The entries of the types the kernels dispatch on.
using F32Entry = TypeEntry<DType::kFloat32, float>;
using F64Entry = TypeEntry<DType::kFloat64, double>;
using F16Entry = TypeEntry<DType::kFloat16, Half>;
using BF16Entry = TypeEntry<DType::kBFloat16, BFloat16>;
using I32Entry = TypeEntry<DType::kInt32, int32_t>;
using I64Entry = TypeEntry<DType::kInt64, int64_t>;
using BoolEntry = TypeEntry<DType::kBool, bool>;

// f(TypeTag<T>) for the TypeEntry whose code is t; false (f not called) when none is.
template <typename... Entries, typename F>
bool visit_listed(DType t, F&& f) {
  return ((t == Entries::code && (f(TypeTag<typename Entries::type>{}), true)) || ...);
}

}  // namespace ampc::kernels::shared
