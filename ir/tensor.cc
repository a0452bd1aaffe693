#include "ir/tensor.h"

#include "base/checked_size.h"
#include "base/error.h"
#include "base/half.h"

namespace ampc::ir {

// The element count; -1 when a dimension is negative (dynamic). A count past int64 is an
// ampc::Error (the verifier refuses such values first, naming them).
int64_t shape_numel(const std::vector<int64_t>& dims) {
  for (int64_t d : dims) {
    if (d < 0) return -1;  // a dynamic dimension: unknown
  }
  const auto n = checked_numel(dims);
  if (!n) throw Error("a shape has more elements than 64 bits count");
  return *n;
}

int64_t Tensor::numel() const {
  return shape_numel(dims);
}

size_t Tensor::byte_size() const {
  if (dtype != DType::kString) return bytes.size();
  size_t total = 0;
  for (const auto& s : strings) total += s.size();
  return total;
}

std::optional<std::vector<int64_t>> int_values(const Tensor& t) {
  if (t.dtype != DType::kInt64 && t.dtype != DType::kInt32) return std::nullopt;
  std::vector<int64_t> out(static_cast<size_t>(t.numel()));
  for (size_t k = 0; k < out.size(); ++k) {
    out[k] = t.dtype == DType::kInt64 ? load_element<int64_t>(t.bytes.data(), k)
                                      : load_element<int32_t>(t.bytes.data(), k);
  }
  return out;
}

std::optional<double> float_scalar(const Tensor& t) {
  if (t.numel() != 1) return std::nullopt;
  switch (t.dtype) {
    case DType::kFloat32:
      return load_element<float>(t.bytes.data(), 0);
    case DType::kFloat64:
      return load_element<double>(t.bytes.data(), 0);
    case DType::kFloat16:
      return half_to_float(Half{load_element<uint16_t>(t.bytes.data(), 0)});
    case DType::kBFloat16:
      return bf16_to_float(BFloat16{load_element<uint16_t>(t.bytes.data(), 0)});
    default:
      return std::nullopt;
  }
}

}  // namespace ampc::ir
