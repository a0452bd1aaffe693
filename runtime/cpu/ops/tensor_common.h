// Helpers shared by the tensor (shape, layout, indexing) operator files: reading shape-like
// inputs, axis normalisation, and data movement that works for every element type (fixed
// width elements are moved as raw bits; strings as std::string).
#pragma once

#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/elementwise_types.h"
#include "kernels/cpu/indexing.h"
#include "runtime/cpu/op_context.h"
#include "runtime/cpu/op_registry.h"

namespace ampc::rt::cpu {

namespace kc = ampc::kernels::cpu;
using Shape = std::vector<int64_t>;

// The registration functions of the tensor files; register_tensor_ops calls them.
void register_tensor_shape(OpRegistry& r);     // tensor_shape.cc: Reshape, Shape, Range...
void register_tensor_layout(OpRegistry& r);    // tensor_layout.cc: Transpose, Slice, Pad...
void register_tensor_indexing(OpRegistry& r);  // tensor_indexing.cc: Gather*, Scatter*...
void register_tensor_sorting(OpRegistry& r);   // tensor_sorting.cc: TopK, CumSum, Unique...
void register_tensor_einsum(OpRegistry& r);    // tensor_einsum.cc: Einsum

// int_values and normalize_axis: runtime/cpu/op_context.h.

// Calls f(Tag<U>{}) with U the storage type that moves elements of `t`: an unsigned integer of
// the element's width, or std::string.
template <typename F>
void visit_storage(DType t, F&& f) {
  switch (t == DType::kString ? 0 : dtype_size(t)) {
    case 0:
      return f(kc::Tag<std::string>{});
    case 1:
      return f(kc::Tag<uint8_t>{});
    case 2:
      return f(kc::Tag<uint16_t>{});
    case 4:
      return f(kc::Tag<uint32_t>{});
    case 8:
      return f(kc::Tag<uint64_t>{});
    default:
      throw Error("internal: element type " + std::string(dtype_name(t)) + " cannot be moved");
  }
}

template <typename U>
U* storage(Tensor& t) {
  if constexpr (std::is_same_v<U, std::string>) {
    return t.strings().data();
  } else {
    return reinterpret_cast<U*>(t.raw());
  }
}
template <typename U>
const U* storage(const Tensor& t) {
  if constexpr (std::is_same_v<U, std::string>) {
    return t.strings().data();
  } else {
    return reinterpret_cast<const U*>(t.raw());
  }
}

// dst[dst_offset + i . dst_strides] = src[src_offset + i . src_strides] for i over `shape`;
// src and dst have the same element type.
void copy_strided(const Tensor& src, int64_t src_offset, const Shape& src_strides, Tensor& dst,
                  int64_t dst_offset, const Shape& dst_strides, const Shape& shape);

// out = src viewed with `view_shape` (same element count), dimensions permuted by `perm`.
Tensor transpose_view(const Tensor& src, const Shape& view_shape, const std::vector<int64_t>& perm);
// The same into `out`, of the transposed shape (transposed_shape) and src's type.
Shape transposed_shape(const Shape& view_shape, const std::vector<int64_t>& perm);
void transpose_into(const Tensor& src, const Shape& view_shape, const std::vector<int64_t>& perm,
                    Tensor& out);

}  // namespace ampc::rt::cpu
