// Constant tensor data held by the IR: initializers and tensor-valued attributes.
// Numeric data is kept as little-endian raw bytes whatever form the ONNX file used
// (raw_data, float_data, int32_data, ...), so two imports of equal data compare equal.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
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

// The values of an int32 or int64 tensor (a constant's axes, pads, k); nothing for another type.
std::optional<std::vector<int64_t>> int_values(const Tensor& t);

// The value of a one-element f32, f64, f16 or bf16 tensor (a constant exponent) as a double;
// nothing for another type or size.
std::optional<double> float_scalar(const Tensor& t);

// Element `k` of raw tensor bytes holding Ts (through memcpy: the bytes need no alignment).
template <typename T>
T load_element(const uint8_t* bytes, size_t k) {
  T v;
  std::memcpy(&v, bytes + sizeof(T) * k, sizeof(T));
  return v;
}

template <typename T>
void store_element(uint8_t* bytes, size_t k, T v) {
  std::memcpy(bytes + sizeof(T) * k, &v, sizeof(T));
}

// A tensor of `dtype` holding 64-bit `values` (int64 or double): copied as they are when
// `dtype` is `wide`, their own dtype, otherwise each cast to the 32-bit `Narrow` (int32,
// float), the only other dtype the callers write.
template <typename Narrow, typename Wide>
Tensor tensor_of(DType dtype, DType wide, std::vector<int64_t> dims,
                 const std::vector<Wide>& values) {
  static_assert(sizeof(Wide) == 8 && sizeof(Narrow) == 4);
  Tensor t;
  t.dtype = dtype;
  t.dims = std::move(dims);
  t.bytes.resize(values.size() * dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == wide)
      store_element(t.bytes.data(), i, values[i]);
    else
      store_element(t.bytes.data(), i, static_cast<Narrow>(values[i]));
  }
  return t;
}

}  // namespace ampc::ir
