#include "frontend/onnx/import.h"

#include <filesystem>
#include <set>
#include <unordered_map>

#include <onnx/defs/schema.h>

#include "base/error.h"
#include "frontend/onnx/input_shapes.h"
#include "frontend/onnx/known_domains.h"
#include "frontend/onnx/proto_convert.h"
#include "frontend/onnx/read_model.h"
#include "frontend/onnx/soft_target_cross_entropy.h"
#include "frontend/onnx/training_info.h"
#include "frontend/onnx/transpose_perms.h"
#include "frontend/onnx/where_scalar_types.h"
#include "ir/verifier.h"
#include "ops/schemas/amp_schemas.h"

namespace ampc::onnx_io {
namespace {

std::string node_label(const onnx::NodeProto& n, int index) {
  std::string label = "node '";
  label += n.name().empty() ? "#" + std::to_string(index) : n.name();
  label += "' (";
  if (!n.domain().empty()) label += n.domain() + ".";
  label += n.op_type();
  label += ")";
  return label;
}

// Nodes in an order where every input is produced before it is read. ONNX requires files
// to be sorted already; exporters occasionally are not, so sort stably instead of refusing.
std::vector<int> topological_order(const onnx::GraphProto& g,
                                   const std::set<std::string>& available) {
  const int n = g.node_size();
  std::unordered_map<std::string, int> producer;
  for (int i = 0; i < n; ++i) {
    for (const auto& out : g.node(i).output()) {
      if (!out.empty()) producer.emplace(out, i);
    }
  }
  std::vector<int> order;
  std::vector<int> state(n, 0);  // 0 new, 1 visiting, 2 done
  // Iterative DFS so deep graphs cannot overflow the stack.
  for (int root = 0; root < n; ++root) {
    if (state[root]) continue;
    std::vector<std::pair<int, int>> stack{{root, 0}};
    state[root] = 1;
    while (!stack.empty()) {
      auto& [node, next_input] = stack.back();
      const auto& inputs = g.node(node).input();
      if (next_input < inputs.size()) {
        const std::string& name = inputs[next_input++];
        if (name.empty() || available.count(name)) continue;
        auto it = producer.find(name);
        if (it == producer.end() || it->second == node) continue;
        if (state[it->second] == 1) {
          throw Error(node_label(g.node(node), node) + ": input '" + name + "' is part of a cycle");
        }
        if (state[it->second] == 0) {
          state[it->second] = 1;
          stack.push_back({it->second, 0});
        }
        continue;
      }
      state[node] = 2;
      order.push_back(node);
      stack.pop_back();
    }
  }
  return order;
}

class Importer {
 public:
  explicit Importer(const ir::Model& model) : model_(model) {}

  // A node's output of sequence type, named with the node and what in PyTorch exports one.
  static std::string sequence_output(const onnx::NodeProto& np, int index,
                                     const std::string& name) {
    return "value '" + name + "', output of " + node_label(np, index).substr(5) +
           ", has sequence type; ampc supports dense tensor values only (torch.onnx.export "
           "writes torch.tensor_split, a torch.repeat_interleave along an axis it cannot "
           "size, and a torch.split or torch.chunk into pieces it cannot size, as a sequence; "
           "ampc.export and ampc.compile of the module trace them as slices and expands)";
  }

