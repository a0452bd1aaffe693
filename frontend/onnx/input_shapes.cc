#include "frontend/onnx/input_shapes.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include <onnx/shape_inference/implementation.h>

#include "base/error.h"
#include "frontend/onnx/onnx_errors.h"

namespace ampc::onnx_io {
namespace {

std::set<std::string> initializer_names(const onnx::GraphProto& g) {
  std::set<std::string> names;
  for (const auto& t : g.initializer()) names.insert(t.name());
  return names;
}

std::string dims_spec(const std::vector<int64_t>& dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "x" : "") + std::to_string(dims[i]);
  return s;
}

}  // namespace

void parse_input_shape(const std::string& spec, ImportOptions& options) {
  const auto eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0) {
    throw Error("--input-shape '" + spec + "': expected NAME=D0xD1x... (for example x=32x64)");
  }
  std::vector<int64_t> dims;
  std::stringstream ss(spec.substr(eq + 1));
  std::string part;
  while (std::getline(ss, part, 'x')) {
    size_t used = 0;
    long long d = -1;
    try {
      d = std::stoll(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != part.size() || d < 0) {
      throw Error("--input-shape '" + spec + "': '" + part +
                  "' is not a dimension (a whole number >= 0)");
    }
    dims.push_back(d);
  }
  options.input_shapes[spec.substr(0, eq)] = dims;
}

void apply_input_shapes(onnx::ModelProto& proto, const ImportOptions& options) {
  auto* graph = proto.mutable_graph();
  bool changed = false;
  for (const auto& [name, dims] : options.input_shapes) {
    onnx::ValueInfoProto* input = nullptr;
    for (auto& in : *graph->mutable_input()) {
      if (in.name() == name) input = &in;
    }
    if (!input) throw Error("--input-shape names '" + name + "', which is not a graph input");
    if (!input->type().has_tensor_type()) {
      throw Error("--input-shape: input '" + name + "' is not a tensor");
    }
    auto* shape = input->mutable_type()->mutable_tensor_type()->mutable_shape();
    if (input->type().tensor_type().has_shape() &&
        shape->dim_size() != static_cast<int>(dims.size())) {
      throw Error("--input-shape " + name + "=" + dims_spec(dims) + ": input '" + name +
                  "' has rank " + std::to_string(shape->dim_size()) + ", not " +
                  std::to_string(dims.size()));
    }
    shape->clear_dim();
    for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
    changed = true;
  }
  if (!changed) return;
  // Shapes recorded by the exporter describe the old input shapes; keep only element types.
  graph->clear_value_info();
  for (auto& out : *graph->mutable_output()) {
    if (out.type().has_tensor_type()) out.mutable_type()->mutable_tensor_type()->clear_shape();
  }
}

void require_static_inputs(const onnx::ModelProto& proto) {
  const auto& g = proto.graph();
  const auto inits = initializer_names(g);
  for (const auto& in : g.input()) {
    if (inits.count(in.name()) || !in.type().has_tensor_type()) continue;
    const auto& tt = in.type().tensor_type();
    if (!tt.has_shape()) {
      throw Error("input '" + in.name() +
                  "' has no shape (unknown rank); give it with --input-shape " + in.name() +
                  "=D0xD1x...");
    }
    std::vector<int64_t> suggestion;
    int dynamic = -1;
    std::string dim_name;
    for (int i = 0; i < tt.shape().dim_size(); ++i) {
      const auto& d = tt.shape().dim(i);
      if (d.has_dim_value() && d.dim_value() >= 0) {
        suggestion.push_back(d.dim_value());
      } else {
        if (dynamic < 0) {
          dynamic = i;
          dim_name = d.has_dim_param() ? d.dim_param() : "";
        }
        suggestion.push_back(1);
      }
    }
    if (dynamic >= 0) {
      throw Error("input '" + in.name() + "' has dynamic dimension " + std::to_string(dynamic) +
                  (dim_name.empty() ? "" : " ('" + dim_name + "')") +
                  "; fix it with --input-shape " + in.name() + "=" + dims_spec(suggestion) +
                  " (the 1s are placeholders)");
    }
  }
}

