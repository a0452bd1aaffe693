// The zoo's gradient plan, shared by zoo_gradients (its check) and zoo_step_dump (its
// diagnosis): the model prepared as compile_model prepares it (compiler::prepare_forward),
// passes::differentiate's backward added, each gradient a graph output "grad.PARAMETER",
// compiled as an fp32 forward plan; and a batch read from BATCH_DIR/NAME.npy.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "runtime/plan/plan.pb.h"
#include "runtime/tensor.h"

namespace ampc::zoo {

struct GradientPlan {
  plan::Plan plan;
  std::string loss;                     // the graph output the gradients are of
  std::vector<std::string> parameters;  // each has the output "grad." + name
};

GradientPlan gradient_plan(const std::string& model_path);

// Every NAME.npy of `dir`, by NAME.
std::map<std::string, rt::Tensor> read_batch(const std::filesystem::path& dir);

}  // namespace ampc::zoo
