// A library's code for an element type (cudaDataType_t, cudnnDataType_t, ncclDataType_t, MPI's
// datatype and sum): each caller lists the types its library call supports, and looks the DType
// up there.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "base/dtype.h"
#include "base/error.h"

namespace ampc::rt {

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

// The code of `t` in `table` for a library call made by `what` ("the CUDA backend's GEMM");
// throws "<label>: element type <t> is not supported by <what> (<supported> are)" when the
// table does not list it.
template <typename Code, size_t N>
Code library_dtype_code(const DTypeCode<Code> (&table)[N], DType t, const std::string& label,
                        const char* what, const char* supported) {
  if (const std::optional<Code> code = find_dtype_code(table, t)) return *code;
  throw Error(label + ": element type " + std::string(dtype_name(t)) + " is not supported by " +
              what + " (" + supported + " are)");
}

}  // namespace ampc::rt
