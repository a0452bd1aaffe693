#include "passes/autodiff/gradient_op.h"

#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "passes/autodiff/autodiff.h"
#include "passes/autodiff/grad_builder.h"

namespace ampc::passes {
namespace {

std::vector<std::string> string_list(const ir::Node& n, const char* attr_name) {
  const ir::Attribute* a = n.attr(attr_name);
  return a ? a->strings : std::vector<std::string>{};
}

// The value `name` of xs/zs, which must also be input `index` of the node.
ir::Value* named_input(const ir::Node& n, const std::string& name, size_t index) {
  ir::Value* v = n.owner->find_value(name);
  if (!v) throw Error("node " + n.label() + ": the graph has no value '" + name + "'");
  if (index >= n.inputs.size() || n.inputs[index] != v) {
    throw Error("node " + n.label() + ": input " + std::to_string(index) + " must be '" + name +
                "' as xs/zs name it (feeding other values to Gradient is not supported)");
  }
  return v;
}

void expand(ir::Model& model, ir::Node* n) {
  ir::Graph& g = *model.graph;
  const std::vector<std::string> xs_names = string_list(*n, "xs");
  const std::vector<std::string> zs_names = string_list(*n, "zs");
  const ir::Attribute* y_attr = n->attr("y");
  if (!y_attr || xs_names.empty())
    throw Error("node " + n->label() + ": needs attributes y and xs");
  if (n->inputs.size() != xs_names.size() + zs_names.size()) {
    throw Error("node " + n->label() + ": has " + std::to_string(n->inputs.size()) +
                " inputs for " + std::to_string(xs_names.size() + zs_names.size()) +
                " names in xs and zs");
  }
  std::vector<ir::Value*> xs;
  for (size_t i = 0; i < xs_names.size(); ++i) xs.push_back(named_input(*n, xs_names[i], i));
  for (size_t i = 0; i < zs_names.size(); ++i) named_input(*n, zs_names[i], xs_names.size() + i);
  ir::Value* y = g.find_value(y_attr->s);
  if (!y)
    throw Error("node " + n->label() + ": y names '" + y_attr->s + "', no value of the graph");
  if (!is_float(y->type.dtype) || !y->type.is_static()) {
    throw Error("node " + n->label() + ": y '" + y->name +
                "' must be a float tensor of static "
                "shape, not " +
                y->type.str());
  }

  const size_t first_new = g.nodes.size();
  const std::string prefix = "gradient/" + (n->name.empty() ? y->name : n->name);
  autodiff::GradBuilder b(g, prefix);
  const std::vector<ir::Value*> grads =
      gradients_of(g, y, b.filled(1.0, y->type), xs, stop_gradients(model));
  // Each output keeps its value (and name): an Identity of the gradient now produces it.
  for (size_t k = 0; k < n->outputs.size() && k < xs.size(); ++k) {
    ir::Value* out = n->outputs[k];
    if (!out) continue;
    ir::Value* grad = grads[k] ? grads[k] : b.filled(0.0, xs[k]->type);
    ir::set_output(n, k, nullptr);
    g.add_node("Identity", {grad}, {out}, prefix + "/output_" + std::to_string(k));
  }
  g.remove_node(n);
  import_ampc_domain_if_used(model, first_new - 1);
}

// Restores topological order after the gradient nodes were appended at the end: repeatedly
// takes, in their current order, the nodes whose inputs are all available.
void sort_topologically(ir::Graph& g) {
  std::set<const ir::Value*> available;
  for (const auto& v : g.values) {
    if (!v->producer) available.insert(v.get());
  }
  std::vector<std::unique_ptr<ir::Node>> pending = std::move(g.nodes);
  g.nodes.clear();
  while (!pending.empty()) {
    const size_t before = pending.size();
    std::vector<std::unique_ptr<ir::Node>> rest;
    for (auto& n : pending) {
      bool ready = true;
      for (const ir::Value* in : n->inputs) {
        // Values of enclosing graphs (never here: this is the main graph) count as available.
        ready &= !in || in->owner != &g || available.count(in);
      }
      if (!ready) {
        rest.push_back(std::move(n));
        continue;
      }
      for (const ir::Value* out : n->outputs) available.insert(out);
      g.nodes.push_back(std::move(n));
    }
    pending = std::move(rest);
    if (pending.size() == before)
      throw Error("internal: node " + pending[0]->label() +
                  " is part of a cycle after the "
                  "Gradient expansion");
  }
}

}  // namespace

int expand_gradient_ops(ir::Model& model) {
  std::vector<ir::Node*> gradient_nodes;
  for (const auto& n : model.graph->nodes) {
    if (n->op_type == "Gradient" && n->domain == kOnnxTrainingDomain)
      gradient_nodes.push_back(n.get());
  }
  // Sorted after each expansion: the next reverse sweep needs topological order.
  for (ir::Node* n : gradient_nodes) {
    expand(model, n);
    sort_topologically(*model.graph);
  }
  return static_cast<int>(gradient_nodes.size());
}

}  // namespace ampc::passes
