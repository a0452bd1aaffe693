#include "passes/autodiff/grad_builder.h"

#include <cstring>

#include "base/error.h"
#include "base/half.h"

namespace ampc::passes::autodiff {
namespace {

void store(double value, DType dtype, uint8_t* out) {
  switch (dtype) {
    case DType::kFloat32: {
      const auto v = static_cast<float>(value);
      std::memcpy(out, &v, 4);
      break;
    }
    case DType::kFloat64:
      std::memcpy(out, &value, 8);
      break;
    case DType::kFloat16: {
      const Half h = float_to_half(static_cast<float>(value));
      std::memcpy(out, &h.bits, 2);
      break;
    }
    case DType::kBFloat16: {
      const BFloat16 h = float_to_bf16(static_cast<float>(value));
      std::memcpy(out, &h.bits, 2);
      break;
    }
    case DType::kInt64: {
      const auto v = static_cast<int64_t>(value);
      std::memcpy(out, &v, 8);
      break;
    }
    case DType::kInt32: {
      const auto v = static_cast<int32_t>(value);
      std::memcpy(out, &v, 4);
      break;
    }
    default:
      throw Error("internal: gradient constant of type " + std::string(dtype_name(dtype)));
  }
}

}  // namespace

std::string GradBuilder::fresh(const std::string& what) {
  for (;;) {
    std::string name = prefix_ + "/" + what + "_" + std::to_string(counter_++);
    if (!graph_.find_value(name)) return name;
  }
}

std::vector<ir::Value*> GradBuilder::op_n(const std::string& op_type,
                                          std::vector<ir::Value*> inputs,
                                          std::vector<ir::TensorType> out_types,
                                          std::vector<ir::Attribute> attributes,
                                          const std::string& domain) {
  std::vector<ir::Value*> outs;
  for (auto& t : out_types) outs.push_back(graph_.add_value(fresh(op_type), std::move(t)));
  ir::Node* n = graph_.add_node(op_type, std::move(inputs), outs, fresh(op_type + "_node"), domain);
  n->attributes = std::move(attributes);
  return outs;
}

ir::Value* GradBuilder::op(const std::string& op_type, std::vector<ir::Value*> inputs,
                           ir::TensorType out_type, std::vector<ir::Attribute> attributes,
                           const std::string& domain) {
  return op_n(op_type, std::move(inputs), {std::move(out_type)}, std::move(attributes), domain)[0];
}

ir::Value* GradBuilder::filled(double value, const ir::TensorType& type) {
  ir::Tensor t;
  t.dtype = type.dtype;
  t.dims = *type.shape;
  const int64_t n = t.numel();
  t.bytes.resize(static_cast<size_t>(n) * dtype_size(t.dtype));
  for (int64_t i = 0; i < n; ++i) store(value, t.dtype, t.bytes.data() + i * dtype_size(t.dtype));
  ir::Value* v = graph_.add_value(fresh("const"), type);
  t.name = v->name;
  v->initializer = std::make_unique<ir::Tensor>(std::move(t));
  graph_.initializers.push_back(v);
  return v;
}

ir::Value* GradBuilder::scalar(double value, DType dtype) {
  return filled(value, {dtype, std::vector<int64_t>{}});
}

ir::Value* GradBuilder::ints(const std::vector<int64_t>& values) {
  ir::Tensor t;
  t.dtype = DType::kInt64;
  t.dims = {static_cast<int64_t>(values.size())};
  t.bytes.resize(values.size() * 8);
  // memcpy's pointers must not be null, also for no bytes (an empty vector's data() may be).
  if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  ir::Value* v = graph_.add_value(fresh("ints"), {DType::kInt64, t.dims});
  t.name = v->name;
  v->initializer = std::make_unique<ir::Tensor>(std::move(t));
  graph_.initializers.push_back(v);
  return v;
}

ir::Value* GradBuilder::floats(const std::vector<double>& values, DType dtype) {
  ir::Tensor t;
  t.dtype = dtype;
  t.dims = {static_cast<int64_t>(values.size())};
  const size_t size = dtype_size(dtype);
  t.bytes.resize(values.size() * size);
  for (size_t i = 0; i < values.size(); ++i) store(values[i], dtype, t.bytes.data() + i * size);
  ir::Value* v = graph_.add_value(fresh("floats"), {dtype, t.dims});
  t.name = v->name;
  v->initializer = std::make_unique<ir::Tensor>(std::move(t));
  graph_.initializers.push_back(v);
  return v;
}

ir::Value* GradBuilder::transpose_last(ir::Value* x) {
  const auto& s = *x->type.shape;
  std::vector<int64_t> perm(s.size());
  for (size_t i = 0; i < s.size(); ++i) perm[i] = static_cast<int64_t>(i);
  std::swap(perm[s.size() - 1], perm[s.size() - 2]);
  if (const ir::Node* t = x->producer;
      t && t->domain.empty() && t->op_type == "Transpose" && t->inputs.size() == 1) {
    const ir::Attribute* p = t->attr("perm");
    if (p && p->ints == perm && t->inputs[0]->type.dtype == x->type.dtype) return t->inputs[0];
  }
  std::vector<int64_t> out = s;
  std::swap(out[s.size() - 1], out[s.size() - 2]);
  return op("Transpose", {x}, {x->type.dtype, out}, attrs(ir::Attribute::make_ints("perm", perm)));
}

ir::Value* GradBuilder::reshape(ir::Value* x, const std::vector<int64_t>& shape) {
  if (x->type.shape && *x->type.shape == shape) return x;
  return op("Reshape", {x, ints(shape)}, {x->type.dtype, shape});
}

ir::Value* GradBuilder::reduce_to(ir::Value* grad, const ir::TensorType& target) {
  const auto& from = *grad->type.shape;
  const auto& to = *target.shape;
  if (from == to) return grad;
  const size_t lead = from.size() - to.size();
  std::vector<int64_t> axes;
  for (size_t i = 0; i < from.size(); ++i) {
    if (i < lead || (to[i - lead] == 1 && from[i] != 1)) axes.push_back(static_cast<int64_t>(i));
  }
  if (axes.empty()) return reshape(grad, to);
  std::vector<int64_t> kept;
  for (size_t i = 0; i < from.size(); ++i) {
    bool reduced = false;
    for (int64_t a : axes) reduced |= a == static_cast<int64_t>(i);
    kept.push_back(reduced ? 1 : from[i]);
  }
  ir::Value* summed = op("ReduceSum", {grad, ints(axes)}, {grad->type.dtype, kept},
                         attrs(ir::Attribute::make_int("keepdims", 1)));
  return reshape(summed, to);
}

ir::Value* GradBuilder::add(ir::Value* a, ir::Value* b) {
  return op("Add", {a, b}, a->type);
}
ir::Value* GradBuilder::mul(ir::Value* a, ir::Value* b) {
  // The result has the broadcast shape; callers pass equal shapes or a scalar as b.
  return op("Mul", {a, b}, a->type);
}

ir::Value* GradBuilder::cast(ir::Value* x, DType to) {
  if (x->type.dtype == to) return x;
  return op("Cast", {x}, {to, x->type.shape},
            attrs(ir::Attribute::make_int("to", static_cast<int64_t>(to))));
}

}  // namespace ampc::passes::autodiff
