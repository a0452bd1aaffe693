#include "runtime/tensor.h"

#include <cstring>

#include "base/checked_size.h"

namespace ampc::rt {

int64_t numel_of(const std::vector<int64_t>& shape) {
  const auto n = checked_numel(shape);
  if (!n) {
    throw Error("shape " + shape_str(shape) +
                " has a negative dimension or more elements than 64 bits count");
  }
  return *n;
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
  // Checked: a shape from a file must not wrap around into a small allocation.
  const int64_t bytes = checked_tensor_bytes(
      shape_, dtype_ == DType::kString ? sizeof(std::string) : dtype_size(dtype_), "tensor");
  if (dtype_ == DType::kString) {
    strings_.resize(static_cast<size_t>(numel()));
  } else {
    bytes_.assign(static_cast<size_t>(bytes), 0);
  }
}

Tensor Tensor::borrowed(DType dtype, std::vector<int64_t> shape, void* data) {
  if (dtype == DType::kString || dtype == DType::kUndefined)
    throw Error("internal: a " + std::string(dtype_name(dtype)) + " tensor cannot borrow memory");
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.external_bytes_ =
      static_cast<size_t>(checked_tensor_bytes(t.shape_, dtype_size(dtype), "tensor"));
  if (data == nullptr && t.external_bytes_ > 0)
    throw Error("internal: a borrowed tensor of " + t.type_str() + " without memory");
  // An empty tensor borrows nothing: it owns its (empty) storage.
  if (t.external_bytes_ > 0) t.external_ = data;
  return t;
}

Tensor Tensor::owned_copy() const {
  if (!external_) return *this;
  Tensor t(dtype_, shape_);
  std::memcpy(t.raw(), external_, external_bytes_);
  return t;
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
