#include "passes/weight_copies.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/dtype.h"
#include "base/error.h"
#include "passes/cpu_evaluation.h"

namespace ampc::passes {
namespace {

// Cast(p) of a state-updated fp32 initializer `p` (a trained parameter) to fp16 or bf16, whose
// result is not a graph output (its readers can read the copy instead).
bool casts_parameter_down(const ir::Graph& g, const ir::Node& n,
                          const std::unordered_map<const ir::Value*, ir::Value*>& source_of) {
  if (n.op_type != "Cast" || !(n.domain.empty() || n.domain == "ai.onnx")) return false;
  if (n.inputs.size() != 1 || !n.inputs[0] || n.outputs.size() != 1 || !n.outputs[0]) return false;
  const ir::Value* p = n.inputs[0];
  const DType to = n.outputs[0]->type.dtype;
  return p->is_initializer() && source_of.count(p) && p->type.dtype == DType::kFloat32 &&
         (to == DType::kFloat16 || to == DType::kBFloat16) && p->type.is_static() &&
         std::find(g.outputs.begin(), g.outputs.end(), n.outputs[0]) == g.outputs.end();
}

// The copy's initial value: the Cast evaluated by the CPU backend's Cast on the initial data.
std::unique_ptr<ir::Tensor> initial_copy(const ir::Model& model, const ir::Node& cast) {
  auto values =
      evaluate_on_cpu(cast, model.opset_version(cast.domain).value_or(0), CpuInputs::kInitializers);
  if (!values || values->size() != 1)
    throw Error("internal: cannot cast the initial value of '" + cast.inputs[0]->name + "'");
  return std::make_unique<ir::Tensor>(std::move((*values)[0]));
}

std::string fresh_name(const ir::Graph& g, std::string name) {
  while (g.find_value(name)) name += "_";
  return name;
}

}  // namespace

int keep_weight_copies(ir::Model& model) {
  ir::Graph& g = *model.graph;
  std::unordered_map<const ir::Value*, ir::Value*> source_of;
  for (const auto& u : model.state_updates) source_of[u.target] = u.source;
  std::vector<ir::Node*> casts;
  for (const auto& n : g.nodes) {
    if (casts_parameter_down(g, *n, source_of)) casts.push_back(n.get());
  }
  for (ir::Node* cast : casts) {
    ir::Value* p = cast->inputs[0];
    ir::Value* low = cast->outputs[0];
    const ir::TensorType type = low->type;
    const std::string name =
        fresh_name(g, p->name + std::string(kCopySuffix) + std::string(dtype_name(type.dtype)));
    ir::Value* copy = g.add_value(name, type);
    copy->initializer = initial_copy(model, *cast);
    copy->initializer->name = name;
    g.initializers.push_back(copy);
    ir::replace_all_uses(low, copy);
    const std::string cast_name = cast->name;
    std::vector<ir::Attribute> attributes = std::move(cast->attributes);
    g.remove_node(cast);

    // The copy's new value, next to the parameter's: the cast of what the parameter becomes,
    // under the same skip-step guard (Where(skip, old, new) keeps the old bits).
    ir::Value* source = source_of.at(p);
    ir::Node* guard = source->producer;
    const bool guarded =
        guard && guard->op_type == "Where" && guard->inputs.size() == 3 && guard->inputs[1] == p;
    ir::Value* to_cast = guarded ? guard->inputs[2] : source;
    const ir::Node* after = guarded ? guard : source->producer;
    ir::Value* cast_value = g.add_value(fresh_name(g, name + "_new"), type);
    ir::Node* again = g.insert_node_after(after, "Cast", {to_cast}, {cast_value}, cast_name);
    again->attributes = std::move(attributes);
    again->phase = ir::Phase::kOptimizer;
    ir::Value* new_copy = cast_value;
    if (guarded) {
      new_copy = g.add_value(fresh_name(g, name + std::string(kCopyGuardSuffix)), type);
      ir::Node* where = g.insert_node_after(again, "Where", {guard->inputs[0], copy, cast_value},
                                            {new_copy}, cast_name + std::string(kCopyGuardSuffix));
      where->phase = ir::Phase::kOptimizer;
    }
    model.state_updates.push_back({copy, new_copy});
    model.rounded_copies.push_back({copy, p});
  }
  return static_cast<int>(casts.size());
}

}  // namespace ampc::passes
