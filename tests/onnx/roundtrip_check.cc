#include "tests/onnx/roundtrip_check.h"

#include <sstream>

#include "frontend/onnx/proto_convert.h"

namespace ampc::testing {
namespace {

std::string join(const google::protobuf::RepeatedPtrField<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ",") + n;
  return "[" + s + "]";
}

template <typename Protos>
std::string value_names(const Protos& values) {
  std::string s;
  for (const auto& v : values) s += (s.empty() ? "" : ",") + v.name();
  return "[" + s + "]";
}

// Tensor data compared after decoding, so raw_data and the typed fields compare equal.
bool same_tensor(const onnx::TensorProto& a, const onnx::TensorProto& b) {
  return onnx_io::tensor_from_proto(a, "original") == onnx_io::tensor_from_proto(b, "exported");
}

std::string graph_difference(const onnx::GraphProto& a, const onnx::GraphProto& b,
                             const std::string& where);

// A graph input keeps its element type, rank and every fixed dimension (a symbolic
// dimension may lose its name: the IR keeps it as unknown).
std::string input_type_difference(const onnx::ValueInfoProto& a, const onnx::ValueInfoProto& b) {
  if (!a.type().has_tensor_type()) return "";
  const auto& ta = a.type().tensor_type();
  const auto& tb = b.type().tensor_type();
  const std::string w = "input '" + a.name() + "'";
  if (!b.type().has_tensor_type() || ta.elem_type() != tb.elem_type())
    return w + ": element type changed";
  if (ta.has_shape() != tb.has_shape()) return w + ": shape presence changed";
  if (ta.shape().dim_size() != tb.shape().dim_size()) return w + ": rank changed";
  for (int i = 0; i < ta.shape().dim_size(); ++i) {
    const auto& da = ta.shape().dim(i);
    const auto& db = tb.shape().dim(i);
    if (da.has_dim_value() != db.has_dim_value() || da.dim_value() != db.dim_value()) {
      return w + ": dimension " + std::to_string(i) + " changed";
    }
  }
  return "";
}

std::string attribute_difference(const onnx::AttributeProto& a, const onnx::AttributeProto& b,
                                 const std::string& where) {
  const std::string w = where + " attribute '" + a.name() + "'";
  if (a.name() != b.name() || a.type() != b.type())
    return w + ": name or type changed to '" + b.name() + "'";
  bool same = true;
  switch (a.type()) {
    case onnx::AttributeProto::FLOAT:
      same = a.f() == b.f() || (a.f() != a.f() && b.f() != b.f());
      break;
    case onnx::AttributeProto::INT:
      same = a.i() == b.i();
      break;
    case onnx::AttributeProto::STRING:
      same = a.s() == b.s();
      break;
    case onnx::AttributeProto::FLOATS:
      same = a.floats_size() == b.floats_size();
      for (int i = 0; same && i < a.floats_size(); ++i) same = a.floats(i) == b.floats(i);
      break;
    case onnx::AttributeProto::INTS:
      same = a.ints_size() == b.ints_size();
      for (int i = 0; same && i < a.ints_size(); ++i) same = a.ints(i) == b.ints(i);
      break;
    case onnx::AttributeProto::STRINGS:
      same = a.strings_size() == b.strings_size();
      for (int i = 0; same && i < a.strings_size(); ++i) same = a.strings(i) == b.strings(i);
      break;
    case onnx::AttributeProto::TENSOR:
      same = same_tensor(a.t(), b.t());
      break;
    case onnx::AttributeProto::TENSORS:
      same = a.tensors_size() == b.tensors_size();
      for (int i = 0; same && i < a.tensors_size(); ++i)
        same = same_tensor(a.tensors(i), b.tensors(i));
      break;
    case onnx::AttributeProto::GRAPH:
      return graph_difference(a.g(), b.g(), w);
    case onnx::AttributeProto::GRAPHS:
      if (a.graphs_size() != b.graphs_size()) return w + ": number of graphs changed";
      for (int i = 0; i < a.graphs_size(); ++i) {
        if (auto d = graph_difference(a.graphs(i), b.graphs(i), w + "[" + std::to_string(i) + "]");
            !d.empty()) {
          return d;
        }
      }
      break;
    default:
      break;
  }
  return same ? "" : w + ": value changed";
}

std::string graph_difference(const onnx::GraphProto& a, const onnx::GraphProto& b,
                             const std::string& where) {
  const std::string w = where + " graph '" + a.name() + "'";
  if (a.name() != b.name()) return w + ": renamed to '" + b.name() + "'";
  if (value_names(a.input()) != value_names(b.input())) {
    return w + ": inputs " + value_names(a.input()) + " became " + value_names(b.input());
  }
  for (int i = 0; i < a.input_size(); ++i) {
    if (auto d = input_type_difference(a.input(i), b.input(i)); !d.empty()) return w + ": " + d;
  }
  if (value_names(a.output()) != value_names(b.output())) {
    return w + ": outputs " + value_names(a.output()) + " became " + value_names(b.output());
  }
  if (a.initializer_size() != b.initializer_size()) return w + ": number of initializers changed";
  for (int i = 0; i < a.initializer_size(); ++i) {
    if (a.initializer(i).name() != b.initializer(i).name() ||
        !same_tensor(a.initializer(i), b.initializer(i))) {
      return w + ": initializer '" + a.initializer(i).name() + "' changed";
    }
  }
  if (a.node_size() != b.node_size()) {
    return w + ": " + std::to_string(a.node_size()) + " nodes became " +
           std::to_string(b.node_size());
  }
  for (int i = 0; i < a.node_size(); ++i) {
    const auto& na = a.node(i);
    const auto& nb = b.node(i);
    const std::string nw =
        w + " node #" + std::to_string(i) + " '" + na.name() + "' (" + na.op_type() + ")";
    if (na.name() != nb.name() || na.op_type() != nb.op_type() || na.domain() != nb.domain()) {
      return nw + ": became '" + nb.name() + "' (" + nb.domain() + "." + nb.op_type() + ")";
    }
    if (join(na.input()) != join(nb.input()))
      return nw + ": inputs " + join(na.input()) + " became " + join(nb.input());
    if (join(na.output()) != join(nb.output())) {
      return nw + ": outputs " + join(na.output()) + " became " + join(nb.output());
    }
    if (na.attribute_size() != nb.attribute_size()) return nw + ": number of attributes changed";
    for (int k = 0; k < na.attribute_size(); ++k) {
      if (auto d = attribute_difference(na.attribute(k), nb.attribute(k), nw); !d.empty()) return d;
    }
  }
  return "";
}

}  // namespace