namespace {

// Single static assignment within one graph: graph inputs, initializers (which may also be
// inputs) and node outputs each name a value once. ONNX's shape inference assumes it and
// crashes on a model with two graph inputs of one name (found by the onnx_import fuzzer),
// so it is checked here first, in every subgraph too.
void require_single_assignment(const onnx::GraphProto& g) {
  std::set<std::string> inputs, defined;
  auto define = [&](const std::string& name, const char* what) {
    if (name.empty()) return;  // an omitted optional output
    if (!defined.insert(name).second) {
      throw Error("graph '" + g.name() + "': value '" + name + "' is defined twice (again as " +
                  what + "); not valid ONNX (single static assignment)");
    }
  };
  for (const auto& in : g.input()) {
    define(in.name(), "a graph input");
    inputs.insert(in.name());
  }
  std::set<std::string> initializers;
  for (const auto& t : g.initializer()) {
    if (!initializers.insert(t.name()).second) {
      throw Error("graph '" + g.name() + "': initializer '" + t.name() +
                  "' is given twice; not valid ONNX");
    }
    if (!inputs.count(t.name())) define(t.name(), "an initializer");
  }
  for (const auto& n : g.node()) {
    for (const auto& out : n.output()) define(out, "a node output");
    for (const auto& a : n.attribute()) {
      if (a.has_g()) require_single_assignment(a.g());
      for (const auto& sub : a.graphs()) require_single_assignment(sub);
    }
  }
}

// Every attribute an operator's schema requires is there, with the schema's type. ONNX's
// shape inference assumes it: a Scan without its `body` graph crashed it (found by the
// onnx_import fuzzer). Checked in every subgraph too; unknown operators are left to the
// importer, which names them.
void require_schema_attributes(const onnx::GraphProto& g,
                               const std::map<std::string, int>& opsets) {
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    const std::string domain = n.domain() == "ai.onnx" ? "" : n.domain();
    const auto version = opsets.find(domain);
    const onnx::OpSchema* schema =
        version == opsets.end()
            ? nullptr
            : onnx::OpSchemaRegistry::Schema(n.op_type(), version->second, domain);
    const std::string label = "node '" + (n.name().empty() ? "#" + std::to_string(i) : n.name()) +
                              "' (" + n.op_type() + ")";
    for (const auto& [name, attribute] :
         schema ? schema->attributes() : std::map<std::string, onnx::OpSchema::Attribute>{}) {
      const auto given =
          std::find_if(n.attribute().begin(), n.attribute().end(),
                       [&](const onnx::AttributeProto& a) { return a.name() == name; });
      if (given == n.attribute().end()) {
        if (attribute.required) throw Error(label + " lacks its required attribute '" + name + "'");
        continue;
      }
      if (given->type() != attribute.type) {
        throw Error(label + ": attribute '" + name + "' has the wrong type for " + n.op_type());
      }
    }
    for (const auto& a : n.attribute()) {
      if (a.has_g()) require_schema_attributes(a.g(), opsets);
      for (const auto& sub : a.graphs()) require_schema_attributes(sub, opsets);
    }
  }
}

}  // namespace

void infer_shapes(onnx::ModelProto& proto) {
  require_single_assignment(proto.graph());
  std::map<std::string, int> opsets;
  for (const auto& o : proto.opset_import()) {
    opsets[o.domain() == "ai.onnx" ? "" : o.domain()] = static_cast<int>(o.version());
  }
  require_schema_attributes(proto.graph(), opsets);
  with_first_line_errors("shape inference failed: ", [&] {
    onnx::ShapeInferenceOptions opts(/*check_type=*/false, /*error_mode=*/0, /*data_prop=*/true);
    onnx::shape_inference::InferShapes(proto, onnx::OpSchemaRegistry::Instance(), opts);
  });
}

}  // namespace ampc::onnx_io
