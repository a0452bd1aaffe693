#include "lower/plan_convert.h"

#include <algorithm>

#include "base/error.h"
#include "lower/legalize.h"

namespace ampc::lower {

void plan_tensor_data(const ir::Tensor& t, plan::TensorData* out) {
  out->set_dtype(static_cast<int32_t>(t.dtype));
  for (int64_t d : t.dims) out->add_dims(d);
  if (t.dtype == DType::kString) {
    for (const auto& s : t.strings) out->add_strings(s);
  } else if (!t.bytes.empty() &&
             std::all_of(t.bytes.begin(), t.bytes.end(), [](uint8_t b) { return b == 0; })) {
    out->set_zeros(true);  // the moments of a fresh optimizer: no bytes in the file
  } else {
    out->set_data(t.bytes.data(), t.bytes.size());
  }
}

void plan_attribute(const ir::Attribute& a, const ir::Node& n, plan::Attribute* out) {
  out->set_name(a.name);
  switch (a.kind) {
    case ir::AttrKind::kInt:
      out->set_i(a.i);
      break;
    case ir::AttrKind::kFloat:
      out->set_f(a.f);
      break;
    case ir::AttrKind::kString:
      out->set_s(a.s);
      break;
    case ir::AttrKind::kInts:
      for (int64_t v : a.ints) out->mutable_ints()->add_v(v);
      break;
    case ir::AttrKind::kFloats:
      for (float v : a.floats) out->mutable_floats()->add_v(v);
      break;
    case ir::AttrKind::kStrings:
      for (const auto& v : a.strings) out->mutable_strings()->add_v(v);
      break;
    case ir::AttrKind::kTensor:
      plan_tensor_data(a.t, out->mutable_t());
      break;
    case ir::AttrKind::kGraph:
    case ir::AttrKind::kGraphs:
      throw Error("node " + n.label() +
                  ": operators with subgraphs (control flow) are not supported by the plan yet "
                  "(an If whose condition is a constant once shapes are static runs as its "
                  "branch)");
    case ir::AttrKind::kTensors:
      throw Error("node " + n.label() + ": attribute '" + a.name +
                  "' (a list of tensors) is not supported");
  }
}

namespace {

std::optional<std::vector<int64_t>> constant_ints(const ir::Value* v) {
  if (!v || !v->initializer) return std::nullopt;
  const ir::Tensor& t = *v->initializer;
  std::vector<int64_t> values;
  for (size_t k = 0; k < static_cast<size_t>(t.numel()); ++k) {
    if (t.dtype == DType::kInt64) {
      values.push_back(ir::load_element<int64_t>(t.bytes.data(), k));
    } else if (t.dtype == DType::kInt32) {
      values.push_back(ir::load_element<int32_t>(t.bytes.data(), k));
    } else {
      return std::nullopt;
    }
  }
  return values;
}

}  // namespace

void legalize_with_values(plan::Step& step, const std::vector<const ir::Value*>& inputs) {
  StepOperands operands;
  for (const ir::Value* v : inputs) {
    const bool known = v && v->type.shape;
    operands.input_ranks.push_back(known ? std::optional<int64_t>(v->type.shape->size())
                                         : std::nullopt);
  }
  operands.constant_ints = [&inputs](int i) {
    return i < static_cast<int>(inputs.size()) ? constant_ints(inputs[i]) : std::nullopt;
  };
  legalize_step(step, operands);
}

}  // namespace ampc::lower
