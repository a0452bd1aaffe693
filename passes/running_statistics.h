// BatchNormalization in training mode computes new running mean and variance (outputs 1
// and 2); when its inputs 3 and 4 are initializers, they become state updated each step.
//
// The running variance: ONNX's operator blends in the batch's biased (population) variance;
// PyTorch's nn.BatchNorm, which torch.onnx.export writes as that operator, the unbiased one,
// n / (n - 1) times it (n = the elements per channel, batch x spatial size). With
// `unbiased_variance` the update is PyTorch's: the node's own output v' = m v + (1 - m) b is
// corrected to v' + (v' - m v) / (n - 1) = m v + (1 - m) n / (n - 1) b, a few [C]-sized ops
// in the statistics' dtype (m: the node's momentum, v the running variance, b the batch's).
//
// A module applied more than once in a forward (a siamese encoder, BYOL's target branch) is
// several nodes on one statistic: PyTorch updates it after each call, so the update is
// chained in call order, each node's batch blended into the value the previous one left.
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

struct RunningStatisticsOptions {
  bool unbiased_variance = false;
};

// Returns the number of statistics turned into state (each once, however many nodes update it).
// Throws ampc::Error naming the node when the unbiased variance is asked for and the node's input
// has no static shape or one element per channel (PyTorch refuses a batch of one value per channel
// too).
int add_running_statistics_updates(ir::Model& model, const RunningStatisticsOptions& options = {});

// Whether the model has a training-mode BatchNormalization whose running variance is state:
// where the choice of the update matters.
bool has_running_variance(const ir::Model& model);

}  // namespace ampc::passes
