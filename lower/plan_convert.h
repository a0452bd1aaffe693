// The IR's attributes and tensor data in the plan's format: plan emission writes each node's
// step with them, and constant folding the one-node step it runs through the CPU backend.
// A library of its own (ampc_plan_convert), so that the passes can use it without linking
// the compiler, which links them.
#pragma once

#include "ir/graph.h"
#include "runtime/plan/plan.pb.h"

namespace ampc::lower {

void plan_tensor_data(const ir::Tensor& t, plan::TensorData* out);

// Attribute `a` of node `n`. Throws ampc::Error for what a plan cannot hold: subgraphs
// (control flow) and lists of tensors.
void plan_attribute(const ir::Attribute& a, const ir::Node& n, plan::Attribute* out);

// Legalizes `step` (lower/legalize.h), whose operands are `inputs` (null: omitted):
// their ranks from the values' static shapes, constant integers from their initializers.
void legalize_with_values(plan::Step& step, const std::vector<const ir::Value*>& inputs);

}  // namespace ampc::lower
