// The generic row-wise ops (kernels/shared/row_ops.h's list), each registered under its ONNX
// name: the rows its typed parameters give (runtime/plan/step_params.h), computed by the CUDA
// kernel's host side (kernels/twin/row_op.h), so the CPU op's bits are the GPU kernel's. An op's
// per-channel operands are its inputs 1.., one value per channel (x's dimension 1).
#include <optional>
#include <vector>

#include "kernels/twin/row_op.h"
#include "runtime/cpu/op_registry.h"
#include "runtime/cpu/ops/nn_util.h"
#include "runtime/plan/row_op_params.h"
#include "runtime/plan/step_params.h"

namespace ampc::rt::cpu::nn {
namespace {

namespace sh = kernels::shared;

// The element type the twin reads the operands in: f64 with an f64 x; else theirs when they
// share one 16- or 32-bit type, f32 otherwise (a value converted exactly or rounded once, as
// run_widened would).
DType operand_type(DType x, const std::vector<const Tensor*>& operands) {
  if (x == DType::kFloat64) return DType::kFloat64;
  const DType first = operands.front()->dtype();
  for (const Tensor* t : operands) {
    if (t->dtype() != first || first == DType::kFloat64) return DType::kFloat32;
  }
  return first;
}

template <typename Spec>
sh::RowOperands row_operands(const OpContext& ctx, std::vector<Tensor>& converted) {
  sh::RowOperands ops;
  if constexpr (Spec::kRowOperands > 0) {
    const Tensor& x = ctx.in(0);
    if (x.rank() < 2) ctx.fail("input " + x.type_str() + " has no channel dimension");
    ops.channels = x.dim(1);
    std::vector<const Tensor*> inputs;
    for (int k = 0; k < Spec::kRowOperands; ++k) {
      const Tensor& t = ctx.in(1 + k);
      if (!is_float(t.dtype())) ctx.unsupported_dtype(1 + k);
      if (t.numel() != ops.channels) {
        ctx.fail("input " + std::to_string(1 + k) + " " + t.type_str() + " does not have " +
                 std::to_string(ops.channels) + " elements (one per channel)");
      }
      inputs.push_back(&t);
    }
    ops.dtype = operand_type(x.dtype(), inputs);
    converted.reserve(inputs.size());
    for (int k = 0; k < Spec::kRowOperands; ++k) {
      const Tensor& t = *inputs[k];
      if (t.dtype() == ops.dtype) {
        ops.data[k] = t.raw();
      } else {
        converted.push_back(convert_float(t, ops.dtype));
        ops.data[k] = converted.back().raw();
      }
    }
  }
  return ops;
}

template <typename Spec>
void run_row_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  if (!is_float(x.dtype())) ctx.unsupported_dtype(0);
  const plan::RowwiseParams& p = plan::params<plan::RowwiseParams>(ctx.step());
  const std::optional<sh::RowOp> op = plan::row_op_of(p.kind());
  if (!op) ctx.fail("internal: the step's row-wise kind is not a generic row op");
  const plan::RowShape s = plan::row_shape(p, x.shape());
  std::vector<Tensor> converted;
  const sh::RowOperands operands = row_operands<Spec>(ctx, converted);
  Tensor& y = ctx.output(0, x.dtype(), x.shape());
  if (y.numel() == 0) return;
  kernels::twin::row_op(*op, x.dtype(), x.raw(), y.raw(), s.outer, s.n, s.inner, plan::row_args(p),
                        operands);
}

}  // namespace

void register_row_ops(OpRegistry& r) {
#define AMPC_ROW_OP_REGISTER(NAME, SPEC) r.add(sh::SPEC::kOp, run_row_op<sh::SPEC>);
  AMPC_ROW_OPS(AMPC_ROW_OP_REGISTER)
#undef AMPC_ROW_OP_REGISTER
}

}  // namespace ampc::rt::cpu::nn
