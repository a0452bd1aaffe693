#include "frontend/onnx/export_training.h"

#include <map>
#include <vector>

#include "base/error.h"
#include "frontend/onnx/export.h"
#include "frontend/onnx/proto_convert.h"

namespace ampc::onnx_io {
namespace {

// The inference graph: the nodes that the graph outputs need, and the values of `g` these
// nodes (or their subgraphs) read, plus the outputs.
struct Inference {
  std::set<const ir::Node*> nodes;
  std::set<const ir::Value*> reads;
};

Inference inference_part(const ir::Graph& g) {
  Inference inf;
  std::set<const ir::Node*>& needed = inf.nodes;
  std::vector<const ir::Value*> work(g.outputs.begin(), g.outputs.end());
  while (!work.empty()) {
    const ir::Value* v = work.back();
    work.pop_back();
    if (v) inf.reads.insert(v);
    if (!v || !v->producer || v->producer->owner != &g || !needed.insert(v->producer).second)
      continue;
    for (const ir::Value* in : v->producer->inputs) work.push_back(in);
    // Subgraphs (If/Loop/Scan) may read values of this graph by name.
    for (const auto& a : v->producer->attributes) {
      auto read_outer = [&](const ir::Graph& sub) {
        for (const auto& n : sub.nodes) {
          for (const ir::Value* in : n->inputs) {
            if (in && in->owner == &g) work.push_back(in);
          }
        }
      };
      if (a.g) a.g->for_each_graph(read_outer);
      for (const auto& sg : a.graphs) sg->for_each_graph(read_outer);
    }
  }
  return inf;
}

// A value name not yet used in `g`, starting from `base`.
std::string fresh_name(const ir::Graph& g, const std::string& base,
                       const std::set<std::string>& taken) {
  std::string name = base;
  for (int i = 1; g.find_value(name) || taken.count(name); ++i)
    name = base + "_" + std::to_string(i);
  return name;
}

}  // namespace

onnx::ModelProto export_training_model(const ir::Model& model) {
  if (model.state_updates.empty())
    throw Error("the model has no state updates: there is no training step to export");
  const ir::Graph& g = *model.graph;
  const Inference inference = inference_part(g);
  const std::set<const ir::Node*>& main_nodes = inference.nodes;
  const std::set<const ir::Value*>& main_reads = inference.reads;
  // Inputs and initializers nobody reads stay in the main graph.
  auto in_main = [&](const ir::Value* v) { return main_reads.count(v) || v->uses.empty(); };

  onnx::ModelProto proto;
  export_model_header(model, &proto);
  onnx::GraphProto* main = proto.mutable_graph();
  onnx::TrainingInfoProto* info = proto.add_training_info();
  onnx::GraphProto* algorithm = info->mutable_algorithm();
  main->set_name(g.name);
  if (!g.doc_string.empty()) main->set_doc_string(g.doc_string);
  algorithm->set_name(g.name + ".training_step");
  auto graph_of = [&](const ir::Value* v) { return in_main(v) ? main : algorithm; };

  for (const ir::Value* v : g.inputs) value_info(*v, graph_of(v)->add_input());
  for (const ir::Value* v : g.initializers)
    tensor_to_proto(*v->initializer, graph_of(v)->add_initializer());
  for (const auto& n : g.nodes)
    export_node(*n, (main_nodes.count(n.get()) ? main : algorithm)->add_node());
  for (const ir::Value* v : g.outputs) value_info(*v, main->add_output());

  // Algorithm outputs: the update sources, main-graph sources through an Identity.
  std::vector<ir::Value*> algorithm_outputs;
  std::map<const ir::Value*, std::string> bound_name;
  std::set<std::string> added_names;
  for (const auto& u : model.state_updates) {
    if (bound_name.count(u.source)) continue;
    const bool computed_by_algorithm = u.source->producer && !main_nodes.count(u.source->producer);
    if (computed_by_algorithm) {
      bound_name[u.source] = u.source->name;
      algorithm_outputs.push_back(u.source);
      value_info(*u.source, algorithm->add_output());
      continue;
    }
    const std::string name = fresh_name(g, u.source->name + ".update", added_names);
    added_names.insert(name);
    bound_name[u.source] = name;
    onnx::NodeProto* id = algorithm->add_node();
    id->set_name(name + ".identity");
    id->set_op_type("Identity");
    id->add_input(u.source->name);
    id->add_output(name);
    onnx::ValueInfoProto* out = algorithm->add_output();
    value_info(*u.source, out);
    out->set_name(name);
  }
  // Types of intermediate values, in the graph that computes them.
  for (const auto& v : g.values) {
    const bool main_value = v->producer && main_nodes.count(v->producer);
    if (is_intermediate(*v, main_value ? g.outputs : algorithm_outputs))
      value_info(*v, (main_value ? main : algorithm)->add_value_info());
  }
  for (const auto& u : model.state_updates) {
    auto* b = info->add_update_binding();
    b->set_key(u.target->name);
    b->set_value(bound_name.at(u.source));
  }
  return proto;
}

void drop_initializer_data(onnx::ModelProto& proto, const std::set<std::string>& names) {
  auto drop = [&](onnx::GraphProto* g) {
    for (onnx::TensorProto& t : *g->mutable_initializer()) {
      if (!names.count(t.name())) continue;
      onnx::TensorProto bare;
      bare.set_name(t.name());
      bare.set_data_type(t.data_type());
      *bare.mutable_dims() = t.dims();
      t = std::move(bare);
    }
  };
  drop(proto.mutable_graph());
  for (auto& info : *proto.mutable_training_info()) drop(info.mutable_algorithm());
}

}  // namespace ampc::onnx_io
