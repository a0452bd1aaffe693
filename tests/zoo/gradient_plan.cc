#include "tests/zoo/gradient_plan.h"

#include "driver/pipeline.h"
#include "frontend/onnx/import.h"
#include "passes/autodiff/autodiff.h"
#include "runtime/io/npy.h"

namespace ampc::zoo {

GradientPlan gradient_plan(const std::string& model_path) {
  auto model = onnx_io::load_model(model_path);
  compiler::prepare_forward(*model);
  ir::Graph& g = *model->graph;
  GradientPlan out;
  out.loss = g.outputs.at(0)->name;
  for (const auto& pg : passes::differentiate(*model, {})) {
    const std::string name = "grad." + pg.parameter->name;
    ir::Value* v = g.add_value(name, pg.gradient->type);
    g.add_node("Identity", {pg.gradient}, {v}, name);
    g.outputs.push_back(v);
    out.parameters.push_back(pg.parameter->name);
  }
  // The plan the CPU runs, as `ampc train` on the CPU compiles it (strided views included).
  compiler::CompileOptions options;
  options.lowering.target = "cpu";
  out.plan = compiler::compile_model(*model, options, "zoo");
  return out;
}

std::map<std::string, rt::Tensor> read_batch(const std::filesystem::path& dir) {
  std::map<std::string, rt::Tensor> batch;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".npy") continue;
    batch[entry.path().stem().string()] = rt::io::read_npy(entry.path().string());
  }
  return batch;
}

}  // namespace ampc::zoo
