#include "passes/autodiff/autodiff.h"

#include <fnmatch.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "base/error.h"
#include "ops/schemas/ampc_schemas.h"
#include "passes/autodiff/grad_builder.h"
#include "passes/autodiff/gradient_registry.h"
#include "passes/static_shapes.h"

namespace ampc::passes {
namespace {

ir::Value* find_loss(const ir::Graph& g, const std::string& name) {
  ir::Value* loss = nullptr;
  if (name.empty()) {
    if (g.outputs.size() != 1) {
      throw Error("the model has " + std::to_string(g.outputs.size()) +
                  " outputs; choose the loss with --loss NAME (loss= in ampc.compile)");
    }
    loss = g.outputs[0];
  } else {
    for (ir::Value* v : g.outputs) {
      if (v->name == name) loss = v;
    }
    if (!loss) throw Error("--loss " + name + ": the model has no output of that name");
  }
  if (!is_float(loss->type.dtype) || !loss->type.is_static() ||
      ir::shape_numel(*loss->type.shape) != 1) {
    throw Error("loss '" + loss->name + "' must be a float scalar, not " + loss->type.str());
  }
  return loss;
}

// The initializers an export listed as not trained by torch.optim (buffers, requires_grad=False
// parameters): metadata kUntrainedKey, one name per line (ampc.export writes it).
std::set<std::string> untrained_names(const ir::Model& model) {
  const std::vector<std::string> lines = metadata_lines(model, kUntrainedKey);
  return {lines.begin(), lines.end()};
}

bool frozen(const std::string& name, const std::vector<std::string>& patterns) {
  for (const auto& p : patterns) {
    if (fnmatch(p.c_str(), name.c_str(), 0) == 0) return true;
  }
  return false;
}

// The gradient of the loss to start the backward from: ones, or `seed` in the loss's
// element type and shape.
ir::Value* loss_seed(ir::Graph& g, ir::Value* loss, ir::Value* seed) {
  autodiff::GradBuilder b(g, "grad");
  if (!seed) return b.filled(1.0, loss->type);
  if (!is_float(seed->type.dtype) || !seed->type.is_static() ||
      ir::shape_numel(*seed->type.shape) != 1) {
    throw Error("internal: the backward's seed '" + seed->name + "' is not a float scalar");
  }
  if (seed->type.dtype != loss->type.dtype) {
    seed = b.op(
        "Cast", {seed}, {loss->type.dtype, seed->type.shape},
        autodiff::attrs(ir::Attribute::make_int("to", static_cast<int64_t>(loss->type.dtype))));
  }
  if (seed->type.shape != loss->type.shape) seed = b.reshape(seed, *loss->type.shape);
  return seed;
}

// Whether `n` reads a value of `depends`: as an input or, for a node with subgraphs (If,
// Loop), inside them (a branch reads outer values by name, not through the node's inputs).
bool reads_any(const ir::Node& n, const std::set<const ir::Value*>& depends) {
  for (const ir::Value* in : n.inputs)
    if (in && depends.count(in)) return true;
  for (const ir::Attribute& a : n.attributes) {
    std::vector<const ir::Graph*> subgraphs;
    if (a.g) subgraphs.push_back(a.g.get());
    for (const auto& sub : a.graphs) subgraphs.push_back(sub.get());
    for (const ir::Graph* sub : subgraphs)
      for (const auto& inner : sub->nodes)
        if (reads_any(*inner, depends)) return true;
  }
  return false;
}

// The float values that depend on one of xs (forward reachability), in PyTorch's sense of
// requiring grad. An op whose output takes only its input's shape and type (nn.RReLU's
// RandomUniformLike noise, EyeLike) passes no dependence on: the noise is a constant of the
// step, as in PyTorch. Nor do the values where the export recorded that autograd stops,
// nor, where it recorded them, the step functions (their gradient is 0).
std::set<const ir::Value*> dependent_values(const ir::Graph& g, const std::vector<ir::Value*>& xs,
                                            const StopGradients& stops) {
  static const std::set<std::string> kShapeOnly = {"RandomUniformLike", "RandomNormalLike",
                                                   "EyeLike"};
  std::set<const ir::Value*> depends(xs.begin(), xs.end());
  for (const auto& node : g.nodes) {
    const ir::Node& n = *node;
    if (n.domain.empty() && kShapeOnly.count(n.op_type)) continue;
    if (stops.recorded && is_step_function(n)) continue;
    if (!reads_any(n, depends)) continue;
    for (const ir::Value* out : n.outputs) {
      if (out && is_float(out->type.dtype) && !stops.values.count(out)) depends.insert(out);
    }
  }
  return depends;
}

}  // namespace

std::vector<ir::Value*> gradients_of(ir::Graph& g, ir::Value* y, ir::Value* seed,
                                     const std::vector<ir::Value*>& xs,
                                     const StopGradients& stops) {
  return gradients_of(g, {{y, seed}}, xs, stops);
}

std::vector<ir::Value*> gradients_of(ir::Graph& g, const std::vector<SeededOutput>& ys,
                                     const std::vector<ir::Value*>& xs,
                                     const StopGradients& stops) {
  const size_t forward_nodes = g.nodes.size();
  const std::set<const ir::Value*> depends = dependent_values(g, xs, stops);
  std::vector<ir::Value*> result(xs.size(), nullptr);
  // Backward sweep in reverse topological order, accumulating dy/dv. Every y starts with
  // its seed; a y that another y depends on also receives that one's contributions.
  std::map<const ir::Value*, ir::Value*> grad;
  for (const auto& [y, seed] : ys) {
    if (depends.count(y) && !grad.emplace(y, seed).second)
      throw Error("internal: output '" + y->name + "' is differentiated twice");
  }
  if (grad.empty()) return result;
  const auto& registry = autodiff::GradientRegistry::instance();
  for (size_t i = forward_nodes; i-- > 0;) {
    const ir::Node& n = *g.nodes[i];
    std::vector<ir::Value*> out_grads;
    bool any_out = false;
    for (const ir::Value* out : n.outputs) {
      auto it = out ? grad.find(out) : grad.end();
      out_grads.push_back(it == grad.end() ? nullptr : it->second);
      any_out |= it != grad.end();
    }
    std::vector<bool> needs;
    bool any_in = false;
    for (const ir::Value* in : n.inputs) {
      needs.push_back(in && depends.count(in));
      any_in |= needs.back();
    }
    if (any_out && !any_in && reads_any(n, depends)) {
      // The dependence is inside its subgraphs (an If's branches read the parameters).
      throw Error("node " + n.label() + ": the loss depends on trainable parameters inside " +
                  n.op_type +
                  "'s subgraphs (control flow), which ampc does not differentiate; an If whose "
                  "condition folds with static shapes is replaced by its branch and trains");
    }
    if (!any_out || !any_in) continue;
    for (const ir::Value* v : n.inputs) {
      if (v && !v->type.is_static()) {
        // Name where the shape got lost (the first node whose output shape is unknown),
        // not this consumer far downstream.
        require_static_shapes(g, "differentiation needs static shapes");
        throw Error("differentiation needs static shapes; value '" + v->name + "' read by node " +
                    n.label() + " is " + v->type.str());
      }
    }
    const autodiff::GradRule* rule = registry.find({n.domain, n.op_type});
    if (!rule && is_step_function(n)) {
      // PyTorch's gradient of these is 0, but torch.onnx.export drops .detach(): a
      // straight-through estimator would train with a gradient of 0 instead of 1. An export
      // that records where autograd stops never gets here (dependent_values).
      throw Error("no gradient rule for operator '" + n.op_type + "' (node " + n.label() +
                  "): its gradient is 0, but torch.onnx.export drops .detach(), so a "
                  "straight-through estimator x + (f(x) - x).detach() would get 0 instead of "
                  "PyTorch's 1; export with ampc.export (Python), which records .detach() and "
                  "torch.no_grad()");
    }
    if (!rule)
      throw Error("no gradient rule for operator '" + n.op_type + "' (node " + n.label() + ")");
    autodiff::GradBuilder builder(g, gradient_name_prefix(n.name.empty() ? n.op_type : n.name));
    autodiff::GradContext ctx(n, out_grads, needs, builder);
    (*rule)(ctx);
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      ir::Value* gk = ctx.input_grads()[k];
      if (!gk || !needs[k]) continue;
      if (gk->type.dtype != n.inputs[k]->type.dtype || gk->type.shape != n.inputs[k]->type.shape) {
        throw Error("internal: gradient rule of " + n.label() + " made a " + gk->type.str() +
                    " gradient for " + n.inputs[k]->type.str() + " input '" + n.inputs[k]->name +
                    "'");
      }
      auto [it, fresh] = grad.emplace(n.inputs[k], gk);
      if (!fresh) it->second = builder.add(it->second, gk);
    }
  }
  for (size_t i = 0; i < xs.size(); ++i) {
    if (auto it = grad.find(xs[i]); it != grad.end()) result[i] = it->second;
  }
  return result;
}

