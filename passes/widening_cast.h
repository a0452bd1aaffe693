// The widening Cast that the ampc ops reading a 16-bit operand widened fold in
// (widened_loss_scores.h, widened_row_grads.h): one rule for which Cast may go.
#pragma once

#include <set>

#include "ir/graph.h"

namespace ampc::passes {

// The Cast (float16 or bfloat16 to float32) that produces `v`, where its one reader is the op
// that folds it and `v` is not kept after the step (`kept`: dead_code_elimination.h's
// kept_values); else null.
ir::Node* sole_widening_cast(const ir::Value* v, const std::set<const ir::Value*>& kept);

}  // namespace ampc::passes
