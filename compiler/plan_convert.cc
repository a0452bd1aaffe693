#include "compiler/plan_convert.h"

#include "base/error.h"

namespace ampc::compiler {

void plan_tensor_data(const ir::Tensor& t, plan::TensorData* out) {
  out->set_dtype(static_cast<int32_t>(t.dtype));
  for (int64_t d : t.dims) out->add_dims(d);
  if (t.dtype == DType::kString) {
    for (const auto& s : t.strings) out->add_strings(s);
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
                  ": operators with subgraphs (control flow) are not supported by the plan yet");
    case ir::AttrKind::kTensors:
      throw Error("node " + n.label() + ": attribute '" + a.name +
                  "' (a list of tensors) is not supported");
  }
}

}  // namespace ampc::compiler
