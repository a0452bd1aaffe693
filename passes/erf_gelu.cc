#include "passes/erf_gelu.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace ampc::passes {
namespace {

using ir::Node;
using ir::Value;

bool is_op(const Node* n, const char* op) {
  return n && n->domain.empty() && n->op_type == op && !n->outputs.empty() && n->outputs[0];
}

std::optional<double> constant_of(const Value* v) {
  if (!v || !v->initializer || v->initializer->numel() != 1) return std::nullopt;
  return ir::float_scalar(*v->initializer);
}

bool is_constant(const Value* v, double want, double tolerance) {
  const auto c = constant_of(v);
  return c && std::abs(*c - want) <= tolerance * want;
}

// The one node that reads `v`, when `v` is an intermediate of nothing else.
Node* only_reader(const Value* v, const ir::Graph& g) {
  if (!v || v->uses.size() != 1) return nullptr;
  if (std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end()) return nullptr;
  return v->uses[0].node;
}

// For a binary op reading `v` and a constant, the constant's side: the other input when `v`
// is one of the two inputs.
const Value* other_input(const Node* n, const Value* v) {
  if (n->inputs.size() != 2) return nullptr;
  if (n->inputs[0] == v) return n->inputs[1];
  if (n->inputs[1] == v) return n->inputs[0];
  return nullptr;
}

// x when `n` is x / sqrt(2), or x * (1 / sqrt(2)) with the constant on either side.
Value* scaled_by_inverse_sqrt2(const Node* n) {
  if (n->inputs.size() != 2) return nullptr;
  if (is_op(n, "Div"))
    return is_constant(n->inputs[1], std::sqrt(2.0), 1e-6) ? n->inputs[0] : nullptr;
  if (!is_op(n, "Mul")) return nullptr;
  for (int k = 0; k < 2; ++k) {
    if (is_constant(n->inputs[1 - k], 1.0 / std::sqrt(2.0), 1e-6)) return n->inputs[k];
  }
  return nullptr;
}

std::optional<ErfGelu> match_from(Node* scale, const ir::Graph& g) {
  Value* x = scaled_by_inverse_sqrt2(scale);
  if (!x) return std::nullopt;
  Node* erf = only_reader(scale->outputs[0], g);
  if (!is_op(erf, "Erf")) return std::nullopt;
  Node* plus_one = only_reader(erf->outputs[0], g);
  if (!is_op(plus_one, "Add") || !is_constant(other_input(plus_one, erf->outputs[0]), 1.0, 0))
    return std::nullopt;
  Node* times_x = only_reader(plus_one->outputs[0], g);
  if (!is_op(times_x, "Mul") || other_input(times_x, plus_one->outputs[0]) != x)
    return std::nullopt;
  Node* half = only_reader(times_x->outputs[0], g);
  if (!is_op(half, "Mul") || !is_constant(other_input(half, times_x->outputs[0]), 0.5, 0))
    return std::nullopt;
  // Each result of the same type as x: no broadcasting, no promotion inside the chain.
  for (const Node* n : {scale, erf, plus_one, times_x, half}) {
    if (n->outputs.size() != 1 || n->outputs[0]->type != x->type) return std::nullopt;
  }
  return ErfGelu{x, {scale, erf, plus_one, times_x, half}};
}

}  // namespace

std::vector<ErfGelu> find_erf_gelus(const ir::Graph& g) {
  std::vector<ErfGelu> found;
  for (const auto& n : g.nodes) {
    if (auto m = match_from(n.get(), g)) found.push_back(std::move(*m));
  }
  return found;
}

}  // namespace ampc::passes