std::string gradient_name_prefix(const std::string& forward_name) {
  return "grad/" + forward_name;
}

void import_ampc_domain_if_used(ir::Model& model, size_t first_node) {
  const ir::Graph& g = *model.graph;
  for (size_t i = first_node; i < g.nodes.size(); ++i) {
    if (g.nodes[i]->domain != ops::kAmpcDomain) continue;
    ops::register_ampc_schemas();
    if (!model.opset_version(ops::kAmpcDomain))
      model.opsets.push_back({ops::kAmpcDomain, ops::kAmpcDomainVersion});
    return;
  }
}

std::vector<ir::Value*> trainable_parameters(const ir::Model& model,
                                             const AutodiffOptions& options) {
  const std::set<std::string> untrained = untrained_names(model);
  std::vector<ir::Value*> params;
  for (ir::Value* v : model.graph->initializers) {
    if (v->from_model && !v->is_graph_input && is_float(v->type.dtype) &&
        !frozen(v->name, options.freeze) && !untrained.count(v->name))
      params.push_back(v);
  }
  return params;
}

std::vector<ParameterGradient> differentiate(ir::Model& model, const AutodiffOptions& options,
                                             ir::Value* seed_value) {
  ir::Graph& g = *model.graph;
  if (model.opset_version("").value_or(0) < 13) {
    throw Error("training needs ONNX opset 13 or later in the default domain (the model has " +
                std::to_string(model.opset_version("").value_or(0)) + ")");
  }
  const std::vector<std::string> names =
      options.losses.empty() ? std::vector<std::string>{options.loss} : options.losses;
  std::vector<ir::Value*> losses;
  for (const auto& name : names) {
    ir::Value* loss = find_loss(g, name);
    if (std::find(losses.begin(), losses.end(), loss) != losses.end())
      throw Error("--loss " + loss->name + " is given twice");
    losses.push_back(loss);
  }

  const std::vector<ir::Value*> params = trainable_parameters(model, options);
  const size_t forward_nodes = g.nodes.size();
  const StopGradients stops = stop_gradients(model);
  // "does not depend on any trainable parameter", saying so when only the recorded stops
  // (.detach(), torch.no_grad()) cut it off.
  auto independent = [&](const ir::Value* loss) {
    const bool stopped = !stops.values.empty() && dependent_values(g, params, {}).count(loss);
    return Error("loss '" + loss->name + "' does not depend on any trainable parameter" +
                 (stopped ? std::string(": every path from one to it goes through a .detach() "
                                        "or a torch.no_grad() block")
                          : std::string()));
  };
  const std::set<const ir::Value*> depends = dependent_values(g, params, stops);
  // Every loss alone must reach a parameter (torch's backward of several losses fails
  // the same way when one does not require grad).
  if (losses.size() > 1) {
    for (ir::Value* loss : losses) {
      if (!depends.count(loss)) throw independent(loss);
    }
  }
  if (!stops.recorded) {
    if (const ir::Node* n = lost_detach(g, depends)) {
      throw Error("node " + n->label() +
                  " computes a + (b - a), the form torch.onnx.export leaves of a "
                  "straight-through estimator a + (b - a).detach() whose .detach() it drops "
                  "(PyTorch's gradient goes to a alone); export with ampc.export, which "
                  "records .detach() and torch.no_grad()");
    }
  }
  std::vector<SeededOutput> seeded;
  for (ir::Value* loss : losses) seeded.push_back({loss, loss_seed(g, loss, seed_value)});
  const std::vector<ir::Value*> grads = gradients_of(g, seeded, params, stops);
  import_ampc_domain_if_used(model, forward_nodes);

  std::vector<ParameterGradient> result;
  for (size_t i = 0; i < params.size(); ++i) {
    if (grads[i]) result.push_back({params[i], grads[i]});
  }
  if (result.empty()) throw independent(losses[0]);
  return result;
}

}  // namespace ampc::passes
