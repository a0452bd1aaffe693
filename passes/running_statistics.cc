#include "passes/running_statistics.h"

#include "base/error.h"
#include "passes/autodiff/grad_builder.h"

namespace ampc::passes {
namespace {

bool training_mode(const ir::Node& n) {
  if (n.op_type != "BatchNormalization" || !n.domain.empty()) return false;
  const auto* mode = n.attr("training_mode");
  return mode && mode->i != 0;
}

// The running statistic k (1: mean, 2: variance) of `n` when it is state: its input and
// its updated output, or nulls.
std::pair<ir::Value*, ir::Value*> running_statistic(const ir::Node& n, size_t k) {
  ir::Value* stat = n.inputs.size() > k + 2 ? n.inputs[k + 2] : nullptr;
  ir::Value* updated = n.outputs.size() > k ? n.outputs[k] : nullptr;
  if (!stat || !updated || !stat->is_initializer() || stat->is_graph_input) return {};
  return {stat, updated};
}

// PyTorch's update from ONNX's: updated + (updated - m * running) / (n - 1).
ir::Value* unbiased_update(ir::Graph& g, const ir::Node& n, ir::Value* running,
                           ir::Value* updated) {
  const ir::Value* x = n.inputs[0];
  if (!x || !x->type.is_static() || x->type.shape->size() < 2)
    throw Error("node " + n.label() +
                ": PyTorch's running variance needs the input's static shape (" + x->type.str() +
                "); --batchnorm-running-var biased keeps ONNX's update");
  const int64_t count = ir::shape_numel(*x->type.shape) / (*x->type.shape)[1];
  if (count < 2)
    throw Error("node " + n.label() + ": one value per channel (input " + x->type.str() +
                ") has no unbiased variance; PyTorch refuses such a batch too");
  const auto* attr = n.attr("momentum");
  const float momentum = attr ? attr->f : 0.9f;
  const DType p = updated->type.dtype;
  autodiff::GradBuilder b(
      g, (n.name.empty() ? std::string("batchnorm") : n.name) + "/unbiased_running_var");
  ir::Value* kept = b.op("Mul", {running, b.scalar(momentum, p)}, updated->type);
  ir::Value* blended = b.op("Sub", {updated, kept}, updated->type);
  ir::Value* extra =
      b.op("Mul", {blended, b.scalar(1.0 / static_cast<double>(count - 1), p)}, updated->type);
  return b.op("Add", {updated, extra}, updated->type);
}

}  // namespace

int add_running_statistics_updates(ir::Model& model, const RunningStatisticsOptions& options) {
  int added = 0;
  std::vector<ir::Node*> nodes;
  for (const auto& n : model.graph->nodes) {
    if (training_mode(*n)) nodes.push_back(n.get());
  }
  for (ir::Node* n : nodes) {
    for (size_t k = 1; k <= 2; ++k) {
      auto [stat, updated] = running_statistic(*n, k);
      if (!stat) continue;
      if (k == 2 && options.unbiased_variance)
        updated = unbiased_update(*model.graph, *n, stat, updated);
      model.state_updates.push_back({stat, updated});
      ++added;
    }
  }
  return added;
}

bool has_running_variance(const ir::Model& model) {
  for (const auto& n : model.graph->nodes) {
    if (training_mode(*n) && running_statistic(*n, 2).first) return true;
  }
  return false;
}

}  // namespace ampc::passes
