#include "passes/sync_batch_norm.h"

#include <algorithm>
#include <map>

#include "base/error.h"
#include "ops/schemas/ampc_schemas.h"
#include "passes/autodiff/grad_builder.h"

namespace ampc::passes {
namespace {

using autodiff::attrs;
using autodiff::GradBuilder;
using Shape = std::vector<int64_t>;

bool training_mode(const ir::Node& n) {
  const auto* mode = n.attr("training_mode");
  return mode && mode->i != 0;
}

float float_attr(const ir::Node& n, const char* name, float fallback) {
  const auto* a = n.attr(name);
  return a ? a->f : fallback;
}

class Synchronizer {
 public:
  explicit Synchronizer(ir::Graph& g) : g_(g) {}

  void rewrite(ir::Node& n, std::vector<ir::Model::StateUpdate>& updates) {
    ir::Value* x = n.inputs[0];
    if (n.inputs.size() < 5 || !x || !n.inputs[1] || !n.inputs[3] || !n.inputs[4])
      throw Error("--sync-batchnorm: node " + n.label() + " lacks an input");
    if (!x->type.is_static() || x->type.shape->size() < 2)
      throw Error("--sync-batchnorm: node " + n.label() + ": input " + x->type.str() +
                  " has no static shape with a channel dimension");
    const Shape& dims = *x->type.shape;
    const size_t rank = dims.size();
    const int64_t channels = dims[1];
    const DType p = n.inputs[1]->type.dtype;  // the statistics' dtype (fp32 under autocast)
    const ir::TensorType per_channel{p, Shape{channels}};
    const ir::TensorType scalar{p, Shape{}};
    Shape axes = {0}, broadcast(rank, 1);
    broadcast[1] = channels;
    for (size_t i = 2; i < rank; ++i) axes.push_back(static_cast<int64_t>(i));
    const int64_t count = ir::shape_numel(dims) / channels;
    const double momentum = float_attr(n, "momentum", 0.9f);
    ir::Value* const stats[2] = {n.inputs[3], n.inputs[4]};
    for (ir::Value* stat : stats) {
      if (stat->type.dtype != p)
        throw Error("--sync-batchnorm: node " + n.label() + ": running statistic '" + stat->name +
                    "' is " + std::string(dtype_name(stat->type.dtype)) + ", not its scale's " +
                    std::string(dtype_name(p)));
    }

    const size_t first = g_.nodes.size();
    GradBuilder b(g_, (n.name.empty() ? std::string("batchnorm") : n.name) + "/sync");
    auto all_reduce = [&](ir::Value* v) {
      return b.op("AllReduceSum", {v}, v->type, {}, ops::kAmpcDomain);
    };
    auto channel_sum = [&](ir::Value* v) {
      return b.op("ReduceSum", {v, b.ints(axes)}, per_channel,
                  attrs(ir::Attribute::make_int("keepdims", 0)));
    };
    ir::Value* xp = b.cast(x, p);
    ir::Value* n_global =
        b.op("Mul", {world(b, p), b.scalar(static_cast<double>(count), p)}, scalar);
    ir::Value* mean = b.op("Div", {all_reduce(channel_sum(xp)), n_global}, per_channel);
    ir::Value* centred = b.op("Sub", {xp, b.reshape(mean, broadcast)}, {p, dims});
    ir::Value* squares = all_reduce(channel_sum(b.op("Mul", {centred, centred}, {p, dims})));
    ir::Value* var = b.op("Div", {squares, n_global}, per_channel);
    auto used = b.op_n("BatchStatistics", {stats[0], stats[1], mean, var},
                       {per_channel, per_channel}, {}, ops::kAmpcDomain);
    // Running statistics: PyTorch's, with the unbiased variance of the global batch.
    auto blend = [&](ir::Value* running, ir::Value* batch) {
      ir::Value* kept = b.op("Mul", {running, b.scalar(momentum, p)}, per_channel);
      ir::Value* added = b.op("Mul", {batch, b.scalar(1.0 - momentum, p)}, per_channel);
      return b.op("Add", {kept, added}, per_channel);
    };
    ir::Value* unbiased =
        b.op("Div", {squares, b.op("Sub", {n_global, b.scalar(1.0, p)}, scalar)}, per_channel);
    // A module applied again in the forward blends into what its previous call left, as
    // PyTorch's does (running_statistics.h); those nodes come earlier in the graph.
    auto latest = [&](ir::Value* stat) {
      auto it = latest_.find(stat);
      return it == latest_.end() ? stat : it->second;
    };
    ir::Value* new_stats[2] = {blend(latest(stats[0]), mean), blend(latest(stats[1]), unbiased)};
    g_.move_tail_before(first, &n);

    // The node itself normalises with the statistics, in inference mode.
    ir::set_input(&n, 3, used[0]);
    ir::set_input(&n, 4, used[1]);
    std::erase_if(n.attributes, [](const ir::Attribute& a) {
      return a.name == "training_mode" || a.name == "momentum";
    });
    // The running statistics are updated where the node has their outputs (as
    // running_statistics.h does for plain BatchNorm).
    bool updated[2] = {false, false};
    for (size_t k = 1; k < n.outputs.size() && k < 3; ++k) {
      ir::Value* old = n.outputs[k];
      if (!old) continue;
      updated[k - 1] = true;
      ir::replace_all_uses(old, new_stats[k - 1]);  // of the statistics' dtype, p
      std::replace(g_.outputs.begin(), g_.outputs.end(), old, new_stats[k - 1]);
      ir::set_output(&n, k, nullptr);
      g_.erase_values_if([old](const ir::Value& v) { return &v == old; });
    }
    if (n.outputs.size() > 1) n.outputs.erase(n.outputs.begin() + 1, n.outputs.end());
    // The running statistics' initializers take their new values after each step: the
    // last call's.
    for (size_t k = 0; k < 2; ++k) {
      if (!updated[k] || !stats[k]->is_initializer() || stats[k]->is_graph_input) continue;
      latest_[stats[k]] = new_stats[k];
      auto same = [&](const ir::Model::StateUpdate& u) { return u.target == stats[k]; };
      if (auto it = std::find_if(updates.begin(), updates.end(), same); it != updates.end())
        it->source = new_stats[k];
      else
        updates.push_back({stats[k], new_stats[k]});
    }
  }

