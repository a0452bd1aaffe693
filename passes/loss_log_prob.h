// SoftmaxCrossEntropyLoss keeps its log-probabilities for the backward: the loss's gradient
// needs log_softmax(scores), and recomputing it there keeps the scores alive from the forward
// to the backward (in mixed precision, their fp32 copy) next to the recomputed [N, C] result.
// With the optional log_prob output requested, the forward writes it once and the scores die
// after the loss, as PyTorch saves log_softmax's output for its backward.
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

struct LossLogProbOptions {};

// Adds the log_prob output (output 1) to every SoftmaxCrossEntropyLoss node of the main graph
// that omits it (ampc's widened one too, passes/widened_loss_scores.h: float32 like its loss);
// returns how many were changed. Run before autodiff.
int keep_loss_log_prob(ir::Model& model, const LossLogProbOptions& options = {});

}  // namespace ampc::passes
