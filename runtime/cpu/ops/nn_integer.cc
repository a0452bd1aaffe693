// MatMulInteger and ConvInteger: 8-bit operands minus their zero points, int32 results.
// The products run in double: every partial sum of 8-bit products is an integer far below
// 2^53, so the result is exact.
#include "runtime/cpu/op_registry.h"
#include "runtime/cpu/ops/nn_util.h"

namespace ampc::rt::cpu::nn {
namespace {

// t - zero_point as doubles. The zero point is a scalar, or one value per index of `axis`
// (per-row / per-column / per-channel quantisation).
Tensor minus_zero_point(const OpContext& ctx, int input, int zp_input, int64_t axis) {
  const Tensor& t = ctx.in(input);
  const Tensor* zp = ctx.input(zp_input);
  if (zp && zp->dtype() != t.dtype()) ctx.unsupported_dtype(zp_input);
  Tensor out(DType::kFloat64, t.shape());
  auto fill = [&](auto tag) {
    using T = decltype(tag);
    const T* src = t.data<T>();
    const T* z = zp ? zp->data<T>() : nullptr;
    const int64_t nz = zp ? zp->numel() : 0;
    const int64_t extent = axis >= 0 && axis < t.rank() ? t.dim(axis) : 1;
    const int64_t inner = axis >= 0 ? product(t.shape(), axis + 1, t.shape().size()) : 1;
    if (nz > 1 && nz != extent) {
      ctx.fail("zero point " + zp->type_str() + " does not match " + t.type_str());
    }
    double* dst = out.data<double>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      const double zv = nz == 0 ? 0.0 : nz == 1 ? z[0] : z[(i / inner) % extent];
      dst[i] = static_cast<double>(src[i]) - zv;
    }
  };
  if (!dispatch<int8_t, uint8_t>(t.dtype(), fill)) ctx.unsupported_dtype(input);
  return out;
}

Tensor to_int32(const Tensor& t) {
  Tensor out(DType::kInt32, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) {
    out.data<int32_t>()[i] = static_cast<int32_t>(t.data<double>()[i]);
  }
  return out;
}

void matmul_integer(OpContext& ctx) {
  const int64_t ra = ctx.in(0).rank(), rb = ctx.in(1).rank();
  const Tensor a = minus_zero_point(ctx, 0, 2, ra >= 2 ? ra - 2 : -1);  // per row of A
  const Tensor b = minus_zero_point(ctx, 1, 3, rb - 1);                 // per column of B
  ctx.set_output(0, to_int32(matmul_of<double>(ctx, a, b)));
}

void conv_integer(OpContext& ctx) {
  const Tensor x = minus_zero_point(ctx, 0, 2, -1);
  const Tensor w = minus_zero_point(ctx, 1, 3, 0);  // per output channel
  ctx.set_output(0, to_int32(conv_of<double>(ctx, x, w, nullptr)));
}

}  // namespace

void register_integer_ops(OpRegistry& r) {
  r.add("MatMulInteger", matmul_integer);
  r.add("ConvInteger", conv_integer);
}

}  // namespace ampc::rt::cpu::nn
