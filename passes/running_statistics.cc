#include "passes/running_statistics.h"

#include <map>
#include <string>
#include <vector>

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

float momentum_of(const ir::Node& n) {
  const auto* attr = n.attr("momentum");
  return attr ? attr->f : 0.9f;
}

// The node's n values per channel, of which PyTorch's unbiased variance divides by n - 1.
double values_per_channel(const ir::Node& n) {
  const ir::Value* x = n.inputs[0];
  if (!x || !x->type.is_static() || x->type.shape->size() < 2)
    throw Error("node " + n.label() +
                ": PyTorch's running variance needs the input's static shape (" + x->type.str() +
                "); --batchnorm-running-var biased keeps ONNX's update");
  const int64_t count = ir::shape_numel(*x->type.shape) / (*x->type.shape)[1];
  if (count < 2)
    throw Error("node " + n.label() + ": one value per channel (input " + x->type.str() +
                ") has no unbiased variance; PyTorch refuses such a batch too");
  return static_cast<double>(count);
}

autodiff::GradBuilder builder(ir::Graph& g, const ir::Node& n, const std::string& what) {
  return autodiff::GradBuilder(g,
                               (n.name.empty() ? std::string("batchnorm") : n.name) + "/" + what);
}

// PyTorch's update from ONNX's: updated + (updated - m * running) / (n - 1).
ir::Value* unbiased_update(ir::Graph& g, const ir::Node& n, ir::Value* running,
                           ir::Value* updated) {
  const double count = values_per_channel(n);
  const DType p = updated->type.dtype;
  autodiff::GradBuilder b = builder(g, n, "unbiased_running_var");
  ir::Value* kept = b.op("Mul", {running, b.scalar(momentum_of(n), p)}, updated->type);
  ir::Value* blended = b.op("Sub", {updated, kept}, updated->type);
  ir::Value* extra = b.op("Mul", {blended, b.scalar(1.0 / (count - 1), p)}, updated->type);
  return b.op("Add", {updated, extra}, updated->type);
}

// A BatchNorm module applied again in the same forward (a siamese or contrastive encoder,
// BYOL's target branch), exported as another node on the same running statistic: PyTorch
// updates the statistic after each call, so the next call blends its batch into the value
// the previous one left. Every node's ONNX output blends into the step's initial value r0
// (its input), u = m r0 + (1 - m) b, so its batch's share is u - m r0, and the chained value
// is r' = m r + c (u - m r0), c = n / (n - 1) for PyTorch's running variance, else 1.
ir::Value* chained_update(ir::Graph& g, const ir::Node& n, ir::Value* previous, ir::Value* r0,
                          ir::Value* updated, bool unbiased) {
  const DType p = updated->type.dtype;
  const float momentum = momentum_of(n);
  autodiff::GradBuilder b = builder(g, n, "chained_running_statistic");
  ir::Value* share =
      b.op("Sub", {updated, b.op("Mul", {r0, b.scalar(momentum, p)}, r0->type)}, updated->type);
  if (unbiased) {
    const double count = values_per_channel(n);
    share = b.op("Mul", {share, b.scalar(count / (count - 1), p)}, updated->type);
  }
  ir::Value* kept = b.op("Mul", {previous, b.scalar(momentum, p)}, previous->type);
  return b.op("Add", {kept, share}, updated->type);
}

}  // namespace

int add_running_statistics_updates(ir::Model& model, const RunningStatisticsOptions& options) {
  std::vector<ir::Node*> nodes;
  for (const auto& n : model.graph->nodes) {
    if (training_mode(*n)) nodes.push_back(n.get());
  }
  // Each statistic's value after the nodes so far that update it, in graph (call) order.
  std::map<ir::Value*, ir::Value*> latest;
  std::vector<ir::Value*> order;
  for (ir::Node* n : nodes) {
    for (size_t k = 1; k <= 2; ++k) {
      auto [stat, updated] = running_statistic(*n, k);
      if (!stat) continue;
      const bool unbiased = k == 2 && options.unbiased_variance;
      auto it = latest.find(stat);
      if (it == latest.end()) {
        latest[stat] = unbiased ? unbiased_update(*model.graph, *n, stat, updated) : updated;
        order.push_back(stat);
      } else {
        it->second = chained_update(*model.graph, *n, it->second, stat, updated, unbiased);
      }
    }
  }
  for (ir::Value* stat : order) model.state_updates.push_back({stat, latest[stat]});
  return static_cast<int>(order.size());
}

bool has_running_variance(const ir::Model& model) {
  for (const auto& n : model.graph->nodes) {
    if (training_mode(*n) && running_statistic(*n, 2).first) return true;
  }
  return false;
}

}  // namespace ampc::passes
