// CPU twin of kernels/cuda/elementwise.cu: the same broadcast layouts (index_math.h) and
// per-element functions (elementwise_int.h), sequentially.
#include "kernels/twin/elementwise.h"

#include <string>

#include "kernels/shared/elementwise_dispatch.h"
#include "kernels/shared/elementwise_int.h"
#include "kernels/shared/elementwise_layout.h"
#include "kernels/shared/index_math.h"
#include "kernels/twin/index_loop.h"

namespace ampc::kernels::twin {

namespace sh = ampc::kernels::shared;
namespace dm = ampc::kernels::shared::dm;
namespace ew = ampc::kernels::shared::ew;

namespace {

template <int32_t kOp, typename V>
void run_binary(const dm::Layout<3>& l, const void* a, const void* b, void* out) {
  using R = ew::ResultType<kOp, V>;
  const V* x = static_cast<const V*>(a);
  const V* y = static_cast<const V*>(b);
  R* z = static_cast<R*>(out);
  for_each_layout_offset(
      l, [&](const int64_t(&off)[3]) { z[off[2]] = ew::apply<kOp>(x[off[0]], y[off[1]]); });
}

}  // namespace

void binary(BinaryOp op, DType dtype, const void* a, const std::vector<int64_t>& a_shape,
            const void* b, const std::vector<int64_t>& b_shape, void* out,
            const std::vector<int64_t>& out_shape) {
  const dm::Layout<3> l = ew::binary_layout(a_shape, b_shape, out_shape);
  if (l.numel == 0) {
    ew::visit_binary(static_cast<int32_t>(op), dtype, [](auto, auto) {});
    return;
  }
  ew::visit_binary(static_cast<int32_t>(op), dtype, [&](auto op_tag, auto type_tag) {
    run_binary<decltype(op_tag)::value, typename decltype(type_tag)::type>(l, a, b, out);
  });
}

void where(DType dtype, const bool* cond, const std::vector<int64_t>& cond_shape, const void* x,
           const std::vector<int64_t>& x_shape, const void* y, const std::vector<int64_t>& y_shape,
           void* out, const std::vector<int64_t>& out_shape) {
  const dm::Layout<4> l = ew::where_layout(cond_shape, x_shape, y_shape, out_shape);
  sh::visit_bits(dtype, "where", [&](auto tag) {
    using U = typename decltype(tag)::type;
    const U* xs = static_cast<const U*>(x);
    const U* ys = static_cast<const U*>(y);
    U* zs = static_cast<U*>(out);
    for_each_layout_offset(
        l, [&](const int64_t(&off)[4]) { zs[off[3]] = cond[off[0]] ? xs[off[1]] : ys[off[2]]; });
  });
}

void logical_not(const bool* in, bool* out, int64_t numel) {
  for (int64_t i = 0; i < numel; ++i) out[i] = !in[i];
}

void cast(DType from, DType to, const void* in, void* out, int64_t numel) {
  ew::visit_cast(from, to, [&](auto from_tag, auto to_tag) {
    using F = typename decltype(from_tag)::type;
    using T = typename decltype(to_tag)::type;
    const F* x = static_cast<const F*>(in);
    T* y = static_cast<T*>(out);
    for (int64_t i = 0; i < numel; ++i) y[i] = ew::cast_value<T>(x[i]);
  });
}

}  // namespace ampc::kernels::twin
