#include "ir/printer.h"

#include <cstdio>
#include <sstream>

namespace ampc::ir {
namespace {

// FNV-1a over the bytes: data is summarised rather than printed, yet any change shows.
uint64_t digest(const Tensor& t) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  };
  mix(t.bytes.data(), t.bytes.size());
  for (const auto& s : t.strings) {
    mix(s.data(), s.size());
    mix("\0", 1);
  }
  return h;
}

std::string tensor_text(const Tensor& t) {
  TensorType type{t.dtype, t.dims};
  char hex[24];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(digest(t)));
  std::string s = "tensor " + type.str() + " #" + hex;
  if (!t.name.empty()) s += " name=" + t.name;
  if (!t.doc_string.empty()) s += " doc=\"" + t.doc_string + "\"";
  return s;
}

class Printer {
 public:
  std::string str() const { return os_.str(); }

  void model(const Model& m) {
    os_ << "model ir_version=" << m.ir_version << " producer=\"" << m.producer_name << ' '
        << m.producer_version << "\" domain=\"" << m.domain << "\" version=" << m.model_version
        << '\n';
    for (const auto& o : m.opsets)
      os_ << "opset " << (o.domain.empty() ? "ai.onnx" : o.domain) << ' ' << o.version << '\n';
    for (const auto& [k, v] : m.metadata) os_ << "meta " << k << "=\"" << v << "\"\n";
    if (!m.doc_string.empty()) os_ << "doc \"" << m.doc_string << "\"\n";
    graph(*m.graph, 0);
  }

 private:
  void indent(int depth) { os_ << std::string(2 * depth, ' '); }

  void graph(const Graph& g, int depth) {
    indent(depth);
    os_ << "graph " << g.name << " {\n";
    if (!g.doc_string.empty()) {
      indent(depth + 1);
      os_ << "doc \"" << g.doc_string << "\"\n";
    }
    for (const Value* v : g.inputs) {
      indent(depth + 1);
      os_ << "input " << v->name << ": " << v->type.str() << doc(v->doc_string) << '\n';
    }
    for (const Value* v : g.initializers) {
      indent(depth + 1);
      os_ << "init " << v->name << ": " << v->type.str() << " = " << tensor_text(*v->initializer)
          << '\n';
    }
    for (const auto& n : g.nodes) node(*n, depth + 1);
    for (const Value* v : g.outputs) {
      indent(depth + 1);
      os_ << "output " << v->name << ": " << v->type.str() << doc(v->doc_string) << '\n';
    }
    indent(depth);
    os_ << "}\n";
  }

  void node(const Node& n, int depth) {
    indent(depth);
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      os_ << (i ? ", " : "");
      if (n.outputs[i]) {
        os_ << n.outputs[i]->name << ": " << n.outputs[i]->type.str();
      } else {
        os_ << "_";
      }
    }
    os_ << " = " << (n.domain.empty() ? "" : n.domain + ".") << n.op_type << '(';
    for (size_t i = 0; i < n.inputs.size(); ++i)
      os_ << (i ? ", " : "") << (n.inputs[i] ? n.inputs[i]->name : "_");
    os_ << ")";
    if (!n.name.empty()) os_ << " name=" << n.name;
    os_ << doc(n.doc_string) << '\n';
    for (const auto& a : n.attributes) attribute(a, depth + 1);
  }

  void attribute(const Attribute& a, int depth) {
    indent(depth);
    os_ << '@' << a.name << ':' << attr_kind_name(a.kind) << " = ";
    switch (a.kind) {
      case AttrKind::kFloat:
        os_ << float_text(a.f);
        break;
      case AttrKind::kInt:
        os_ << a.i;
        break;
      case AttrKind::kString:
        os_ << '"' << a.s << '"';
        break;
      case AttrKind::kTensor:
        os_ << tensor_text(a.t);
        break;
      case AttrKind::kFloats:
        for (size_t i = 0; i < a.floats.size(); ++i)
          os_ << (i ? "," : "") << float_text(a.floats[i]);
        break;
      case AttrKind::kInts:
        for (size_t i = 0; i < a.ints.size(); ++i) os_ << (i ? "," : "") << a.ints[i];
        break;
      case AttrKind::kStrings:
        for (size_t i = 0; i < a.strings.size(); ++i)
          os_ << (i ? "," : "") << '"' << a.strings[i] << '"';
        break;
      case AttrKind::kTensors:
        for (const auto& t : a.tensors) os_ << '[' << tensor_text(t) << ']';
        break;
      case AttrKind::kGraph:
      case AttrKind::kGraphs:
        break;
    }
    os_ << doc(a.doc_string) << '\n';
    if (a.g) graph(*a.g, depth + 1);
    for (const auto& g : a.graphs) graph(*g, depth + 1);
  }

  // Exact: %a prints every bit of the float.
  static std::string float_text(float f) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%g(%a)", static_cast<double>(f), static_cast<double>(f));
    return buf;
  }

  static std::string doc(const std::string& d) { return d.empty() ? "" : "  # " + d; }

  std::ostringstream os_;
};

}  // namespace

std::string to_text(const Model& model) {
  Printer p;
  p.model(model);
  return p.str();
}

}  // namespace ampc::ir
