// Gradients of the synchronised BatchNorm's "ampc" ops (ops/schemas/comm_schemas.h).
//
// AllReduceSum: every rank gets Y = sum_r X_r. With the loss J = (1/N) sum_r L_r and the
// parameter gradients averaged over the ranks afterwards (passes/data_parallel.h), rank r's
// local backward gives the right average when dX_r = sum_r' dY_r' (every rank's L depends on
// X_r through Y): the gradient of a sum over the ranks is the same sum.
// BatchStatistics passes the batch statistics on: their gradient passes back to them.
#include "ops/schemas/ampc_schemas.h"
#include "passes/autodiff/gradient_registry.h"

namespace ampc::passes::autodiff {
namespace {

using ops::kAmpcDomain;

void all_reduce_sum(GradContext& c) {
  if (!c.needs(0) || !c.output_grad(0)) return;
  ir::Value* dy = c.output_grad(0);
  c.set_input_grad(0, c.b.op("AllReduceSum", {dy}, dy->type, {}, kAmpcDomain));
}

void batch_statistics(GradContext& c) {
  for (size_t i = 0; i < 2; ++i) {
    if (c.needs(2 + i) && c.output_grad(i)) c.set_input_grad(2 + i, c.output_grad(i));
  }
}

}  // namespace

void register_comm_gradients(GradientRegistry& r) {
  r.add(ops::OpKey(kAmpcDomain, "AllReduceSum"), all_reduce_sum);
  r.add(ops::OpKey(kAmpcDomain, "BatchStatistics"), batch_statistics);
}

}  // namespace ampc::passes::autodiff
