// A tensor the runtime owns: element type, shape and contiguous row-major storage.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/error.h"
#include "base/half.h"

namespace ampc::rt {

// C++ element type <-> DType.
template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::kFloat32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::kFloat64;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::kInt64;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::kInt32;
}
template <>
constexpr DType dtype_of<int16_t>() {
  return DType::kInt16;
}
template <>
constexpr DType dtype_of<int8_t>() {
  return DType::kInt8;
}
template <>
constexpr DType dtype_of<uint64_t>() {
  return DType::kUInt64;
}
template <>
constexpr DType dtype_of<uint32_t>() {
  return DType::kUInt32;
}
template <>
constexpr DType dtype_of<uint16_t>() {
  return DType::kUInt16;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::kUInt8;
}
template <>
constexpr DType dtype_of<bool>() {
  return DType::kBool;
}
template <>
constexpr DType dtype_of<Half>() {
  return DType::kFloat16;
}
template <>
constexpr DType dtype_of<BFloat16>() {
  return DType::kBFloat16;
}

int64_t numel_of(const std::vector<int64_t>& shape);
std::string shape_str(const std::vector<int64_t>& shape);  // "[2,3]"

class Tensor {
 public:
  Tensor() = default;
  // Zero-filled storage (empty strings for kString).
  Tensor(DType dtype, std::vector<int64_t> shape);
  // A tensor over memory it does not own (not kString), e.g. a caller's input batch read
  // where it lies. The caller keeps the memory alive and unchanged while this tensor or any
  // copy of it is in use: copies share the memory (owned_copy() does not).
  static Tensor borrowed(DType dtype, std::vector<int64_t> shape, void* data);
  bool is_borrowed() const { return external_ != nullptr; }
  // A copy with storage of its own (a plain copy of a borrowed tensor shares the memory).
  Tensor owned_copy() const;

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_.at(static_cast<size_t>(i)); }
  int64_t numel() const { return numel_of(shape_); }
  size_t nbytes() const { return external_ ? external_bytes_ : bytes_.size(); }
  bool defined() const { return dtype_ != DType::kUndefined; }

  void* raw() { return external_ ? external_ : bytes_.data(); }
  const void* raw() const { return external_ ? external_ : bytes_.data(); }
  std::vector<std::string>& strings() { return strings_; }
  const std::vector<std::string>& strings() const { return strings_; }

  template <typename T>
  T* data() {
    check<T>();
    return reinterpret_cast<T*>(raw());
  }
  template <typename T>
  const T* data() const {
    check<T>();
    return reinterpret_cast<const T*>(raw());
  }

  // Same data, another shape of equal element count.
  void reshape(std::vector<int64_t> shape);
  std::string type_str() const;  // "f32[2,3]"

 private:
  template <typename T>
  void check() const {
    if (dtype_of<T>() != dtype_) {
      throw Error("internal: tensor of type " + std::string(dtype_name(dtype_)) + " read as " +
                  std::string(dtype_name(dtype_of<T>())));
    }
  }

  DType dtype_ = DType::kUndefined;
  std::vector<int64_t> shape_;
  std::vector<uint8_t> bytes_;
  std::vector<std::string> strings_;
  void* external_ = nullptr;  // borrowed storage (bytes_ is then empty)
  size_t external_bytes_ = 0;
};

}  // namespace ampc::rt
