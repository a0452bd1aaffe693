// What the data must provide for a plan: one array per plan input, with the input's element
// type and per-sample shape; the first axis of every input is the batch.
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

}  // namespace ampc::cli
