// What the tests of the CUDA-target rewrites (index_ops_for_cuda, reductions_for_cuda) share:
// small IR graphs built by hand, and a model compiled for the CPU backend and run there, where
// a rewritten model's results are compared with the original's.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "driver/pipeline.h"
#include "ir/graph.h"
#include "runtime/cpu/executor.h"

namespace ampc::passes::test_util {

inline ir::Value* add_input(ir::Graph& g, const std::string& name, std::vector<int64_t> shape,
                            DType t) {
  ir::Value* v = g.add_value(name, {t, std::move(shape)});
  v->is_graph_input = true;
  g.inputs.push_back(v);
  return v;
}

// An int64 initializer.
inline ir::Value* add_ints(ir::Graph& g, const std::string& name, std::vector<int64_t> shape,
                           const std::vector<int64_t>& values) {
  ir::Value* v = g.add_value(name, {DType::kInt64, shape});
  auto tensor = std::make_unique<ir::Tensor>(
      ir::tensor_of<int32_t>(DType::kInt64, DType::kInt64, shape, values));
  tensor->name = name;
  v->initializer = std::move(tensor);
  g.initializers.push_back(v);
  return v;
}

// The model compiled for the CPU backend and run once on `inputs`.
inline std::map<std::string, rt::Tensor> run_on_cpu(
    ir::Model& model, const std::map<std::string, rt::Tensor>& inputs) {
  compiler::CompileOptions o;
  o.lowering.target = "cpu";
  rt::cpu::Executor executor(compiler::compile_model(model, o, model.graph->name));
  return executor.run(inputs);
}

}  // namespace ampc::passes::test_util
