// The tensor operator family (shape, layout, indexing); each group lives in its own
// tensor_*.cc file. Also the helpers of tensor_common.h.
#include "runtime/cpu/op_registry.h"
#include "runtime/cpu/ops/families.h"
#include "runtime/cpu/ops/tensor_common.h"

namespace ampc::rt::cpu {

void copy_strided(const Tensor& src, int64_t src_offset, const Shape& src_strides, Tensor& dst,
                  int64_t dst_offset, const Shape& dst_strides, const Shape& shape) {
  visit_storage(src.dtype(), [&](auto tag) {
    using U = typename decltype(tag)::type;
    kc::strided_copy<U>(shape, storage<U>(src) + src_offset, src_strides,
                        storage<U>(dst) + dst_offset, dst_strides);
  });
}

Shape transposed_shape(const Shape& view_shape, const std::vector<int64_t>& perm) {
  Shape out_shape;
  for (int64_t p : perm) out_shape.push_back(view_shape[p]);
  return out_shape;
}

void transpose_into(const Tensor& src, const Shape& view_shape, const std::vector<int64_t>& perm,
                    Tensor& out) {
  const Shape in_strides = kc::contiguous_strides(view_shape);
  Shape strides;
  for (int64_t p : perm) strides.push_back(in_strides[p]);
  copy_strided(src, 0, strides, out, 0, kc::contiguous_strides(out.shape()), out.shape());
}

Tensor transpose_view(const Tensor& src, const Shape& view_shape,
                      const std::vector<int64_t>& perm) {
  Tensor out(src.dtype(), transposed_shape(view_shape, perm));
  transpose_into(src, view_shape, perm, out);
  return out;
}

void register_tensor_ops(OpRegistry& r) {
  register_tensor_shape(r);
  register_tensor_layout(r);
  register_tensor_indexing(r);
  register_tensor_sorting(r);
  register_tensor_einsum(r);
}

}  // namespace ampc::rt::cpu
