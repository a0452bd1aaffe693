// IR -> plan: one buffer per value, one step per node (until fusion lands), constants with
// their data, bindings for the graph's inputs and outputs, and each step's ONNX node name.
#pragma once

#include <map>
#include <string>

#include "compiler/ir/graph.h"
#include "runtime/plan/plan.pb.h"

namespace ampc::compiler {

struct EmitOptions {
  std::string model_name;
  // Recorded in the plan as the options it was compiled with.
  std::map<std::string, std::string> recorded_options;
};

plan::Plan emit_plan(const ir::Model& model, const EmitOptions& options);

}  // namespace ampc::compiler
