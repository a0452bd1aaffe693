// The reduction family: Reduce*, ArgMax/ArgMin here; softmax-like ops and the losses in
// reduction_softmax.cc and reduction_loss.cc.
#include <algorithm>

#include "kernels/cpu/reduce.h"
#include "runtime/cpu/op_registry.h"
#include "runtime/cpu/ops/families.h"
#include "runtime/cpu/ops/nn_util.h"

namespace ampc::rt::cpu {
namespace nn {
namespace {

namespace k = kernels::cpu;

template <k::ReduceKind kind, typename T>
void reduce(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const int64_t rank = x.rank();
  // Axes: an input from ReduceSum-13 (and every Reduce op from opset 18), else an attribute.
  const std::vector<int64_t> axes = ctx.input(1) ? int_values(ctx, 1) : ctx.attr_ints("axes");
  const bool keepdims = ctx.attr_int("keepdims", 1) != 0;
  if (axes.empty() && ctx.attr_int("noop_with_empty_axes", 0) != 0) {
    ctx.set_output(0, x);
    return;
  }
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes) reduced[normalize_axis(ctx, a, rank)] = true;
  std::vector<int64_t> shape;
  for (int64_t i = 0; i < rank; ++i) {
    if (!reduced[i]) {
      shape.push_back(x.dim(i));
    } else if (keepdims) {
      shape.push_back(1);
    }
  }
  Tensor& y = ctx.output(0, x.dtype(), shape);
  if (y.numel() == 0) return;
  k::reduce(kind, x.data<T>(), x.shape(), reduced, y.data<T>());
}

template <k::ReduceKind kind>
void reduce_op(OpContext& ctx) {
  auto run = [&](auto tag) { reduce<kind, decltype(tag)>(ctx); };
  if (!dispatch<float, double, int32_t, int64_t, uint32_t, uint64_t, int8_t, uint8_t>(
          ctx.in(0).dtype(), run)) {
    ctx.unsupported_dtype(0);
  }
}

template <bool is_max, typename T>
void arg_reduce(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const int64_t rank = x.rank();
  const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", 0), std::max<int64_t>(rank, 1));
  const bool keepdims = ctx.attr_int("keepdims", 1) != 0;
  std::vector<int64_t> shape = x.shape();
  if (rank > 0 && x.dim(axis) == 0) ctx.fail("cannot take the arg-extremum of an empty axis");
  if (keepdims) {
    if (rank > 0) shape[axis] = 1;
  } else if (rank > 0) {
    shape.erase(shape.begin() + axis);
  }
  Tensor& y = ctx.output(0, DType::kInt64, shape);
  if (y.numel() == 0) return;
  const int64_t n = rank > 0 ? x.dim(axis) : 1;
  k::arg_reduce(x.data<T>(), product(x.shape(), 0, axis), n,
                product(x.shape(), axis + 1, x.shape().size()), is_max,
                ctx.attr_int("select_last_index", 0) != 0, y.data<int64_t>());
}

template <bool is_max>
void arg_reduce_op(OpContext& ctx) {
  auto run = [&](auto tag) { arg_reduce<is_max, decltype(tag)>(ctx); };
  if (!dispatch<float, double, int8_t, uint8_t, int16_t, uint16_t, int32_t, int64_t, uint32_t,
                uint64_t>(ctx.in(0).dtype(), run)) {
    ctx.unsupported_dtype(0);
  }
}

}  // namespace
}  // namespace nn

void register_reduction_ops(OpRegistry& r) {
  using nn::add_widened, nn::reduce_op, nn::arg_reduce_op;
  using K = kernels::cpu::ReduceKind;
  add_widened(r, "ReduceSum", reduce_op<K::kSum>);
  add_widened(r, "ReduceMean", reduce_op<K::kMean>);
  add_widened(r, "ReduceProd", reduce_op<K::kProd>);
  add_widened(r, "ReduceMax", reduce_op<K::kMax>);
  add_widened(r, "ReduceMin", reduce_op<K::kMin>);
  add_widened(r, "ReduceL1", reduce_op<K::kL1>);
  add_widened(r, "ReduceL2", reduce_op<K::kL2>);
  add_widened(r, "ReduceLogSum", reduce_op<K::kLogSum>);
  add_widened(r, "ReduceLogSumExp", reduce_op<K::kLogSumExp>);
  add_widened(r, "ReduceSumSquare", reduce_op<K::kSumSquare>);
  add_widened(r, "ArgMax", arg_reduce_op<true>);
  add_widened(r, "ArgMin", arg_reduce_op<false>);
  nn::register_softmax_ops(r);
  nn::register_loss_ops(r);
}

}  // namespace ampc::rt::cpu
