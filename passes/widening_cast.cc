#include "passes/widening_cast.h"

#include "ir/node_match.h"
#include "kernels/shared/kernel_args.h"

namespace ampc::passes {

ir::Node* sole_widening_cast(const ir::Value* v, const std::set<const ir::Value*>& kept) {
  if (!v || kept.count(v) || v->uses.size() != 1) return nullptr;
  ir::Node* cast = v->producer;
  if (!ir::is_onnx_op(cast, "Cast") || cast->inputs.empty() || !cast->inputs[0]) return nullptr;
  return kernels::shared::reads_widened(cast->inputs[0]->type.dtype, v->type.dtype) ? cast
                                                                                    : nullptr;
}

}  // namespace ampc::passes
