// Helpers shared by the elementwise operator files: dtype dispatch that reports unsupported
// types through the context, and unary/binary/comparison operators over broadcast inputs.
#pragma once

#include <string>
#include <vector>

#include "kernels/cpu/elementwise.h"
#include "runtime/cpu/op_context.h"
#include "runtime/cpu/op_registry.h"

namespace ampc::rt::cpu {

namespace kc = ampc::kernels::cpu;

// The registration functions of the elementwise files; register_elementwise_ops calls them.
void register_elementwise_math(OpRegistry& r);      // elementwise_math.cc: unary math, activations
void register_elementwise_binary(OpRegistry& r);    // elementwise_binary.cc: arithmetic
void register_elementwise_compare(OpRegistry& r);   // elementwise_compare.cc: comparisons, logic
void register_elementwise_variadic(OpRegistry& r);  // elementwise_variadic.cc: Sum, Mean, Max, Min
void register_elementwise_quantize(OpRegistry& r);  // elementwise_quantize.cc: (De)QuantizeLinear
void register_elementwise_convert(OpRegistry& r);   // elementwise_convert.cc: Cast, Where, Clip...

// Calls f(Tag<T>{}) for the type of input i, or fails with the unsupported-dtype error.
template <unsigned Set, typename F>
void dispatch(const OpContext& ctx, int i, F&& f) {
  if (!kc::visit_dtype<Set>(ctx.in(i).dtype(), f)) ctx.unsupported_dtype(i);
}

// The numpy broadcast of `shapes`, or a failure naming them.
std::vector<int64_t> broadcast_or_fail(const OpContext& ctx, const std::vector<kc::Shape>& shapes);

// The shape input 1 of a binary operator broadcasts with: its own, except before opset 7 with
// broadcast=1 and an axis, where its dimensions line up with input 0's from that axis.
kc::Shape second_operand_shape(const OpContext& ctx);

// Fails unless inputs a and b have the same element type.
void require_same_dtype(const OpContext& ctx, int a, int b);

// A copy of `t` converted to `to` (Cast semantics; strings are refused).
Tensor cast_tensor(const OpContext& ctx, const Tensor& t, DType to);
// The same into `out` (its type is the target; its shape t's); out must not overlap t.
void cast_into(const OpContext& ctx, const Tensor& t, Tensor& out);

// y = f(x) elementwise; y has x's type and shape.
template <unsigned Set, typename F>
void unary_op(OpContext& ctx, F f) {
  const Tensor& x = ctx.in(0);
  dispatch<Set>(ctx, 0, [&](auto tag) {
    using T = typename decltype(tag)::type;
    Tensor& y = ctx.output_for_overwrite(0, x.dtype(), x.shape());
    kc::unary_map(x.data<T>(), y.data<T>(), x.numel(), f);
  });
}

// y = f(a, b) with broadcasting; a and b share a type in Set. The output has that type, or
// bool when OutBool (comparisons).
template <unsigned Set, bool OutBool = false, typename F>
void binary_op(OpContext& ctx, F f) {
  const Tensor& a = ctx.in(0);
  const Tensor& b = ctx.in(1);
  require_same_dtype(ctx, 0, 1);
  const kc::Shape b_shape = second_operand_shape(ctx);
  const auto shape = broadcast_or_fail(ctx, {a.shape(), b_shape});
  dispatch<Set>(ctx, 0, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Out = std::conditional_t<OutBool, bool, T>;
    Tensor& y = ctx.output_for_overwrite(0, OutBool ? DType::kBool : a.dtype(), shape);
    kc::binary_map(a.data<T>(), a.shape(), b.data<T>(), b_shape, y.data<Out>(), shape, f);
  });
}

// Registers `name` as binary_op<Set, OutBool> with f.
template <unsigned Set, bool OutBool = false, typename F>
void add_binary(OpRegistry& r, const char* name, F f) {
  r.add(name, [f](OpContext& ctx) { binary_op<Set, OutBool>(ctx, f); });
}

}  // namespace ampc::rt::cpu
