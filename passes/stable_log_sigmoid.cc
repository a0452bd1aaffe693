#include "passes/stable_log_sigmoid.h"

#include <string>
#include <vector>

#include "ir/node_match.h"
#include "passes/autodiff/grad_builder.h"

namespace ampc::passes {
namespace {

using ir::Node;
using ir::Value;

// The Sigmoid's input when `v` is Sigmoid(x) of the same type as `like`.
Value* sigmoid_input(const Value* v, const Value* like) {
  const Node* s = v ? v->producer : nullptr;
  if (!ir::is_onnx_op(s, "Sigmoid") || s->inputs.empty() || !s->inputs[0]) return nullptr;
  return v->type == like->type ? s->inputs[0] : nullptr;
}

bool is_one(const Value* v) {
  if (!v || !v->initializer || v->initializer->numel() != 1) return false;
  const auto value = ir::float_scalar(*v->initializer);
  return value && *value == 1.0;
}

}  // namespace

int stable_log_sigmoid(ir::Model& model) {
  ir::Graph& g = *model.graph;
  std::vector<Node*> logs;
  for (const auto& n : g.nodes) {
    if (ir::is_onnx_op(n.get(), "Log") && n->inputs.size() == 1 && n->inputs[0] && n->outputs[0] &&
        n->outputs[0]->type.is_static())
      logs.push_back(n.get());
  }
  int rewritten = 0;
  for (Node* log : logs) {
    const Value* out = log->outputs[0];
    Value* arg = log->inputs[0];
    Value* x = sigmoid_input(arg, out);  // log(sigmoid(x)) = -softplus(-x)
    bool complement = false;             // log(1 - sigmoid(x)) = -softplus(x)
    const Node* sub = arg->producer;
    if (!x && ir::is_onnx_op(sub, "Sub") && sub->inputs.size() == 2 && is_one(sub->inputs[0])) {
      x = sigmoid_input(sub->inputs[1], out);
      complement = x != nullptr;
    }
    if (!x) continue;
    const size_t first_new = g.nodes.size();
    autodiff::GradBuilder b(g, log->name + "/softplus");
    Value* s = b.op("Softplus", {complement ? x : b.op("Neg", {x}, x->type)}, x->type);
    Value* result = b.op("Neg", {s}, out->type);
    ir::replace_by_appended(g, log, first_new, result);
    ++rewritten;
  }
  return rewritten;
}

}  // namespace ampc::passes
