// Constant tensor data held by the IR: initializers and tensor-valued attributes.
// Numeric data is kept as little-endian raw bytes whatever form the ONNX file used
// (raw_data, float_data, int32_data, ...), so two imports of equal data compare equal.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/dtype.h"

namespace ampc::ir {

struct Tensor {
  std::string name;
  DType dtype = DType::kUndefined;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;        // numeric types: numel * dtype_size bytes
  std::vector<std::string> strings;  // kString only
  std::string doc_string;

  int64_t numel() const;
  // Bytes the data takes in memory (strings: the sum of their lengths).
  size_t byte_size() const;
  bool operator==(const Tensor&) const = default;
};

int64_t shape_numel(const std::vector<int64_t>& dims);

}  // namespace ampc::ir