  void import_graph(const onnx::GraphProto& gp, ir::Graph& g) {
    g.name = gp.name();
    g.doc_string = gp.doc_string();
    if (gp.sparse_initializer_size() > 0) {
      throw Error("graph '" + gp.name() + "': sparse initializer '" +
                  gp.sparse_initializer(0).values().name() + "' is not supported");
    }
    std::unordered_map<std::string, const onnx::ValueInfoProto*> infos;
    for (const auto& vi : gp.value_info()) infos[vi.name()] = &vi;
    for (const auto& vi : gp.output()) infos.emplace(vi.name(), &vi);

    std::set<std::string> available;
    for (const auto& in : gp.input()) {
      ir::Value* v = define(g, in.name(), "graph input");
      v->type = type_from_proto(in.type(), in.name());
      v->doc_string = in.doc_string();
      v->is_graph_input = true;
      g.inputs.push_back(v);
      available.insert(in.name());
    }
    for (const auto& t : gp.initializer()) {
      ir::Value* v = g.find_value(t.name());
      if (!v || v->owner != &g || !v->is_graph_input || v->is_initializer()) {
        v = define(g, t.name(), "initializer");
      }
      v->initializer =
          std::make_unique<ir::Tensor>(tensor_from_proto(t, "initializer '" + t.name() + "'"));
      if (!v->is_graph_input) v->type = {v->initializer->dtype, v->initializer->dims};
      v->from_model = true;
      g.initializers.push_back(v);
      available.insert(t.name());
    }
    for (const auto& [name, v] : scope_names(g.parent)) available.insert(name);

    for (int index : topological_order(gp, available)) import_node(gp.node(index), index, g, infos);

    for (const auto& out : gp.output()) {
      ir::Value* v = g.find_value(out.name());
      if (!v) {
        throw Error("graph output '" + out.name() +
                    "' is never produced (no node, input or initializer has that name)");
      }
      if (v->type.dtype == DType::kUndefined) v->type = type_from_proto(out.type(), out.name());
      if (out.has_doc_string()) v->doc_string = out.doc_string();
      g.outputs.push_back(v);
    }
  }

 private:
  // Names visible from enclosing graphs (for subgraphs reading outer values).
  static std::vector<std::pair<std::string, ir::Value*>> scope_names(const ir::Graph* g) {
    std::vector<std::pair<std::string, ir::Value*>> names;
    for (; g; g = g->parent) {
      for (const auto& v : g->values) names.emplace_back(v->name, v.get());
    }
    return names;
  }

  ir::Value* define(ir::Graph& g, const std::string& name, const std::string& what) {
    if (name.empty()) throw Error("graph '" + g.name + "': a " + what + " has an empty name");
    for (const auto& v : g.values) {
      if (v->name == name) {
        throw Error("value '" + name + "' is defined twice (as " + what + " and earlier as " +
                    (v->producer ? "output of " + v->producer->label()
                                 : std::string(v->is_graph_input ? "graph input" : "initializer")) +
                    ")");
      }
    }
    return g.add_value(name);
  }

  void check_op_known(const onnx::NodeProto& n, int index) {
    const std::string& domain = n.domain();
    if (!is_known_domain(domain)) {
      throw Error(node_label(n, index) + " uses unknown operator domain '" + domain + "'");
    }
    auto version = model_.opset_version(domain);
    if (!version) {
      throw Error(node_label(n, index) + ": the model imports no opset for domain '" +
                  (domain.empty() ? "ai.onnx" : domain) + "'");
    }
    if (!onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(*version), domain)) {
      throw Error(node_label(n, index) + ": no operator '" + n.op_type() + "' in domain '" +
                  (domain.empty() ? "ai.onnx" : domain) + "' at opset " + std::to_string(*version));
    }
  }

  void import_node(const onnx::NodeProto& np, int index, ir::Graph& g,
                   const std::unordered_map<std::string, const onnx::ValueInfoProto*>& infos) {
    check_op_known(np, index);
    std::vector<ir::Value*> inputs;
    for (const auto& name : np.input()) {
      if (name.empty()) {
        inputs.push_back(nullptr);
        continue;
      }
      ir::Value* v = g.find_value(name);
      if (!v) {
        throw Error(
            node_label(np, index) + ": input '" + name +
            "' has no producer (not a graph input, an initializer or an output of another node)");
      }
      inputs.push_back(v);
    }
    std::vector<ir::Value*> outputs;
    for (const auto& name : np.output()) {
      if (name.empty()) {
        outputs.push_back(nullptr);
        continue;
      }
      ir::Value* v = define(g, name, "output of " + node_label(np, index).substr(5));
      if (auto it = infos.find(name); it != infos.end()) {
        if (it->second->type().has_sequence_type()) throw Error(sequence_output(np, index, name));
        v->type = type_from_proto(it->second->type(), name);
      }
      outputs.push_back(v);
    }
    ir::Node* node = g.add_node(np.op_type(), inputs, outputs, np.name(), np.domain());
    node->doc_string = np.doc_string();
    for (const auto& ap : np.attribute())
      node->attributes.push_back(import_attribute(ap, np, index, g));
  }

