#include "passes/constant_folding.h"

#include <algorithm>
#include <optional>
#include <set>

#include "base/error.h"
#include "passes/shape_arithmetic.h"

namespace ampc::passes {
namespace {

using ir::Tensor;

const Tensor* constant_of(const ir::Value* v) {
  return v && v->initializer ? v->initializer.get() : nullptr;
}

bool is_int(DType t) {
  return t == DType::kInt64 || t == DType::kInt32;
}

std::vector<int64_t> int_values(const Tensor& t) {
  std::vector<int64_t> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = t.dtype == DType::kInt64 ? ir::load_element<int64_t>(t.bytes.data(), i)
                                      : ir::load_element<int32_t>(t.bytes.data(), i);
  }
  return out;
}

// An int64 or int32 tensor of `values`.
Tensor int_tensor(DType dtype, std::vector<int64_t> dims, const std::vector<int64_t>& values) {
  return ir::tensor_of<int32_t>(dtype, DType::kInt64, std::move(dims), values);
}

int64_t norm_axis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

// Axes from the attribute (older opsets) or the second input (opset 13+).
std::optional<std::vector<int64_t>> axes_of(const ir::Node& n) {
  if (const auto* a = n.attr("axes")) return a->ints;
  if (n.inputs.size() > 1 && n.inputs[1]) {
    const Tensor* t = constant_of(n.inputs[1]);
    if (!t || !is_int(t->dtype)) return std::nullopt;
    return int_values(*t);
  }
  return std::vector<int64_t>{};
}

// The folded value of node `n`'s single output, or nullopt when it cannot be folded here.
std::optional<Tensor> evaluate_builtin(const ir::Node& n) {
  if (!n.domain.empty() || n.outputs.size() != 1 || !n.outputs[0]) return std::nullopt;
  const std::string& op = n.op_type;
  if (op == "Constant") {
    const auto* value = n.attr("value");
    if (value && value->kind == ir::AttrKind::kTensor) return value->t;
    if (const auto* a = n.attr("value_int")) return int_tensor(DType::kInt64, {}, {a->i});
    if (const auto* a = n.attr("value_ints"))
      return int_tensor(DType::kInt64, {static_cast<int64_t>(a->ints.size())}, a->ints);
    return std::nullopt;
  }
  if (op == "Shape") {
    const auto& type = n.inputs[0]->type;
    if (!type.is_static()) return std::nullopt;
    const auto rank = static_cast<int64_t>(type.shape->size());
    int64_t start = n.attr("start") ? n.attr("start")->i : 0;
    int64_t end = n.attr("end") ? n.attr("end")->i : rank;
    start = std::clamp(norm_axis(start, rank), int64_t{0}, rank);
    end = std::clamp(norm_axis(end, rank), int64_t{0}, rank);
    std::vector<int64_t> dims(type.shape->begin() + start,
                              type.shape->begin() + std::max(start, end));
    return int_tensor(DType::kInt64, {static_cast<int64_t>(dims.size())}, dims);
  }
  if (op == "Size") {
    const auto& type = n.inputs[0]->type;
    if (!type.is_static()) return std::nullopt;
    int64_t count = 1;
    for (int64_t d : *type.shape) count *= d;
    return int_tensor(DType::kInt64, {}, {count});
  }
  // Everything else needs all (present) inputs constant, and integer data.
  for (const ir::Value* v : n.inputs) {
    if (v && !constant_of(v)) return std::nullopt;
  }
  const Tensor* x = constant_of(n.inputs.empty() ? nullptr : n.inputs[0]);
  if (!x || !is_int(x->dtype)) return std::nullopt;
  const auto rank = static_cast<int64_t>(x->dims.size());

  if (op == "Identity") return *x;
  if (op == "Unsqueeze") {
    auto axes = axes_of(n);
    if (!axes) return std::nullopt;
    const auto out_rank = rank + static_cast<int64_t>(axes->size());
    std::vector<bool> inserted(static_cast<size_t>(out_rank), false);
    for (int64_t a : *axes) inserted.at(static_cast<size_t>(norm_axis(a, out_rank))) = true;
    Tensor t = *x;
    t.dims.clear();
    for (int64_t i = 0, j = 0; i < out_rank; ++i) t.dims.push_back(inserted[i] ? 1 : x->dims[j++]);
    return t;
  }
  if (op == "Squeeze") {
    auto axes = axes_of(n);
    if (!axes) return std::nullopt;
    Tensor t = *x;
    t.dims.clear();
    for (int64_t i = 0; i < rank; ++i) {
      bool drop = axes->empty() ? x->dims[i] == 1 : false;
      for (int64_t a : *axes) drop |= norm_axis(a, rank) == i;
      if (!drop) t.dims.push_back(x->dims[i]);
    }
    return t;
  }
  if (op == "Concat") {
    const auto* axis_attr = n.attr("axis");
    if (!axis_attr) return std::nullopt;
    const int64_t axis = norm_axis(axis_attr->i, rank);
    // Outer blocks of each input are interleaved along `axis`.
    int64_t outer = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= x->dims[i];
    Tensor t = *x;
    t.dims[axis] = 0;
    t.bytes.clear();
    for (const ir::Value* v : n.inputs) {
      const Tensor* in = constant_of(v);
      if (in->dtype != x->dtype || in->dims.size() != x->dims.size()) return std::nullopt;
      t.dims[axis] += in->dims[axis];
    }
    for (int64_t o = 0; o < outer; ++o) {
      for (const ir::Value* v : n.inputs) {
        const Tensor* in = constant_of(v);
        const size_t block = in->bytes.size() / static_cast<size_t>(std::max<int64_t>(outer, 1));
        t.bytes.insert(t.bytes.end(), in->bytes.begin() + o * block,
                       in->bytes.begin() + (o + 1) * block);
      }
    }
    return t;
  }
  if (op == "Gather") {
    const Tensor* idx = constant_of(n.inputs[1]);
    const int64_t axis = norm_axis(n.attr("axis") ? n.attr("axis")->i : 0, rank);
    if (!idx || !is_int(idx->dtype) || rank == 0) return std::nullopt;
    const auto indices = int_values(*idx);
    const auto values = int_values(*x);
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= x->dims[i];
    for (int64_t i = axis + 1; i < rank; ++i) inner *= x->dims[i];
    std::vector<int64_t> out;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t k : indices) {
        if (k < 0) k += x->dims[axis];
        if (k < 0 || k >= x->dims[axis]) return std::nullopt;  // the backend reports it
        for (int64_t i = 0; i < inner; ++i)
          out.push_back(values[(o * x->dims[axis] + k) * inner + i]);
      }
    }
    std::vector<int64_t> dims(x->dims.begin(), x->dims.begin() + axis);
    dims.insert(dims.end(), idx->dims.begin(), idx->dims.end());
    dims.insert(dims.end(), x->dims.begin() + axis + 1, x->dims.end());
    return int_tensor(x->dtype, dims, out);
  }
  if (op == "Cast") {
    const auto to = static_cast<DType>(n.attr("to") ? n.attr("to")->i : 0);
    if (!is_int(to)) return std::nullopt;
    return int_tensor(to, x->dims, int_values(*x));
  }
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
    const Tensor* y = constant_of(n.inputs[1]);
    if (!y || y->dtype != x->dtype) return std::nullopt;
    const auto a = int_values(*x);
    const auto b = int_values(*y);
    // Same shapes, or one side a single element: what shape arithmetic uses.
    if (a.size() != b.size() && a.size() != 1 && b.size() != 1) return std::nullopt;
    const Tensor& shape_src = a.size() >= b.size() ? *x : *y;
    if (a.size() == b.size() && x->dims != y->dims) return std::nullopt;
    std::vector<int64_t> out(std::max(a.size(), b.size()));
    for (size_t i = 0; i < out.size(); ++i) {
      const int64_t l = a[a.size() == 1 ? 0 : i];
      const int64_t r = b[b.size() == 1 ? 0 : i];
      if (op == "Div" && r == 0) return std::nullopt;
      out[i] = op == "Add" ? l + r : op == "Sub" ? l - r : op == "Mul" ? l * r : l / r;
    }
    return int_tensor(x->dtype, shape_src.dims, out);
  }
  return std::nullopt;
}

