#include "compiler/ir/tensor.h"

namespace ampc::ir {

int64_t shape_numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
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
