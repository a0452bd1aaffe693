// log(sigmoid(x)) and log(1 - sigmoid(x)) as softplus: torch 1.13 exports
// nn.BCEWithLogitsLoss as log(sigmoid(x)) and log(1 - sigmoid(x)), and nn.LogSigmoid as
// log(sigmoid(x)), where PyTorch's kernels compute them stably. Once sigmoid(x) rounds to 1
// (from x of about 17 in fp32, 8 in fp16) or to 0, the Log is -inf and the loss NaN (0 x
// -inf) where PyTorch's is finite. The identities
//
//   log(sigmoid(x))     = -softplus(-x)
//   log(1 - sigmoid(x)) = -softplus(x)
//
// hold exactly, with the same gradient (1 - sigmoid(x), -sigmoid(x)), and Softplus (fp32 under
// autocast, as the Log was) is finite for every finite x. The Sigmoid stays where something
// else reads it.
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

// Rewrites every Log(Sigmoid(x)) and Log(Sub(1, Sigmoid(x))) of the main graph (the 1 a
// constant of one element); returns how many. Run after constants are folded.
int stable_log_sigmoid(ir::Model& model);

}  // namespace ampc::passes
