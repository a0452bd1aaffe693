#include "compiler/pipeline.h"

#include <filesystem>

#include "compiler/ir/verifier.h"
#include "compiler/plan_emit.h"
#include "passes/constant_folding.h"
#include "passes/dead_code_elimination.h"
#include "passes/running_statistics.h"

namespace ampc::compiler {
namespace {

std::string shape_spec(const std::vector<int64_t>& dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "x" : "") + std::to_string(dims[i]);
  return s;
}

}  // namespace

plan::Plan compile_model(ir::Model& model, const CompileOptions& options,
                         const std::string& model_name) {
  // Constants first: gradient rules need constant shapes, axes and slice bounds.
  passes::fold_constants(model);

  // Training: backward graph, optimizer step, running statistics as state.
  if (options.train) {
    const auto gradients = passes::differentiate(model, options.autodiff);
    passes::add_optimizer(model, gradients, options.optimizer);
    passes::add_running_statistics_updates(model);
    passes::fold_constants(model);
  }

  // Cleanup.
  passes::eliminate_dead_code(model);
  ir::verify(model, {.require_static_inputs = options.import.require_static_inputs});

  // Lowering: one step per node.
  EmitOptions emit;
  emit.model_name = model_name;
  for (const auto& [name, dims] : options.import.input_shapes)
    emit.recorded_options["input-shape." + name] = shape_spec(dims);
  return emit_plan(model, emit);
}

plan::Plan compile_file(const std::string& model_path, const CompileOptions& options) {
  auto model = onnx_io::load_model(model_path, options.import);
  return compile_model(*model, options, std::filesystem::path(model_path).stem().string());
}

}  // namespace ampc::compiler
