#include "runtime/tensor.h"

namespace ampc::rt {

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

Tensor::Tensor(DType dtype, std::vector<int64_t> shape) : dtype_(dtype), shape_(std::move(shape)) {
  for (int64_t d : shape_) {
    if (d < 0) throw Error("internal: negative dimension in tensor shape " + shape_str(shape_));
  }
  if (dtype_ == DType::kString) {
    strings_.resize(static_cast<size_t>(numel()));
  } else {
    bytes_.assign(static_cast<size_t>(numel()) * dtype_size(dtype_), 0);
  }
}

void Tensor::reshape(std::vector<int64_t> shape) {
  if (numel_of(shape) != numel()) {
    throw Error("internal: cannot reshape " + shape_str(shape_) + " to " + shape_str(shape));
  }
  shape_ = std::move(shape);
}

std::string Tensor::type_str() const {
  return std::string(dtype_name(dtype_)) + shape_str(shape_);
}

}  // namespace ampc::rt
