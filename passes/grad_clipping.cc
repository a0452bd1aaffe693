#include "passes/grad_clipping.h"

#include "base/error.h"
#include "ops/schemas/amp_schemas.h"
#include "ops/schemas/ampc_schemas.h"
#include "passes/autodiff/grad_builder.h"
#include "passes/loss_scaling.h"

namespace ampc::passes {

ir::Value* clip_gradients(ir::Model& model, std::vector<ParameterGradient>& gradients,
                          double max_norm, bool log_norm) {
  const bool clip = max_norm > 0;
  if ((!clip && !log_norm) || gradients.empty()) return nullptr;
  if (model.graph->find_value(kGradNormName))
    throw Error(std::string("cannot add '") + kGradNormName +
                "': the model already has a value of that name");
  ops::register_amp_schemas();
  const size_t first_node = model.graph->nodes.size();
  autodiff::GradBuilder b(*model.graph, "amp");
  std::vector<ir::Value*> inputs;
  std::vector<ir::TensorType> types{{DType::kFloat32, std::vector<int64_t>{}}};
  for (const auto& pg : gradients) {
    inputs.push_back(pg.gradient);
    if (clip) types.push_back(pg.gradient->type);
  }
  std::vector<ir::Attribute> a;
  if (clip) a.push_back(ir::Attribute::make_float("max_norm", static_cast<float>(max_norm)));
  const auto outs = b.op_n("ClipGradNorm", inputs, types, std::move(a), ops::kAmpcDomain);
  model.graph->rename_value(outs[0], kGradNormName);  // indexed: find_value sees it
  if (clip) {
    for (size_t i = 0; i < gradients.size(); ++i) gradients[i].gradient = outs[i + 1];
  } else {
    // Nothing reads a norm computed for the log only, and dead-code elimination would drop
    // it: keeping the last step's norm as state keeps it live (and in checkpoints).
    ir::Value* last = b.filled(0.0, outs[0]->type);
    if (model.graph->find_value(kLastGradNormName))
      throw Error(std::string("cannot add '") + kLastGradNormName + "': the name is taken");
    model.graph->rename_value(last, kLastGradNormName);
    last->initializer->name = kLastGradNormName;
    model.state_updates.push_back({last, outs[0]});
  }
  import_ampc_domain_if_used(model, first_node);
  return outs[0];
}

}  // namespace ampc::passes
