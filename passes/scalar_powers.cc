#include "passes/scalar_powers.h"

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "passes/autodiff/grad_builder.h"
#include "passes/constant_folding.h"

namespace ampc::passes {
namespace {

using ir::Node;
using ir::Value;

// The exponent's value when it is a constant of one element (float or integer): an initializer
// whose data does not change (not training state, a written buffer or a graph input).
std::optional<double> constant_exponent(const Value* p, const std::set<const Value*>& variable) {
  const ir::Tensor* data = fixed_data(p, variable);
  if (!data || data->numel() != 1) return std::nullopt;
  if (const auto f = ir::float_scalar(*data)) return f;
  if (const auto i = ir::int_values(*data)) return static_cast<double>(i->front());
  return std::nullopt;
}

bool is_candidate(const Node& n) {
  if (!n.domain.empty() || n.op_type != "Pow" || n.inputs.size() != 2 || n.outputs.size() != 1)
    return false;
  const Value* x = n.inputs[0];
  const Value* y = n.outputs[0];
  if (!x || !y || !ir::has_static_types(n)) return false;
  const DType t = x->type.dtype;
  // The output as the base (no broadcast by a [1]-shaped exponent).
  return (t == DType::kFloat32 || t == DType::kFloat64) && y->type == x->type;
}

// x^p by PyTorch's special case for p; null when p has none.
Value* special_power(autodiff::GradBuilder& b, Value* x, double p) {
  const ir::TensorType t = x->type;
  auto reciprocal = [&](Value* v) { return b.op("Div", {b.scalar(1.0, t.dtype), v}, t); };
  if (p == 1.0) return b.op("Identity", {x}, t);
  if (p == 2.0) return b.mul(x, x);
  if (p == 3.0) return b.mul(b.mul(x, x), x);
  if (p == -1.0) return reciprocal(x);
  if (p == -2.0) return reciprocal(b.mul(x, x));
  if (p == 0.5) return b.op("Sqrt", {x}, t);
  if (p == -0.5) return reciprocal(b.op("Sqrt", {x}, t));
  return nullptr;
}

}  // namespace

int expand_scalar_powers(ir::Model& model) {
  ir::Graph& g = *model.graph;
  std::vector<Node*> pows;
  for (const auto& n : g.nodes) {
    if (is_candidate(*n)) pows.push_back(n.get());
  }
  const std::set<const Value*> variable = variable_values(model);
  int rewritten = 0;
  for (Node* pow : pows) {
    const std::optional<double> p = constant_exponent(pow->inputs[1], variable);
    if (!p) continue;
    const size_t first_new = g.nodes.size();
    std::string prefix = pow->name + std::string(kPowerInfix);
    prefix.pop_back();  // the builder's names add the '/'
    autodiff::GradBuilder b(g, prefix);
    Value* result = special_power(b, pow->inputs[0], *p);
    if (!result) continue;  // nothing appended
    ir::replace_by_appended(g, pow, first_new, result);
    ++rewritten;
  }
  return rewritten;
}

}  // namespace ampc::passes
