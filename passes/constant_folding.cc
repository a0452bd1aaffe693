#include "passes/constant_folding.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string>

#include "base/error.h"
#include "ops/op_info.h"
#include "passes/buffer_updates.h"
#include "passes/cpu_evaluation.h"
#include "passes/model_metadata.h"

namespace ampc::passes {
namespace {

using ir::Tensor;

// Float data is folded only in tiny tensors (scale factors, the float shape arithmetic torch
// writes) and only through ops whose float32 and float64 results every backend computes
// bit for bit: data movement, comparisons, and IEEE's correctly rounded +, -, *, /, sqrt
// (min, max, abs, neg, floor and ceil are exact). Other float math (exp, pow, reductions,
// ...) is left to the backends, so that it rounds as they do.
constexpr int64_t kMaxFloatElements = 16;

bool exact_on_floats(const ir::Node& n) {
  return ops::op_info(n.domain, n.op_type).exact_float;  // ops/op_table.cc
}

bool is_integer_data(DType t) {
  return is_integer(t) || t == DType::kBool;
}

// Whether a fold of `n` may read or write a tensor of `dtype` with `count` elements: integer
// data, or float data under the rule above.
bool foldable_data(const ir::Node& n, DType dtype, int64_t count) {
  if (is_integer_data(dtype)) return true;
  return (dtype == DType::kFloat32 || dtype == DType::kFloat64) && count <= kMaxFloatElements &&
         exact_on_floats(n);
}

// Each present input a constant initializer of foldable data, and none a model's float
// initializer: a parameter is never baked into a constant.
bool inputs_foldable(const ir::Node& n) {
  bool any = false;
  for (const ir::Value* v : n.inputs) {
    if (!v) continue;
    const Tensor* t = v->initializer.get();
    if (!t || (v->from_model && is_float(t->dtype)) || !foldable_data(n, t->dtype, t->numel()))
      return false;
    any = true;
  }
  return any;  // an op without inputs (a random generator) is not a constant
}

// Integer division (Div, Mod) by zero is left to run time: the backend that runs the node
// decides what it gives.
bool divides_by_zero(const ir::Node& n) {
  if ((n.op_type != "Div" && n.op_type != "Mod") || n.inputs.size() != 2 || !n.inputs[1])
    return false;
  const Tensor& d = *n.inputs[1]->initializer;
  if (!is_integer_data(d.dtype)) return false;
  // An integer is zero when all its bytes are.
  const size_t width = dtype_size(d.dtype);
  for (size_t k = 0; width > 0 && k + width <= d.bytes.size(); k += width) {
    if (std::all_of(d.bytes.begin() + k, d.bytes.begin() + k + width,
                    [](uint8_t b) { return b == 0; }))
      return true;
  }
  return false;
}

// Whether a result of `n` may become an initializer. `count` is checked before evaluating too
// (from the output's static type, when it has one), so that a result too large to keep is
// not computed.
bool result_foldable(const ir::Node& n, DType dtype, int64_t count, int64_t max_elements) {
  return count <= max_elements && foldable_data(n, dtype, count);
}

bool typed_outputs_foldable(const ir::Node& n, int64_t max_elements) {
  return std::all_of(n.outputs.begin(), n.outputs.end(), [&](const ir::Value* out) {
    if (!out || !out->type.is_static() || out->type.dtype == DType::kUndefined) return true;
    return result_foldable(n, out->type.dtype, ir::shape_numel(*out->type.shape), max_elements);
  });
}

// Every output of `n` folded, or nullopt. The node's semantics are the CPU backend's
// (cpu_evaluation.h); which nodes are evaluated is decided here. A Constant always is; Shape
// and Size from the static type of their input (whatever produces it); anything else only on
// constant, foldable inputs (above). fold_constants has already left out nodes that read a
// variable value.
std::optional<std::vector<Tensor>> evaluate(const ir::Node& n, const ir::Model& model,
                                            int64_t max_elements) {
  if (!n.domain.empty() || ops::op_info(n.domain, n.op_type).random) return std::nullopt;
  const int64_t opset = model.opset_version(n.domain).value_or(0);
  if (n.op_type == "Constant") return evaluate_on_cpu(n, opset, CpuInputs::kInitializers);
  if (n.op_type == "Shape" || n.op_type == "Size") {
    if (n.inputs.size() != 1 || !n.inputs[0] || !n.inputs[0]->type.is_static()) return std::nullopt;
    return evaluate_on_cpu(n, opset, CpuInputs::kShapesOnly);
  }
  if (!inputs_foldable(n) || divides_by_zero(n) || !typed_outputs_foldable(n, max_elements))
    return std::nullopt;
  auto values = evaluate_on_cpu(n, opset, CpuInputs::kInitializers);
  if (!values) return std::nullopt;
  for (const Tensor& t : *values) {
    if (!result_foldable(n, t.dtype, t.numel(), max_elements)) return std::nullopt;
  }
  return values;
}

}  // namespace

std::set<const ir::Value*> variable_values(const ir::Model& model) {
  const ir::Graph& g = *model.graph;
  std::set<const ir::Value*> variable;
  for (const auto& u : model.state_updates) variable.insert(u.target);
  for (const std::string& name : metadata_lines(model, kBufferUpdatesKey)) {
    if (const ir::Value* v = g.find_value(name)) variable.insert(v);
  }
  for (const ir::Value* v : g.inputs) variable.insert(v);
  return variable;
}

const ir::Tensor* fixed_data(const ir::Value* v, const std::set<const ir::Value*>& variable) {
  return v && v->initializer && !variable.count(v) ? &*v->initializer : nullptr;
}

int fold_constants(ir::Model& model, const ConstantFoldingOptions& options) {
  ir::Graph& g = *model.graph;
  const std::set<const ir::Value*> variable = variable_values(model);
  int folded = 0;
  for (size_t i = 0; i < g.nodes.size();) {
    ir::Node* n = g.nodes[i].get();
    const bool reads_variable = std::any_of(n->inputs.begin(), n->inputs.end(),
                                            [&](const ir::Value* v) { return variable.count(v); });
    // Shape and Size read only the (static) type of their input, never its data.
    const bool type_only = n->op_type == "Shape" || n->op_type == "Size";
    std::optional<std::vector<Tensor>> values =
        reads_variable && !type_only ? std::nullopt : evaluate(*n, model, options.max_elements);
    // A Constant always becomes an initializer (nothing is computed); computed results only
    // when small.
    const bool too_big = values && n->op_type != "Constant" &&
                         std::any_of(values->begin(), values->end(), [&](const Tensor& t) {
                           return t.numel() > options.max_elements;
                         });
    if (!values || too_big || values->size() != n->outputs.size()) {
      ++i;
      continue;
    }
    for (size_t k = 0; k < values->size(); ++k) {
      const ir::TensorType type{(*values)[k].dtype, (*values)[k].dims};
      const ir::Value* out = n->outputs[k];
      if (out->type.dtype != DType::kUndefined && out->type.dtype != type.dtype) {
        throw Error("node " + n->label() + " folds to " + type.str() + " but its output is typed " +
                    out->type.str());
      }
    }
    // The node goes; each output value becomes an initializer under the same name, so
    // every consumer and graph output keeps pointing at it.
    const std::vector<ir::Value*> outs = n->outputs;
    g.detach_node(n);
    for (size_t k = 0; k < values->size(); ++k) {
      ir::Value* out = outs[k];
      Tensor& value = (*values)[k];
      value.name = out->name;
      out->type = ir::TensorType{value.dtype, value.dims};
      out->initializer = std::make_unique<Tensor>(std::move(value));
      g.initializers.push_back(out);
    }
    ++folded;
  }
  return folded;
}

}  // namespace ampc::passes
