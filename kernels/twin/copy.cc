// CPU twin of kernels/cuda/copy.cu: the same layouts (index_math.h) walked sequentially.
#include "kernels/twin/copy.h"

#include <cstring>
#include <string>

#include "kernels/shared/elementwise_dispatch.h"
#include "kernels/shared/index_math.h"
#include "kernels/twin/index_loop.h"

namespace ampc::kernels::twin {

namespace sh = ampc::kernels::shared;
using sh::dm::Dims;

void strided_copy(DType dtype, const std::vector<int64_t>& shape, const void* src,
                  int64_t src_offset, const std::vector<int64_t>& src_strides, void* dst,
                  int64_t dst_offset, const std::vector<int64_t>& dst_strides) {
  sh::visit_bits(dtype, "strided_copy", [&](auto tag) {
    using U = typename decltype(tag)::type;
    const sh::dm::Layout<2> l =
        sh::dm::make_layout<2>(shape, {src_strides, dst_strides}, "strided_copy");
    const U* s = static_cast<const U*>(src) + src_offset;
    U* d = static_cast<U*>(dst) + dst_offset;
    for_each_layout_offset(l, [&](const int64_t(&off)[2]) { d[off[1]] = s[off[0]]; });
  });
}

void contiguous_copy(DType dtype, const void* src, void* dst, int64_t numel) {
  sh::visit_bits(dtype, "contiguous_copy", [&](auto tag) {
    using U = typename decltype(tag)::type;
    if (numel > 0) std::memcpy(dst, src, static_cast<size_t>(numel) * sizeof(U));
  });
}

void concat(DType dtype, const std::vector<const void*>& inputs,
            const std::vector<int64_t>& axis_sizes, int64_t outer, int64_t inner, void* out) {
  sh::dm::for_each_joined_part(
      "concat", "inputs", inputs.size(), axis_sizes, inner,
      [&](size_t k, int64_t row, int64_t offset, int64_t joined) {
        strided_copy(dtype, {outer, row}, inputs[k], 0, {row, 1}, out, offset, {joined, 1});
      });
}

void split(DType dtype, const void* in, int64_t outer, int64_t inner,
           const std::vector<int64_t>& axis_sizes, const std::vector<void*>& outputs) {
  sh::dm::for_each_joined_part(
      "split", "outputs", outputs.size(), axis_sizes, inner,
      [&](size_t k, int64_t row, int64_t offset, int64_t joined) {
        if (outputs[k])
          strided_copy(dtype, {outer, row}, in, offset, {joined, 1}, outputs[k], 0, {row, 1});
      });
}

}  // namespace ampc::kernels::twin
