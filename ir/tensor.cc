#include "ir/tensor.h"

#include "base/checked_size.h"
#include "base/error.h"

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

}  // namespace ampc::ir
