// The reduction family: Reduce*, ArgMax/ArgMin here; softmax-like ops and the losses in
// reduction_softmax.cc and reduction_loss.cc. Reduce ops on float data (f32, f64, f16, bf16)
// run the CUDA kernels' CPU twin (kernels/twin/reduce.h), so that both backends reduce in the
// same order and agree bit for bit; integer data and ReduceLogSumExp run kernels/cpu/reduce.h.
#include <algorithm>
#include <memory>

#include "kernels/cpu/reduce.h"
#include "kernels/twin/reduce.h"
#include "runtime/cpu/op_registry.h"
#include "runtime/cpu/ops/families.h"
#include "runtime/cpu/ops/nn_util.h"
#include "runtime/plan/step_params.h"

namespace ampc::rt::cpu {
namespace nn {
namespace {

namespace k = kernels::cpu;

namespace tw = kernels::twin;

// The twin's name of a reduction (every kind but kLogSumExp, which the twin does not have).
constexpr tw::ReduceOp twin_op(k::ReduceKind kind) {
  switch (kind) {
    case k::ReduceKind::kSum:
      return tw::ReduceOp::kSum;
    case k::ReduceKind::kMean:
      return tw::ReduceOp::kMean;
    case k::ReduceKind::kProd:
      return tw::ReduceOp::kProd;
    case k::ReduceKind::kMax:
      return tw::ReduceOp::kMax;
    case k::ReduceKind::kMin:
      return tw::ReduceOp::kMin;
    case k::ReduceKind::kL1:
      return tw::ReduceOp::kL1;
    case k::ReduceKind::kL2:
      return tw::ReduceOp::kL2;
    case k::ReduceKind::kLogSum:
      return tw::ReduceOp::kLogSum;
    default:
      return tw::ReduceOp::kSumSquare;
  }
}

// The axes a Reduce op reduces (flags over x's axes) and its output shape, from its typed
// parameters (and input 1's values when the axes come at run time); false for a no-op (the
// output is x).
bool reduced_axes(const OpContext& ctx, std::vector<bool>* reduced, std::vector<int64_t>* shape) {
  const plan::ReduceParams& p = plan::params<plan::ReduceParams>(ctx.step());
  const std::vector<int64_t> axes_input =
      p.runtime_axes() && ctx.input(1) ? int_values(ctx, 1) : std::vector<int64_t>{};
  const auto flags = plan::reduced_axes(p, ctx.in(0).rank(), axes_input);
  if (!flags) return false;
  *reduced = *flags;
  *shape = plan::reduced_dims(p, *reduced, ctx.in(0).shape());
  return true;
}

// Integer data and ReduceLogSumExp: kernels/cpu/reduce.h.
template <k::ReduceKind kind, typename T>
void reduce(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  std::vector<bool> reduced;
  std::vector<int64_t> shape;
  if (!reduced_axes(ctx, &reduced, &shape)) return ctx.set_output(0, x);
  Tensor& y = ctx.output(0, x.dtype(), shape);
  if (y.numel() == 0) return;
  k::reduce(kind, x.data<T>(), x.shape(), reduced, y.data<T>());
}

template <k::ReduceKind kind>
void cpu_reduce_op(OpContext& ctx) {
  auto run = [&](auto tag) { reduce<kind, decltype(tag)>(ctx); };
  if (!dispatch<float, double, int32_t, int64_t, uint32_t, uint64_t, int8_t, uint8_t>(
          ctx.in(0).dtype(), run)) {
    ctx.unsupported_dtype(0);
  }
}

// Float data: the twin, in x's own dtype (16-bit data accumulates in fp32 and rounds once, as
// widening would). Size-1 axes are dropped first (the twin ignores them too), which keeps
// the rank within the twin's 8 for any shape with few enough groups of axes.
void twin_reduce(OpContext& ctx, tw::ReduceOp op) {
  const Tensor& x = ctx.in(0);
  std::vector<bool> reduced;
  std::vector<int64_t> shape;
  if (!reduced_axes(ctx, &reduced, &shape)) return ctx.set_output(0, x);
  Tensor& y = ctx.output(0, x.dtype(), shape);
  if (y.numel() == 0) return;
  std::vector<int64_t> dims;
  std::unique_ptr<bool[]> flags(new bool[reduced.size() + 1]);
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (x.dim(i) == 1) continue;
    flags[dims.size()] = reduced[i];
    dims.push_back(x.dim(i));
  }
  const int rank = static_cast<int>(dims.size());
  const size_t bytes = tw::reduce_workspace_bytes(op, x.dtype(), rank, dims.data(), flags.get());
  std::vector<double> workspace((bytes + sizeof(double) - 1) / sizeof(double));
  tw::reduce(op, x.dtype(), x.raw(), y.raw(), rank, dims.data(), flags.get(), workspace.data());
}

template <k::ReduceKind kind>
void reduce_op(OpContext& ctx) {
  if constexpr (kind != k::ReduceKind::kLogSumExp) {
    if (is_float(ctx.in(0).dtype())) return twin_reduce(ctx, twin_op(kind));
  }
  run_widened(ctx, cpu_reduce_op<kind>);
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
  // Not behind run_widened: reduce_op widens only what kernels/cpu runs.
  r.add("ReduceSum", reduce_op<K::kSum>);
  r.add("ReduceMean", reduce_op<K::kMean>);
  r.add("ReduceProd", reduce_op<K::kProd>);
  r.add("ReduceMax", reduce_op<K::kMax>);
  r.add("ReduceMin", reduce_op<K::kMin>);
  r.add("ReduceL1", reduce_op<K::kL1>);
  r.add("ReduceL2", reduce_op<K::kL2>);
  r.add("ReduceLogSum", reduce_op<K::kLogSum>);
  r.add("ReduceLogSumExp", reduce_op<K::kLogSumExp>);
  r.add("ReduceSumSquare", reduce_op<K::kSumSquare>);
  add_widened(r, "ArgMax", arg_reduce_op<true>);
  add_widened(r, "ArgMin", arg_reduce_op<false>);
  nn::register_softmax_ops(r);
  nn::register_row_ops(r);
  nn::register_loss_ops(r);
}

}  // namespace ampc::rt::cpu
