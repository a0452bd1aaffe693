// A CUDA library's code for an element type (cudaDataType_t, cudnnDataType_t, ncclDataType_t):
// each caller lists the types its library call supports, and looks the DType up there.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "base/dtype.h"
#include "base/error.h"

namespace ampc::rt::cuda {

template <typename Code>
struct DTypeCode {
  DType dtype;
  Code code;
};

// The code of `t` in `table`; nullopt when the table does not list it (the caller says why).
template <typename Code, size_t N>
std::optional<Code> find_dtype_code(const DTypeCode<Code> (&table)[N], DType t) {
  for (const DTypeCode<Code>& e : table) {
    if (e.dtype == t) return e.code;
  }
  return std::nullopt;
}

// The code of `t` in `table` for a library call of the CUDA backend's `what` (GEMM,
// convolution); throws "<label>: element type <t> is not supported by the CUDA backend's <what>
// (<supported> are)" when the table does not list it.
template <typename Code, size_t N>
Code library_dtype_code(const DTypeCode<Code> (&table)[N], DType t, const std::string& label,
                        const char* what, const char* supported) {
  if (const std::optional<Code> code = find_dtype_code(table, t)) return *code;
  throw Error(label + ": element type " + std::string(dtype_name(t)) +
              " is not supported by the CUDA backend's " + what + " (" + supported + " are)");
}

}  // namespace ampc::rt::cuda
