// Gradient clipping by global norm (torch.nn.utils.clip_grad_norm_, 2-norm) as one
// ampc.ClipGradNorm node over every gradient, after unscaling. Also computes the norm alone
// ("amp.grad_norm") when only logging asks for it.
#pragma once

#include <vector>

#include "ir/graph.h"
#include "passes/autodiff/autodiff.h"

namespace ampc::passes {

// max_norm > 0: the gradients are replaced by their clipped values. Returns the norm value
// (named "amp.grad_norm"); with max_norm <= 0 and !log_norm, adds nothing and returns null.
ir::Value* clip_gradients(ir::Model& model, std::vector<ParameterGradient>& gradients,
                          double max_norm, bool log_norm);

}  // namespace ampc::passes