std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream sa(a), sb(b);
  std::string la, lb;
  for (int line = 1;; ++line) {
    const bool ha = static_cast<bool>(std::getline(sa, la));
    const bool hb = static_cast<bool>(std::getline(sb, lb));
    if (!ha && !hb) return "identical";
    if (!ha || !hb || la != lb) {
      return "line " + std::to_string(line) + ":\n    first:  " + (ha ? la : "<end>") +
             "\n    second: " + (hb ? lb : "<end>");
    }
  }
}

std::string structure_difference(const onnx::ModelProto& original,
                                 const onnx::ModelProto& exported) {
  if (original.ir_version() != exported.ir_version()) return "ir_version changed";
  if (original.opset_import_size() != exported.opset_import_size())
    return "number of opset imports changed";
  for (int i = 0; i < original.opset_import_size(); ++i) {
    if (original.opset_import(i).domain() != exported.opset_import(i).domain() ||
        original.opset_import(i).version() != exported.opset_import(i).version()) {
      return "opset import #" + std::to_string(i) + " changed";
    }
  }
  if (original.producer_name() != exported.producer_name() ||
      original.doc_string() != exported.doc_string() ||
      original.metadata_props_size() != exported.metadata_props_size()) {
    return "model producer, doc string or metadata changed";
  }
  return graph_difference(original.graph(), exported.graph(), "main");
}

}  // namespace ampc::testing
