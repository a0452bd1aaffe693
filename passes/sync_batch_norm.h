// Synchronised BatchNorm (`--sync-batchnorm`, docs/data-parallel.md), PyTorch SyncBatchNorm's
// semantics: every training-mode BatchNormalization normalises with the mean and the biased
// variance of the global batch (every rank's samples), and updates its running statistics
// with the global mean and the unbiased global variance.
//
// Each such node Y = BatchNormalization(X, scale, B, mean, var; training_mode=1) becomes
// standard ops, two blocking all-reduces (ampc.AllReduceSum, ops/schemas/comm_schemas.h) and an
// inference-mode BatchNormalization that normalises with the global statistics:
//
//   world   = AllReduceSum(1)                    once per graph: the world size N
//   n       = world * (X's elements per channel)  the global count, N * B * H * W
//   M       = AllReduceSum(ReduceSum(X, all axes but 1)) / n
//   Q       = AllReduceSum(ReduceSum((X - M)^2, ...))    two-pass variance
//   (m, v)  = ampc.BatchStatistics(mean, var, M, Q / n)
//   Y       = BatchNormalization(X, scale, B, m, v)      (inference mode)
//   mean'   = mean * momentum + M * (1 - momentum)
//   var'    = var * momentum + Q / (n - 1) * (1 - momentum)
//
// in the dtype of `scale` (fp32 whatever X's dtype, as BatchNorm computes its statistics). The
// plan holds no N: it is summed at run time, so a plan runs on any number of ranks and on one
// the result is plain BatchNorm's (the running variance then takes the unbiased variance,
// as PyTorch's, where ONNX's BatchNormalization takes the biased one). Autodiff builds the
// backward; the gradient of an AllReduceSum is the AllReduceSum of its gradient
// (passes/autodiff/rules_comm.cc), which gives PyTorch's backward: the per-channel sums of
// dY and dY * (X - M) summed over the ranks. ampc.BatchStatistics marks the statistics, so that
// evaluation (passes/inference_mode.h) normalises with the running ones.
//
// Runs after autocast and before differentiation.
#pragma once

#include <vector>

#include "ir/graph.h"

namespace ampc::passes {

// Rewrites every training-mode BatchNormalization of the main graph; appends the running
// statistics' updates (target: the initializer, source: its new value; where the node has the
// running statistics' outputs, as for plain BatchNorm) to `running_updates` for the caller to
// add as state once the training step is built. Returns the number of nodes rewritten; throws
// ampc::Error naming the node when one cannot be (opset < 14, no static shape).
int synchronize_batch_norm(ir::Model& model, std::vector<ir::Model::StateUpdate>& running_updates);

}  // namespace ampc::passes
