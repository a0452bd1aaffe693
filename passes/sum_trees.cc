#include "passes/sum_trees.h"

#include "ir/node_match.h"

namespace ampc::passes {
namespace {

bool only_reader_is_the_sum(const ir::Value* v, const std::set<const ir::Value*>& kept) {
  return v->uses.size() == 1 && !kept.count(v);
}

}  // namespace

bool is_plain_sum(const ir::Node* n) {
  if (!ir::is_onnx_op(n, "Add") || n->inputs.size() != 2 || n->outputs.size() != 1) return false;
  const ir::Value* y = n->outputs[0];
  if (!y || !y->type.is_static()) return false;
  for (const ir::Value* x : n->inputs) {
    if (!x || x->type != y->type) return false;
  }
  return true;
}

bool is_sum_root(const ir::Node* n, const SumTest& is_sum, const std::set<const ir::Value*>& kept) {
  if (!is_sum(n)) return false;
  const ir::Value* y = n->outputs[0];
  return !(only_reader_is_the_sum(y, kept) && is_sum(y->uses[0].node));
}

std::vector<ir::Value*> sum_terms(ir::Node* root, const SumTest& is_sum,
                                  const std::set<const ir::Value*>& kept) {
  std::vector<ir::Value*> terms;
  std::vector<ir::Value*> stack = {root->inputs[1], root->inputs[0]};
  while (!stack.empty()) {
    ir::Value* v = stack.back();
    stack.pop_back();
    if (!only_reader_is_the_sum(v, kept)) return {};
    if (is_sum(v->producer)) {
      stack.push_back(v->producer->inputs[1]);
      stack.push_back(v->producer->inputs[0]);
      continue;
    }
    terms.push_back(v);
  }
  return terms;
}

}  // namespace ampc::passes
