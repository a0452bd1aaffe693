#include "ir/verifier.h"

#include <algorithm>
#include <map>
#include <set>

#include <onnx/defs/schema.h>

#include "base/checked_size.h"
#include "base/error.h"

namespace ampc::ir {

std::string onnx_type_string(DType t) {
  static const std::map<DType, std::string> kOnnx = {{DType::kFloat32, "float"},
                                                     {DType::kUInt8, "uint8"},
                                                     {DType::kInt8, "int8"},
                                                     {DType::kUInt16, "uint16"},
                                                     {DType::kInt16, "int16"},
                                                     {DType::kInt32, "int32"},
                                                     {DType::kInt64, "int64"},
                                                     {DType::kString, "string"},
                                                     {DType::kBool, "bool"},
                                                     {DType::kFloat16, "float16"},
                                                     {DType::kFloat64, "double"},
                                                     {DType::kUInt32, "uint32"},
                                                     {DType::kUInt64, "uint64"},
                                                     {DType::kComplex64, "complex64"},
                                                     {DType::kComplex128, "complex128"},
                                                     {DType::kBFloat16, "bfloat16"}};
  auto it = kOnnx.find(t);
  return it == kOnnx.end() ? "?" : "tensor(" + it->second + ")";
}

namespace {

class Verifier {
 public:
  Verifier(const Model& model, const VerifyOptions& options) : model_(model), options_(options) {}

  void run() {
    const Graph& g = *model_.graph;
    if (options_.require_static_inputs) {
      for (const Value* in : g.inputs) {
        if (!in->is_initializer() && !in->type.is_static()) {
          throw Error("graph input '" + in->name + "' has a non-static shape " + in->type.str());
        }
      }
    }
    std::set<const Value*> defined;
    verify_graph(g, defined);
  }

 private:
  void verify_graph(const Graph& g, std::set<const Value*> defined) {
    for (const auto& v : g.values) {
      if (v->owner != &g)
        throw Error("value '" + v->name + "' is listed in a graph that does not own it");
      for (const Use& u : v->uses) {
        if (!u.node || u.input_index < 0 ||
            u.input_index >= static_cast<int>(u.node->inputs.size()) ||
            u.node->inputs[u.input_index] != v.get()) {
          throw Error("value '" + v->name + "' has a use that the node does not have");
        }
      }
      if (v->initializer) check_initializer(*v);
      check_size(*v);
    }
    for (const Value* v : g.inputs) define(v, defined, "graph input");
    for (const Value* v : g.initializers) {
      if (!v->is_graph_input) define(v, defined, "initializer");
    }
    for (const auto& n : g.nodes) {
      if (n->owner != &g)
        throw Error("node " + n->label() + " is listed in a graph that does not own it");
      for (size_t i = 0; i < n->inputs.size(); ++i) {
        const Value* v = n->inputs[i];
        if (!v) continue;
        if (!defined.count(v)) {
          throw Error("node " + n->label() + ": input '" + v->name +
                      "' is used before it is defined");
        }
        bool listed = false;
        for (const Use& u : v->uses)
          listed |= (u.node == n.get() && u.input_index == static_cast<int>(i));
        if (!listed)
          throw Error("node " + n->label() + ": input '" + v->name + "' does not list this use");
      }
      // Subgraphs see everything defined so far, the node's own outputs excepted.
      for (const auto& a : n->attributes) {
        if (a.g) verify_subgraph(*a.g, g, defined);
        for (const auto& sg : a.graphs) verify_subgraph(*sg, g, defined);
      }
      for (size_t i = 0; i < n->outputs.size(); ++i) {
        const Value* v = n->outputs[i];
        if (!v) continue;
        if (v->producer != n.get() || v->producer_output != static_cast<int>(i)) {
          if (v->producer && v->producer != n.get()) {
            for (const Value* other : v->producer->outputs) {
              if (other == v) {
                throw Error("value '" + v->name + "' has two producers: node " + n->label() +
                            " and node " + v->producer->label());
              }
            }
          }
          throw Error("node " + n->label() + ": output '" + v->name + "' names another producer");
        }
        define(v, defined, "output of node " + n->label());
      }
      // Constant has no inputs and its output type is its value's. Before opset 9 its
      // schema allowed only float values, yet PyTorch's exporter wrote int64 ones into
      // opset-6 models (ONNX's own pytorch-* test data has three); run them, as ONNX
      // Runtime does, instead of refusing a type rule that has nothing to check.
      if (n->op_type != "Constant" || !n->domain.empty()) check_types(*n);
    }
    for (const Value* v : g.outputs) {
      if (!defined.count(v)) throw Error("graph output '" + v->name + "' is not defined");
    }
  }

