#include "passes/summed_matmuls.h"

#include <set>
#include <string>
#include <vector>

#include "ir/node_match.h"
#include "passes/autodiff/autodiff.h"
#include "passes/autodiff/grad_builder.h"
#include "passes/dead_code_elimination.h"
#include "passes/sum_trees.h"

namespace ampc::passes {
namespace {

using ir::Node;
using ir::Value;

bool is_wide_float(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64;
}

bool is_16_bit_float(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16;
}

bool is_matrix(const Value* v) {
  return v && v->type.is_static() && v->type.shape->size() == 2;
}

// An Add of two float operands of its output's type (no broadcast). 16-bit sums are rewritten
// only where a recurrent layer's gradient wrote every term (from_one_recurrent_layer).
bool is_sum(const Node* n) {
  if (!is_plain_sum(n)) return false;
  const DType d = n->outputs[0]->type.dtype;
  return is_wide_float(d) || is_16_bit_float(d);
}

// A term p^T b: p [k, m], b [k, n], the product [m, n] of p's type, computed by `product`.
struct Term {
  Value* p = nullptr;
  Value* b = nullptr;
  const Node* product = nullptr;
};

// The operands p, b of a product p^T b: MatMul(Transpose(p), b), or Gemm(p, b) with transA
// and without C (how autodiff writes a Linear layer's weight gradient).
bool transposed_product(const Node* n, Value** p, Value** b) {
  if (!n || n->inputs.size() != 2 || n->outputs.size() != 1) return false;
  if (ir::is_onnx_op(n, "Gemm")) {
    auto int_attr = [n](const char* name) {
      const ir::Attribute* a = n->attr(name);
      return a ? a->i : 0;
    };
    const ir::Attribute* alpha = n->attr("alpha");
    if (int_attr("transA") != 1 || int_attr("transB") != 0 || (alpha && alpha->f != 1.0f))
      return false;
    *p = n->inputs[0];
    *b = n->inputs[1];
    return true;
  }
  if (!ir::is_onnx_op(n, "MatMul")) return false;
  const Node* t = n->inputs[0] ? n->inputs[0]->producer : nullptr;
  if (!ir::is_onnx_op(t, "Transpose") || t->inputs.size() != 1) return false;
  const ir::Attribute* perm = t->attr("perm");
  if (perm && perm->ints != std::vector<int64_t>{1, 0}) return false;
  *p = t->inputs[0];
  *b = n->inputs[1];
  return true;
}

bool as_term(const Value* v, Term* term) {
  Value *p = nullptr, *b = nullptr;
  if (!transposed_product(v->producer, &p, &b)) return false;
  if (!is_matrix(p) || !is_matrix(b) || !is_matrix(v)) return false;
  const auto &ps = *p->type.shape, &bs = *b->type.shape, &ys = *v->type.shape;
  const DType d = v->type.dtype;
  if (p->type.dtype != d || b->type.dtype != d || ps[0] != bs[0]) return false;
  if (ps[1] != ys[0] || bs[1] != ys[1]) return false;
  *term = {p, b, v->producer};
  return true;
}

// The terms of the Add tree under `root`, in its operands' order; empty when one is not a
// product p^T b or is read elsewhere too.
std::vector<Term> terms_of(Node* root, const std::set<const Value*>& outside) {
  std::vector<Term> terms;
  for (Value* v : sum_terms(root, is_sum, outside)) {
    Term t;
    if (!as_term(v, &t)) return {};
    terms.push_back(t);
  }
  return terms;
}

// Whether stacking pays: the copies of the operands (K * (m + n) elements) no larger than the
// partial sums the additions would read and write (one [m, n] per term).
bool worth_stacking(const std::vector<Term>& terms) {
  if (terms.size() < 2) return false;
  const int64_t m = (*terms[0].p->type.shape)[1], n = (*terms[0].b->type.shape)[1];
  int64_t k = 0;
  for (const Term& t : terms) {
    if ((*t.p->type.shape)[1] != m || (*t.b->type.shape)[1] != n) return false;
    k += (*t.p->type.shape)[0];
  }
  return k * (m + n) <= static_cast<int64_t>(terms.size()) * m * n;
}

// Whether the gradient of one lowered LSTM, GRU or RNN node (ir::Model::recurrent_lowerings)
// computed every term: a weight's gradient that PyTorch's RNN call sums over the time steps
// with one rounding. Elsewhere a 16-bit sum keeps autocast's per-op roundings (autograd adds a
// weight's gradients in the autocast dtype, as in a loop over an LSTMCell).
bool from_one_recurrent_layer(const ir::Model& model, const std::vector<Term>& terms) {
  for (const ir::Model::RecurrentLowering& l : model.recurrent_lowerings) {
    const std::string prefix = gradient_name_prefix(l.node_prefix);
    bool all = true;
    for (const Term& t : terms) all = all && t.product->name.starts_with(prefix);
    if (all) return true;
  }
  return false;
}

void stack_terms(ir::Graph& g, Node* root, const std::vector<Term>& terms) {
  std::vector<Value*> ps, bs;
  int64_t k = 0;
  for (const Term& t : terms) {
    ps.push_back(t.p);
    bs.push_back(t.b);
    k += (*t.p->type.shape)[0];
  }
  Value* y = root->outputs[0];
  const DType d = y->type.dtype;
  const int64_t m = (*y->type.shape)[0], n = (*y->type.shape)[1];
  const size_t first_new = g.nodes.size();
  autodiff::GradBuilder b(g, root->name + "/stacked");
  using autodiff::attrs;
  auto matrix = [d](int64_t rows, int64_t cols) {
    ir::TensorType t;
    t.dtype = d;
    t.shape = std::vector<int64_t>{rows, cols};
    return t;
  };
  auto concat = [&](const std::vector<Value*>& parts, int64_t cols) {
    return b.op("Concat", parts, matrix(k, cols), attrs(ir::Attribute::make_int("axis", 0)));
  };
  Value* p = concat(ps, m);
  Value* pt = b.op("Transpose", {p}, matrix(m, k), attrs(ir::Attribute::make_ints("perm", {1, 0})));
  Value* sum = b.op("MatMul", {pt, concat(bs, n)}, matrix(m, n));
  ir::replace_by_appended(g, root, first_new, sum);
}

}  // namespace

int stack_summed_matmuls(ir::Model& model) {
  ir::Graph& g = *model.graph;
  const std::set<const Value*> outside = kept_values(model);  // read after the step
  std::vector<Node*> roots;
  for (const auto& n : g.nodes) {
    if (is_sum_root(n.get(), is_sum, outside)) roots.push_back(n.get());
  }
  int rewritten = 0;
  for (Node* root : roots) {
    const std::vector<Term> terms = terms_of(root, outside);
    if (!worth_stacking(terms)) continue;
    const DType d = root->outputs[0]->type.dtype;
    if (!is_wide_float(d) && !from_one_recurrent_layer(model, terms)) continue;
    stack_terms(g, root, terms);
    ++rewritten;
  }
  return rewritten;
}

}  // namespace ampc::passes
