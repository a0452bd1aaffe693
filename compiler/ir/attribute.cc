#include "compiler/ir/attribute.h"

#include "compiler/ir/graph.h"

namespace ampc::ir {

Attribute Attribute::make_int(std::string name, int64_t v) {
  Attribute a;
  a.name = std::move(name);
  a.kind = AttrKind::kInt;
  a.i = v;
  return a;
}

Attribute Attribute::make_float(std::string name, float v) {
  Attribute a;
  a.name = std::move(name);
  a.kind = AttrKind::kFloat;
  a.f = v;
  return a;
}

Attribute Attribute::make_string(std::string name, std::string v) {
  Attribute a;
  a.name = std::move(name);
  a.kind = AttrKind::kString;
  a.s = std::move(v);
  return a;
}

Attribute Attribute::make_ints(std::string name, std::vector<int64_t> v) {
  Attribute a;
  a.name = std::move(name);
  a.kind = AttrKind::kInts;
  a.ints = std::move(v);
  return a;
}

Attribute Attribute::make_floats(std::string name, std::vector<float> v) {
  Attribute a;
  a.name = std::move(name);
  a.kind = AttrKind::kFloats;
  a.floats = std::move(v);
  return a;
}

Attribute Attribute::make_tensor(std::string name, Tensor v) {
  Attribute a;
  a.name = std::move(name);
  a.kind = AttrKind::kTensor;
  a.t = std::move(v);
  return a;
}

std::string_view attr_kind_name(AttrKind k) {
  switch (k) {
    case AttrKind::kFloat:
      return "float";
    case AttrKind::kInt:
      return "int";
    case AttrKind::kString:
      return "string";
    case AttrKind::kTensor:
      return "tensor";
    case AttrKind::kGraph:
      return "graph";
    case AttrKind::kFloats:
      return "floats";
    case AttrKind::kInts:
      return "ints";
    case AttrKind::kStrings:
      return "strings";
    case AttrKind::kTensors:
      return "tensors";
    case AttrKind::kGraphs:
      return "graphs";
  }
  return "?";
}

}  // namespace ampc::ir
