#include "passes/linear_as_gemm.h"

#include <algorithm>
#include <string>
#include <vector>

#include "ir/node_match.h"
#include "passes/autodiff/grad_builder.h"
#include "passes/cast_cleanup.h"

namespace ampc::passes {
namespace {

using ir::Node;
using ir::Value;

bool is_16bit(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16;
}

const std::vector<int64_t>* static_shape(const Value* v) {
  return v && v->type.is_static() ? &*v->type.shape : nullptr;
}

// A 1-D parameter of the model, or a Cast of one: the bias of a linear layer as autocast
// leaves it (passes/autocast.cc, is_linear_bias_add).
bool is_parameter_row(const Value* b) {
  if (b && ir::is_onnx_op(b->producer, "Cast")) b = b->producer->inputs[0];
  return b && b->is_initializer() && b->from_model && b->initializer->dims.size() == 1;
}

// One linear layer found: Add(MatMul(x, W), b).
struct Linear {
  Node* matmul = nullptr;
  Node* add = nullptr;
  Value* bias = nullptr;
};

// What a node is: not a 16-bit linear layer, one to rewrite, or one whose input has rank 4 or
// more (left as it is: torch rounds the product and the sum apart there too).
enum class Found { kNo, kRewrite, kHigherRank };

Found find_linear(const ir::Model& model, Node* add, Linear& out) {
  if (!ir::is_onnx_op(add, "Add") || add->inputs.size() != 2 || add->outputs.size() != 1)
    return Found::kNo;
  for (int k = 0; k < 2; ++k) {
    Value* y = add->inputs[k];
    Value* b = add->inputs[1 - k];
    if (!y || !b || y == b || !ir::is_onnx_op(y->producer, "MatMul") || y->uses.size() != 1 ||
        is_pinned_value(model, y))
      continue;
    const DType t = y->type.dtype;
    const Node* mm = y->producer;
    const auto* xs = static_shape(mm->inputs[0]);
    const auto* ws = static_shape(mm->inputs[1]);
    const auto* bs = static_shape(b);
    if (!is_16bit(t) || b->type.dtype != t || add->outputs[0]->type.dtype != t || !xs || !ws ||
        !bs || xs->size() < 3 || ws->size() != 2 || bs->size() != 1 || (*bs)[0] != (*ws)[1] ||
        !is_parameter_row(b))
      continue;
    out = {y->producer, add, b};
    return xs->size() == 3 ? Found::kRewrite : Found::kHigherRank;
  }
  return Found::kNo;
}

// The labels of the pair as they were, for the report.
struct Labels {
  std::string matmul, add, add_name;
};

void update_report(AutocastReport& report, const Labels& was, const std::string& gemm_label,
                   const std::vector<const Node*>& reshapes, DType t) {
  std::erase_if(report.nodes, [&](const auto& d) { return d.node == was.add; });
  for (auto& d : report.nodes) {
    if (d.node != was.matmul) continue;
    d.node = gemm_label;
    d.op_type = "Gemm";
    d.rule += "; with its bias Add '" + was.add_name +
              "' as one Gemm over the rows, rounded once (torch's linear, linear_as_gemm.h)";
  }
  for (const Node* r : reshapes) {
    report.nodes.push_back(
        {r->label(), r->op_type, t, "the rows of a linear layer's Gemm (linear_as_gemm.h)"});
  }
}

void rewrite(ir::Model& model, const Linear& l, AutocastReport* report) {
  ir::Graph& g = *model.graph;
  Value* x = l.matmul->inputs[0];
  Value* w = l.matmul->inputs[1];
  Value* old = l.add->outputs[0];
  const auto& xs = *x->type.shape;
  const int64_t n = (*w->type.shape)[1];
  const DType t = old->type.dtype;
  const std::string name = l.matmul->name;
  const Labels was{l.matmul->label(), l.add->label(), l.add->name};
  const size_t first_new = g.nodes.size();
  autodiff::GradBuilder b(g, name.empty() ? "linear" : name);
  Value* rows = b.reshape(x, {xs[0] * xs[1], xs[2]});
  Value* product = b.op("Gemm", {rows, w, l.bias}, {t, std::vector<int64_t>{xs[0] * xs[1], n}});
  Value* y = b.reshape(product, {xs[0], xs[1], n});
  Node* gemm = product->producer;
  std::vector<const Node*> reshapes = {rows->producer, y->producer};
  // In the Add's place: x, W and the bias (whose Cast autocast put before the Add) exist there.
  g.move_tail_before(first_new, l.add);
  ir::replace_all_uses(old, y);
  std::replace(g.outputs.begin(), g.outputs.end(), old, y);
  for (auto& u : model.state_updates) {
    if (u.source == old) u.source = y;
  }
  const std::string old_name = old->name;
  g.remove_node(l.add);
  g.remove_node(l.matmul);
  g.rename_value(y, old_name);
  // The same GEMM under the user's node name: profiles and reports keep pointing at it.
  gemm->name = name.empty() ? gemm->name : name;
  if (report) update_report(*report, was, gemm->label(), reshapes, t);
}

}  // namespace

int linear_layers_as_gemm(ir::Model& model, AutocastReport* report) {
  ir::Graph& g = *model.graph;
  std::vector<Linear> found;
  for (const auto& n : g.nodes) {
    Linear l;
    const Found f = find_linear(model, n.get(), l);
    if (f == Found::kRewrite) found.push_back(l);
    if (f != Found::kHigherRank || !report) continue;
    for (auto& d : report->nodes) {
      if (d.node == n->label())
        d.rule +=
            "; input of rank > 3: product and sum rounded apart, as torch's linear there "
            "(matmul, then add_; linear_as_gemm.h)";
    }
  }
  for (const Linear& l : found) rewrite(model, l, report);
  return static_cast<int>(found.size());
}

}  // namespace ampc::passes
