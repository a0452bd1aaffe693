// The compile pipeline: every pass, in order, in one function (pipeline.cc).
#pragma once

#include <string>

#include "compiler/ir/graph.h"
#include "compiler/onnx/import.h"
#include "passes/autodiff/autodiff.h"
#include "passes/optimizer.h"
#include "runtime/plan/plan.pb.h"

namespace ampc::compiler {

struct CompileOptions {
  onnx_io::ImportOptions import;
  // Training: differentiate the loss and add the optimizer step; otherwise a forward plan.
  bool train = false;
  passes::AutodiffOptions autodiff;
  passes::OptimizerOptions optimizer;
};

// Runs the passes over `model` (in place) and emits the plan.
plan::Plan compile_model(ir::Model& model, const CompileOptions& options,
                         const std::string& model_name);

// load_model + compile_model.
plan::Plan compile_file(const std::string& model_path, const CompileOptions& options);

}  // namespace ampc::compiler
