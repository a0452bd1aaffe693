// What the data must provide for a plan: one array per plan input, with the input's element
// type and per-sample shape; the first axis of every input is the batch. A caller that feeds
// whole steps itself (the Python Trainer without accumulation) takes the plan's shapes as
// they are instead (plan_input_types): a sequence-first recurrent model's [T, B, F] beside its
// [B] labels, a mask or a scalar input.
#pragma once

#include <map>
#include <string>

#include "runtime/data/batcher.h"
#include "runtime/plan/plan.pb.h"

namespace ampc::cli {

struct PlanInputs {
  std::map<std::string, rt::data::InputSpec> specs;
  int64_t batch = 0;
};

// Throws ampc::Error when an input has no static shape with a batch axis, or the inputs
// disagree on the batch size.
PlanInputs plan_inputs(const plan::Plan& plan);

// Each input's element type and whole static shape (any rank, scalar included); throws
// ampc::Error for an input without a static shape.
std::map<std::string, std::pair<DType, std::vector<int64_t>>> plan_input_types(
    const plan::Plan& plan);

}  // namespace ampc::cli