// Every output of `n` folded, or nullopt: the rules above, then shape_arithmetic.h's.
std::optional<std::vector<Tensor>> evaluate(const ir::Node& n) {
  if (auto t = evaluate_builtin(n)) return std::vector<Tensor>{std::move(*t)};
  if (n.op_type == "Constant") return std::nullopt;
  return evaluate_shape_arithmetic(n);
}

}  // namespace

int fold_constants(ir::Model& model, const ConstantFoldingOptions& options) {
  ir::Graph& g = *model.graph;
  // Initializers that change: training state (a step counter read by `counter + 1`) and
  // initializers that are also graph inputs (the caller may feed another value).
  std::set<const ir::Value*> variable;
  for (const auto& u : model.state_updates) variable.insert(u.target);
  for (const ir::Value* v : g.inputs) variable.insert(v);
  int folded = 0;
  for (size_t i = 0; i < g.nodes.size();) {
    ir::Node* n = g.nodes[i].get();
    const bool reads_variable = std::any_of(n->inputs.begin(), n->inputs.end(),
                                            [&](const ir::Value* v) { return variable.count(v); });
    // Shape and Size read only the (static) type of their input, never its data.
    const bool type_only = n->op_type == "Shape" || n->op_type == "Size";
    std::optional<std::vector<Tensor>> values =
        reads_variable && !type_only ? std::nullopt : evaluate(*n);
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