  void verify_subgraph(const Graph& sub, const Graph& parent,
                       const std::set<const Value*>& defined) {
    if (sub.parent != &parent)
      throw Error("subgraph '" + sub.name + "' does not name its enclosing graph");
    verify_graph(sub, defined);
  }

  static void define(const Value* v, std::set<const Value*>& defined, const std::string& what) {
    if (!defined.insert(v).second)
      throw Error("value '" + v->name + "' is defined twice (again as " + what + ")");
  }

  // A static shape whose size overflows or passes what a process can address ([2^40, 2^40]
  // floats) is refused here, before any pass or the memory planner multiplies it out.
  static void check_size(const Value& v) {
    if (!v.type.is_static()) return;
    const std::string what = (v.is_graph_input ? "graph input '" : "value '") + v.name + "'";
    checked_tensor_bytes(*v.type.shape, std::max<size_t>(dtype_size(v.type.dtype), 1), what);
  }

  static void check_initializer(const Value& v) {
    const Tensor& t = *v.initializer;
    if (v.type.dtype != t.dtype) {
      throw Error("initializer '" + v.name + "' holds " + std::string(dtype_name(t.dtype)) +
                  " data but its value is typed " + v.type.str());
    }
    if (v.type.shape && *v.type.shape != t.dims) {
      throw Error("initializer '" + v.name + "' holds data of another shape than its type " +
                  v.type.str());
    }
    if (t.dtype != DType::kString &&
        t.bytes.size() != static_cast<size_t>(t.numel()) * dtype_size(t.dtype)) {
      throw Error("initializer '" + v.name + "' has " + std::to_string(t.bytes.size()) +
                  " bytes of data for type " + v.type.str());
    }
  }

  // Element types against the operator schema's type constraints: each allowed, and all
  // inputs/outputs bound to one type variable equal.
  void check_types(const Node& n) {
    auto version = model_.opset_version(n.domain);
    if (!version) throw Error("node " + n.label() + ": the model imports no opset for its domain");
    const auto* schema =
        onnx::OpSchemaRegistry::Schema(n.op_type, static_cast<int>(*version), n.domain);
    if (!schema) return;  // custom ops of later passes carry their own checks
    std::map<std::string, std::pair<DType, std::string>> bound;
    auto check = [&](const std::vector<onnx::OpSchema::FormalParameter>& formals,
                     const std::vector<Value*>& actual, const char* side) {
      for (size_t i = 0; i < actual.size(); ++i) {
        if (formals.empty() || !actual[i] || actual[i]->type.dtype == DType::kUndefined) continue;
        const auto& formal = formals[std::min(i, formals.size() - 1)];
        if (i >= formals.size() &&
            formal.GetOption() != onnx::OpSchema::FormalParameterOption::Variadic) {
          throw Error("node " + n.label() + " has more " + side + "s than its schema allows");
        }
        const auto& allowed = formal.GetTypes();
        const std::string ts = onnx_type_string(actual[i]->type.dtype);
        bool ok = false;
        for (const auto* t : allowed) ok |= (*t == ts);
        if (!ok) {
          throw Error("node " + n.label() + ": " + side + " " + std::to_string(i) + " '" +
                      actual[i]->name + "' has type " + ts +
                      ", which the operator does not accept");
        }
        const auto& var = formal.GetTypeStr();
        bool constrained = false;
        for (const auto& param : schema->typeConstraintParams())
          constrained |= (param.type_param_str == var);
        const bool homogeneous =
            formal.GetOption() != onnx::OpSchema::FormalParameterOption::Variadic ||
            formal.GetIsHomogeneous();
        if (!constrained || !homogeneous) continue;
        auto [it, fresh] =
            bound.emplace(var, std::make_pair(actual[i]->type.dtype, actual[i]->name));
        if (!fresh && it->second.first != actual[i]->type.dtype) {
          throw Error("node " + n.label() + ": '" + actual[i]->name + "' is " + ts + " but '" +
                      it->second.second + "' is " + onnx_type_string(it->second.first) +
                      " (both type " + var + ")");
        }
      }
    };
    check(schema->inputs(), n.inputs, "input");
    check(schema->outputs(), n.outputs, "output");
  }

  const Model& model_;
  const VerifyOptions& options_;
};

}  // namespace

void verify(const Model& model, const VerifyOptions& options) {
  Verifier(model, options).run();
}

}  // namespace ampc::ir
