// Integer / bool elementwise ops with broadcasting, Where, Not and Cast (elementwise.h): one
// grid-stride kernel per op and type over the merged broadcast layout (index_math.h), the
// per-element math from elementwise_int.h.
#include <cstdint>

#include "kernels/cuda/data_launch.cuh"
#include "kernels/cuda/elementwise.h"
#include "kernels/shared/elementwise_dispatch.h"
#include "kernels/shared/elementwise_int.h"
#include "kernels/shared/elementwise_layout.h"
#include "kernels/shared/index_math.h"

namespace ampc::kernels::cuda {

namespace sh = ampc::kernels::shared;
namespace dm = ampc::kernels::shared::dm;
namespace ew = ampc::kernels::shared::ew;
using detail::grid_for;
using detail::kThreads;

namespace {

template <int32_t kOp, typename V, typename I>
__global__ void binary_kernel(dm::Layout<3> l, const V* __restrict__ a, const V* __restrict__ b,
                              ew::ResultType<kOp, V>* __restrict__ out) {
  AMPC_GRID_STRIDE(I, i, l.numel) {
    int64_t off[3];
    dm::layout_offsets(l, i, off);
    out[off[2]] = ew::apply<kOp>(a[off[0]], b[off[1]]);
  }
}

template <typename U, typename I>
__global__ void where_kernel(dm::Layout<4> l, const bool* __restrict__ cond,
                             const U* __restrict__ x, const U* __restrict__ y,
                             U* __restrict__ out) {
  AMPC_GRID_STRIDE(I, i, l.numel) {
    int64_t off[4];
    dm::layout_offsets(l, i, off);
    out[off[3]] = cond[off[0]] ? x[off[1]] : y[off[2]];
  }
}

__global__ void not_kernel(const bool* __restrict__ in, bool* __restrict__ out, int64_t n) {
  AMPC_GRID_STRIDE(int64_t, i, n) out[i] = !in[i];
}

template <typename From, typename To>
__global__ void cast_kernel(const From* __restrict__ in, To* __restrict__ out, int64_t n) {
  AMPC_GRID_STRIDE(int64_t, i, n) out[i] = ew::cast_value<To>(in[i]);
}

bool small(int64_t numel) {
  return numel < (int64_t(1) << 31);
}

}  // namespace

void binary(BinaryOp op, DType dtype, const void* a, const std::vector<int64_t>& a_shape,
            const void* b, const std::vector<int64_t>& b_shape, void* out,
            const std::vector<int64_t>& out_shape, cudaStream_t stream) {
  const dm::Layout<3> l = ew::binary_layout(a_shape, b_shape, out_shape);
  ew::visit_binary(static_cast<int32_t>(op), dtype, [&](auto op_tag, auto type_tag) {
    constexpr int32_t kOp = decltype(op_tag)::value;
    using V = typename decltype(type_tag)::type;
    using R = ew::ResultType<kOp, V>;
    if (l.numel == 0) return;
    const V* x = static_cast<const V*>(a);
    const V* y = static_cast<const V*>(b);
    R* z = static_cast<R*>(out);
    if (small(l.numel)) {
      binary_kernel<kOp, V, uint32_t><<<grid_for(l.numel), kThreads, 0, stream>>>(l, x, y, z);
    } else {
      binary_kernel<kOp, V, int64_t><<<grid_for(l.numel), kThreads, 0, stream>>>(l, x, y, z);
    }
    detail::check_launch("binary");
  });
}

void where(DType dtype, const bool* cond, const std::vector<int64_t>& cond_shape, const void* x,
           const std::vector<int64_t>& x_shape, const void* y, const std::vector<int64_t>& y_shape,
           void* out, const std::vector<int64_t>& out_shape, cudaStream_t stream) {
  const dm::Layout<4> l = ew::where_layout(cond_shape, x_shape, y_shape, out_shape);
  sh::visit_bits(dtype, "where", [&](auto tag) {
    using U = typename decltype(tag)::type;
    if (l.numel == 0) return;
    const U* xs = static_cast<const U*>(x);
    const U* ys = static_cast<const U*>(y);
    U* zs = static_cast<U*>(out);
    if (small(l.numel)) {
      where_kernel<U, uint32_t><<<grid_for(l.numel), kThreads, 0, stream>>>(l, cond, xs, ys, zs);
    } else {
      where_kernel<U, int64_t><<<grid_for(l.numel), kThreads, 0, stream>>>(l, cond, xs, ys, zs);
    }
    detail::check_launch("where");
  });
}

void logical_not(const bool* in, bool* out, int64_t numel, cudaStream_t stream) {
  if (numel <= 0) return;
  not_kernel<<<grid_for(numel), kThreads, 0, stream>>>(in, out, numel);
  detail::check_launch("logical_not");
}

void cast(DType from, DType to, const void* in, void* out, int64_t numel, cudaStream_t stream) {
  ew::visit_cast(from, to, [&](auto from_tag, auto to_tag) {
    using F = typename decltype(from_tag)::type;
    using T = typename decltype(to_tag)::type;
    if (numel <= 0) return;
    cast_kernel<F, T><<<grid_for(numel), kThreads, 0, stream>>>(static_cast<const F*>(in),
                                                                static_cast<T*>(out), numel);
    detail::check_launch("cast");
  });
}

}  // namespace ampc::kernels::cuda
