// IR -> plan: one buffer per value, one step per node (until fusion lands), constants with
// their data, bindings for the graph's inputs and outputs, and each step's ONNX node name.
#pragma once

#include <map>
#include <string>

#include "compiler/ir/graph.h"
#include "passes/autocast.h"
#include "runtime/plan/plan.pb.h"

namespace ampc::compiler {

struct EmitOptions {
  std::string model_name;
  // Recorded in the plan as the options it was compiled with.
  std::map<std::string, std::string> recorded_options;
  // What autocast decided (compile_model's report), recorded as Plan.precision_decisions for
  // the nodes and Casts still in the graph; null or empty for fp32.
  const passes::AutocastReport* autocast = nullptr;
};

plan::Plan emit_plan(const ir::Model& model, const EmitOptions& options);

}  // namespace ampc::compiler
