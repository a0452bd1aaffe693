// The generic row-wise ops (kernels/shared/row_ops.h's list), each registered under its ONNX
// name: the rows its typed parameters give (runtime/plan/step_params.h), computed by the CUDA
// kernel's host side (kernels/twin/row_op.h), so the CPU op's bits are the GPU kernel's.
#include "kernels/twin/row_op.h"
#include "runtime/cpu/op_registry.h"
#include "runtime/cpu/ops/nn_util.h"
#include "runtime/plan/row_op_params.h"
#include "runtime/plan/step_params.h"

namespace ampc::rt::cpu::nn {
namespace {

void run_row_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  if (!is_float(x.dtype())) ctx.unsupported_dtype(0);
  const plan::RowwiseParams& p = plan::params<plan::RowwiseParams>(ctx.step());
  const std::optional<kernels::shared::RowOp> op = plan::row_op_of(p.kind());
  if (!op) ctx.fail("internal: the step's row-wise kind is not a generic row op");
  const plan::RowShape s = plan::row_shape(p, x.shape());
  Tensor& y = ctx.output(0, x.dtype(), x.shape());
  if (y.numel() == 0) return;
  kernels::twin::row_op(*op, x.dtype(), x.raw(), y.raw(), s.outer, s.n, s.inner, plan::row_args(p));
}

}  // namespace

void register_row_ops(OpRegistry& r) {
#define AMPC_ROW_OP_REGISTER(NAME, SPEC) r.add(kernels::shared::SPEC::kOp, run_row_op);
  AMPC_ROW_OPS(AMPC_ROW_OP_REGISTER)
#undef AMPC_ROW_OP_REGISTER
}

}  // namespace ampc::rt::cpu::nn
