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
// The pair is the mean of each gradient over the ranks. The world size is the run's, not the
// plan's: one plan (and its checkpoints) serves any number of ranks.
#pragma once

namespace ampc::passes {

// Idempotent; called by register_amp_schemas (passes/amp_schemas.h).
void register_comm_schemas();

}  // namespace ampc::passes
