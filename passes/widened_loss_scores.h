// The widening Cast of a cross-entropy's scores folded into the loss. Autocast runs
// SoftmaxCrossEntropyLoss in float32 (PyTorch's autocast lists cross_entropy as fp32), so the
// 16-bit logits of a language model's head are first copied to float32: for 512 tokens and
// 32000 classes a 64 MB tensor written and read back each step, and, alive beside the 64 MB of
// log-probabilities, the peak of the arena. Here SoftmaxCrossEntropyLoss(Cast(s, float)) becomes
// ampc.SoftmaxCrossEntropyLoss(s): the same op reading the float16 or bfloat16 scores widened,
// exactly, its loss and log-probabilities float32. The numbers are the Cast's and the op's (the
// kernels compute in float either way); the backward is the op's in float32 rounded once to the
// scores' type, which is what the Cast's backward did.
//
// Folded where the Cast (to float32, from float16 or bfloat16) is read by the loss alone and its
// output is not kept after the step (a graph output, a state update). Runs after autocast, on
// the forward: training then gives the loss its log-probabilities (passes/loss_log_prob.h), which
// the backward reads instead of the scores.
#pragma once

#include "ir/graph.h"
#include "passes/autocast.h"

namespace ampc::passes {

// Folds such Casts of the main graph; returns how many. With a report, the loss's decision
// follows it to its new label (the op is ampc's now) and says that it reads its scores widened.
int read_loss_scores_widened(ir::Model& model, AutocastReport* report = nullptr);

}  // namespace ampc::passes