  ir::Attribute import_attribute(const onnx::AttributeProto& ap, const onnx::NodeProto& np,
                                 int index, ir::Graph& g) {
    const std::string what = node_label(np, index) + " attribute '" + ap.name() + "'";
    if (!ap.ref_attr_name().empty())
      throw Error(what + ": attribute references are only valid inside functions");
    ir::Attribute a;
    a.name = ap.name();
    a.doc_string = ap.doc_string();
    using AP = onnx::AttributeProto;
    switch (ap.type()) {
      case AP::FLOAT:
        a.kind = ir::AttrKind::kFloat;
        a.f = ap.f();
        break;
      case AP::INT:
        a.kind = ir::AttrKind::kInt;
        a.i = ap.i();
        break;
      case AP::STRING:
        a.kind = ir::AttrKind::kString;
        a.s = ap.s();
        break;
      case AP::TENSOR:
        a.kind = ir::AttrKind::kTensor;
        a.t = tensor_from_proto(ap.t(), what);
        break;
      case AP::GRAPH:
        a.kind = ir::AttrKind::kGraph;
        a.g = subgraph(ap.g(), g);
        break;
      case AP::FLOATS:
        a.kind = ir::AttrKind::kFloats;
        a.floats.assign(ap.floats().begin(), ap.floats().end());
        break;
      case AP::INTS:
        a.kind = ir::AttrKind::kInts;
        a.ints.assign(ap.ints().begin(), ap.ints().end());
        break;
      case AP::STRINGS:
        a.kind = ir::AttrKind::kStrings;
        a.strings.assign(ap.strings().begin(), ap.strings().end());
        break;
      case AP::TENSORS:
        a.kind = ir::AttrKind::kTensors;
        for (const auto& t : ap.tensors()) a.tensors.push_back(tensor_from_proto(t, what));
        break;
      case AP::GRAPHS:
        a.kind = ir::AttrKind::kGraphs;
        for (const auto& sg : ap.graphs()) a.graphs.push_back(subgraph(sg, g));
        break;
      case AP::SPARSE_TENSOR:
      case AP::SPARSE_TENSORS:
        throw Error(what + ": sparse tensor attributes are not supported");
      case AP::TYPE_PROTO:
      case AP::TYPE_PROTOS:
        throw Error(what + ": type attributes are not supported");
      default:
        throw Error(what + ": attribute has no type");
    }
    return a;
  }

  std::unique_ptr<ir::Graph> subgraph(const onnx::GraphProto& gp, ir::Graph& parent) {
    auto sub = std::make_unique<ir::Graph>();
    sub->parent = &parent;
    import_graph(gp, *sub);
    return sub;
  }

