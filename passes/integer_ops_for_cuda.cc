#include "passes/integer_ops_for_cuda.h"

#include <set>
#include <string>
#include <vector>

#include "passes/autodiff/grad_builder.h"

namespace ampc::passes {
namespace {

using autodiff::GradBuilder;
using ir::Value;

bool int32_or_64(DType t) {
  return t == DType::kInt32 || t == DType::kInt64;
}

// The type of `a` and `b` broadcast together (numpy's rules), of `a`'s element type.
ir::TensorType broadcast_type(const Value* a, const Value* b) {
  std::vector<int64_t> x = *a->type.shape, y = *b->type.shape;
  if (x.size() < y.size()) x.insert(x.begin(), y.size() - x.size(), 1);
  if (y.size() < x.size()) y.insert(y.begin(), x.size() - y.size(), 1);
  for (size_t i = 0; i < x.size(); ++i) x[i] = x[i] == 1 ? y[i] : x[i];
  return {a->type.dtype, x};
}

// `a` where `a (compare) b` holds, else `b`: the larger (Greater) or smaller (Less) of the two.
Value* pick(GradBuilder& b, const std::string& compare, Value* x, Value* y) {
  const ir::TensorType type = broadcast_type(x, y);
  Value* first = b.op(compare, {x, y}, {DType::kBool, type.shape});
  return b.op("Where", {first, x, y}, type);
}

Value* clip(GradBuilder& b, const ir::Node& n) {
  Value* y = n.inputs[0];
  const DType t = y->type.dtype;
  auto bound = [&](size_t i, const char* attr) -> Value* {
    if (const ir::Attribute* a = n.attr(attr)) return b.scalar(a->f, t);  // before opset 11
    if (n.inputs.size() <= i || !n.inputs[i]) return nullptr;
    return n.inputs[i];
  };
  Value* lo = bound(1, "min");
  Value* hi = bound(2, "max");
  for (const Value* v : {lo, hi}) {
    if (v && (v->type.dtype != t || ir::shape_numel(*v->type.shape) != 1)) return nullptr;
  }
  const ir::TensorType flags{DType::kBool, y->type.shape};
  if (lo) {
    lo = b.reshape(lo, {});
    y = b.op("Where", {b.op("Less", {y, lo}, flags), lo, y}, y->type);
  }
  if (hi) {
    hi = b.reshape(hi, {});
    y = b.op("Where", {b.op("Greater", {y, hi}, flags), hi, y}, y->type);
  }
  return y == n.inputs[0] ? b.op("Identity", {y}, y->type) : y;
}

Value* mod(GradBuilder& b, const ir::Node& n) {
  Value* x = n.inputs[0];
  Value* d = n.inputs[1];
  const DType t = x->type.dtype;
  const ir::TensorType type = n.outputs[0]->type;
  const ir::TensorType flags{DType::kBool, type.shape};
  Value* zero = b.scalar(0.0, t);
  Value* quotient = b.op("Div", {x, d}, type);
  Value* r = b.op("Sub", {x, b.op("Mul", {quotient, d}, type)}, type);
  const ir::Attribute* f = n.attr("fmod");
  if (!f || f->i == 0) {  // the sign of the divisor
    Value* signs_differ = b.op(
        "Xor",
        {b.op("Less", {r, zero}, flags), b.op("Less", {d, zero}, {DType::kBool, d->type.shape})},
        flags);
    Value* nonzero = b.op("Not", {b.op("Equal", {r, zero}, flags)}, flags);
    Value* fix = b.op("And", {nonzero, signs_differ}, flags);
    r = b.op("Where", {fix, b.op("Add", {r, d}, type), r}, type);
  }
  // Div gives 0 for a zero divisor, which leaves x here; the CPU op's remainder is 0.
  return b.op("Where", {b.op("Equal", {d, zero}, {DType::kBool, d->type.shape}), zero, r}, type);
}

Value* rewrite(GradBuilder& b, const ir::Node& n) {
  const std::string& op = n.op_type;
  Value* x = n.inputs[0];
  if (op == "Clip") return clip(b, n);
  if (op == "Mod") return mod(b, n);
  if (op == "Neg" || op == "Abs") {
    Value* negative = b.op("Sub", {b.scalar(0.0, x->type.dtype), x}, x->type);
    if (op == "Neg") return negative;
    Value* below = b.op("Less", {x, b.scalar(0.0, x->type.dtype)}, {DType::kBool, x->type.shape});
    return b.op("Where", {below, negative, x}, x->type);
  }
  // Max / Min: pairwise, in operand order.
  Value* y = x;
  for (size_t i = 1; i < n.inputs.size(); ++i)
    y = pick(b, op == "Max" ? "Greater" : "Less", y, n.inputs[i]);
  return y == x ? b.op("Identity", {x}, x->type) : y;
}

}  // namespace

int integer_ops_for_cuda(ir::Model& model) {
  ir::Graph& g = *model.graph;
  static const std::set<std::string> kOps = {"Clip", "Max", "Min", "Neg", "Abs", "Mod"};
  std::vector<ir::Node*> todo;
  for (const auto& n : g.nodes) {
    if (n->domain.empty() && kOps.count(n->op_type) > 0 && !n->inputs.empty() && n->inputs[0] &&
        int32_or_64(n->inputs[0]->type.dtype) && ir::has_static_types(*n))
      todo.push_back(n.get());
  }
  int rewritten = 0;
  for (ir::Node* n : todo) {
    GradBuilder b(g, (n->name.empty() ? n->op_type : n->name) + "/cuda");
    const size_t first_new = g.nodes.size();
    Value* result = rewrite(b, *n);
    if (!result) continue;
    ir::replace_by_appended(g, n, first_new, result);
    ++rewritten;
  }
  return rewritten;
}

}  // namespace ampc::passes
