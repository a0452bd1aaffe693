#include "ir/attribute.h"

#include "ir/graph.h"

namespace ampc::ir {

namespace {

// An attribute of `kind` whose value is `v`, kept in the member `field` of that kind.
template <typename Field, typename V>
Attribute make(std::string name, AttrKind kind, Field Attribute::*field, V v) {
  Attribute a;
  a.name = std::move(name);
  a.kind = kind;
  a.*field = std::move(v);
  return a;
}

}  // namespace

Attribute Attribute::make_int(std::string name, int64_t v) {
  return make(std::move(name), AttrKind::kInt, &Attribute::i, v);
}

Attribute Attribute::make_float(std::string name, float v) {
  return make(std::move(name), AttrKind::kFloat, &Attribute::f, v);
}

Attribute Attribute::make_string(std::string name, std::string v) {
  return make(std::move(name), AttrKind::kString, &Attribute::s, std::move(v));
}

Attribute Attribute::make_ints(std::string name, std::vector<int64_t> v) {
  return make(std::move(name), AttrKind::kInts, &Attribute::ints, std::move(v));
}

Attribute Attribute::make_floats(std::string name, std::vector<float> v) {
  return make(std::move(name), AttrKind::kFloats, &Attribute::floats, std::move(v));
}

Attribute Attribute::make_tensor(std::string name, Tensor v) {
  return make(std::move(name), AttrKind::kTensor, &Attribute::t, std::move(v));
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
