// Elements of a test's float tensors, float32 and 16-bit alike: a float rounded to T once, and T
// back to float exactly.
#pragma once

#include <type_traits>

#include "base/half.h"

namespace ampc::test {

template <typename T>
T from_float(float v) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    return float_to_bf16(v);
  } else if constexpr (std::is_same_v<T, Half>) {
    return float_to_half(v);
  } else {
    return static_cast<T>(v);
  }
}

template <typename T>
float to_float(T v) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    return bf16_to_float(v);
  } else if constexpr (std::is_same_v<T, Half>) {
    return half_to_float(v);
  } else {
    return static_cast<float>(v);
  }
}

}  // namespace ampc::test