 private:
  // The world size as a 0-d tensor of `p`: one AllReduceSum(1) per dtype, placed with the
  // first BatchNorm that needs it.
  ir::Value* world(GradBuilder& b, DType p) {
    auto it = world_.find(p);
    if (it != world_.end()) return it->second;
    ir::Value* one = b.scalar(1.0, p);
    return world_[p] = b.op("AllReduceSum", {one}, one->type, {}, ops::kAmpcDomain);
  }

  ir::Graph& g_;
  std::map<DType, ir::Value*> world_;
  // Each running statistic's value after the nodes rewritten so far that update it.
  std::map<ir::Value*, ir::Value*> latest_;
};

}  // namespace

int synchronize_batch_norm(ir::Model& model, std::vector<ir::Model::StateUpdate>& running_updates) {
  ir::Graph& g = *model.graph;
  const auto opset = model.opset_version("");
  std::vector<ir::Node*> targets;
  for (const auto& n : g.nodes) {
    if (n->op_type != "BatchNormalization" || !n->domain.empty()) continue;
    if (opset && *opset < 14 && n->outputs.size() > 1)
      throw Error("--sync-batchnorm: node " + n->label() +
                  " is a training-mode BatchNormalization of opset " + std::to_string(*opset) +
                  " (before training_mode, 14): export the model with opset 14 or later");
    if (training_mode(*n)) targets.push_back(n.get());
  }
  if (targets.empty())
    throw Error("--sync-batchnorm: the model has no BatchNormalization in training mode");
  if (!model.opset_version(ops::kAmpcDomain))
    model.opsets.push_back({ops::kAmpcDomain, ops::kAmpcDomainVersion});
  Synchronizer s(g);
  for (ir::Node* n : targets) s.rewrite(*n, running_updates);
  return static_cast<int>(targets.size());
}

}  // namespace ampc::passes