  const ir::Model& model_;
};

// Replaces a model in training format by its combined training graph (training_info.h)
// whose outputs are the main graph's only (the update sources stay alive as state update
// sources); returns the update_binding (target, source) pairs.
std::vector<std::pair<std::string, std::string>> take_training_graph(onnx::ModelProto& proto) {
  check_training_info(proto);
  std::vector<std::pair<std::string, std::string>> bindings;
  for (const auto& b : proto.training_info(0).update_binding())
    bindings.emplace_back(b.key(), b.value());
  const int main_outputs = proto.graph().output_size();
  proto = combined_training_model(proto);
  auto* outputs = proto.mutable_graph()->mutable_output();
  for (int i = main_outputs; i < outputs->size(); ++i)
    *proto.mutable_graph()->add_value_info() = outputs->Get(i);
  outputs->DeleteSubrange(main_outputs, outputs->size() - main_outputs);
  return bindings;
}

void add_state_updates(ir::Model& model,
                       const std::vector<std::pair<std::string, std::string>>& bindings) {
  for (const auto& [key, value] : bindings) {
    ir::Value* target = model.graph->find_value(key);
    ir::Value* source = model.graph->find_value(value);
    if (!target || !target->is_initializer()) {
      throw Error("training_info update_binding '" + key + "' <- '" + value + "': '" + key +
                  "' is not an initializer");
    }
    if (!source) {
      throw Error("training_info update_binding '" + key + "' <- '" + value +
                  "': no value of that name");
    }
    if (source->type.dtype != DType::kUndefined && source->type.dtype != target->type.dtype) {
      throw Error("training_info update_binding '" + key + "' <- '" + value + "': " +
                  target->type.str() + " initializer bound to a " + source->type.str() + " value");
    }
    model.state_updates.push_back({target, source});
  }
}

}  // namespace

std::unique_ptr<ir::Model> import_model(onnx::ModelProto& proto, const ImportOptions& options) {
  ops::register_amp_schemas();  // the whole "ampc" domain
  if (proto.functions_size() > 0) {
    throw Error("model-local function '" + proto.functions(0).name() + "' is not supported");
  }
  std::vector<std::pair<std::string, std::string>> bindings;
  if (proto.training_info_size() > 0 && options.training) {
    bindings = take_training_graph(proto);
  } else {
    proto.clear_training_info();
  }
  apply_input_shapes(proto, options);
  if (options.require_static_inputs) require_static_inputs(proto);

  // Unknown domains are reported naming the node that uses them (before the bare opset
  // import, which names no node) and before shape inference trips over them.
  for (int i = 0; i < proto.graph().node_size(); ++i) {
    const auto& n = proto.graph().node(i);
    if (!is_known_domain(n.domain())) {
      throw Error(node_label(n, i) + " uses unknown operator domain '" + n.domain() + "'");
    }
  }
  auto model = std::make_unique<ir::Model>();
  model->ir_version = proto.ir_version();
  for (const auto& o : proto.opset_import()) {
    if (!is_known_domain(o.domain())) {
      throw Error("the model imports unknown operator domain '" + o.domain() + "'");
    }
    model->opsets.push_back({o.domain(), o.version()});
  }
  // torch's cross-entropy with probability targets, as PyTorch computes it.
  expand_soft_target_cross_entropy(proto);
  // torch's negative Transpose perms (x.movedim(a, -1)) as the axes they name.
  normalize_transpose_perms(*proto.mutable_graph());
  infer_shapes(proto);

  model->producer_name = proto.producer_name();
  model->producer_version = proto.producer_version();
  model->domain = proto.domain();
  model->model_version = proto.model_version();
  model->doc_string = proto.doc_string();
  for (const auto& kv : proto.metadata_props()) model->metadata.emplace_back(kv.key(), kv.value());

  Importer(*model).import_graph(proto.graph(), *model->graph);
  refuse_double_scalar_where(*model->graph);  // before the verifier's less helpful mismatch
  add_state_updates(*model, bindings);
  ir::verify(*model, {.require_static_inputs = options.require_static_inputs});
  return model;
}

std::unique_ptr<ir::Model> load_model(const std::string& path, const ImportOptions& options) {
  onnx::ModelProto proto = read_model_proto(path);
  resolve_external_data(proto, std::filesystem::path(path).parent_path().string());
  return import_model(proto, options);
}

}  // namespace ampc::onnx_io
