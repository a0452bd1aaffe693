#include "runtime/cpu/ops/all_ops.h"

#include "runtime/cpu/op_registry.h"
#include "runtime/cpu/ops/families.h"

namespace ampc::rt::cpu {

void register_all_cpu_ops(OpRegistry& r) {
  register_constant_ops(r);
  register_elementwise_ops(r);
  register_tensor_ops(r);
  register_nn_ops(r);
  register_reduction_ops(r);
  register_grad_ops(r);
  register_training_optimizer_ops(r);
  register_amp_ops(r);
  register_comm_ops(r);
  register_range_stats_ops(r);
  register_random_ops(r);
}

}  // namespace ampc::rt::cpu
