// The operators the compiler rewrites into others before a backend sees them: what `ampc ops`
// shows beside the backends' own registries (Resize has no CPU operator, yet every backend
// runs it as the MatMuls lower_resize makes of it). One row per operator: the pass, and
// whether it rewrites for every target (before differentiation, so autodiff differentiates
// the result) or for CUDA targets only (the CPU backend runs the operator itself).
#pragma once

#include <string_view>
#include <vector>

namespace ampc::passes {

struct RewrittenOp {
  const char* op;  // of the default ONNX domain
  const char* pass;
  bool cuda_only;
};

const std::vector<RewrittenOp>& rewritten_ops();
// The row of `op` (default domain), or null.
const RewrittenOp* find_rewritten_op(std::string_view op);

}  // namespace ampc::passes
