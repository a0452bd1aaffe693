// Operator schemas of data-parallel training's communication, in ampc's domain "ampc"
// (passes/data_parallel.h inserts them; runtime/cpu/ops/comm_ops.cc and
// runtime/cuda/ops_comm.cc run them):
//
//   AllReduceStart(G1..Gn) -> R1..Rn        attributes: bucket (int), to (int, a DType)
//       Ri = Gi / world_size in dtype `to`; starts the sum of the Ri over every rank, in
//       place, without waiting for it. World size 1: a copy (with the cast).
//   AllReduceWait(R1..Rn) -> G1'..Gn'       attributes: bucket (int), to (int, a DType)
//       waits for bucket's sums; Gi' = Ri (summed over the ranks) in dtype `to`.
//
//   AllReduceSum(X) -> Y
//       Y = the sum of X over every rank, blocking (world size 1: a copy). Its gradient is
//       the same sum of Y's gradient (passes/autodiff/rules_comm.cc).
//   BatchStatistics(running_mean, running_var, batch_mean, batch_var) -> (mean, var)
//       in training (mean, var) = (batch_mean, batch_var); set_inference_mode
//       (passes/inference_mode.h) replaces them by the running statistics. The mark that
//       lets a synchronised BatchNorm (passes/sync_batch_norm.h) be evaluated.
//
// The Start/Wait pair is the mean of each gradient over the ranks. The world size is the
// run's, not the plan's: one plan (and its checkpoints) serves any number of ranks.
#pragma once

namespace ampc::ops {

// Idempotent; called by register_amp_schemas (ops/schemas/amp_schemas.h).
void register_comm_schemas();

}  // namespace ampc::ops
