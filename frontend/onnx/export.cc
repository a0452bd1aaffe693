#include "frontend/onnx/export.h"

#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include "base/error.h"
#include "base/file_util.h"
#include "frontend/onnx/onnx_errors.h"
#include "frontend/onnx/proto_convert.h"
#include "frontend/onnx/training_info.h"
#include "ops/schemas/amp_schemas.h"

namespace ampc::onnx_io {

void value_info(const ir::Value& v, onnx::ValueInfoProto* out) {
  out->set_name(v.name);
  if (!v.doc_string.empty()) out->set_doc_string(v.doc_string);
  if (v.type.dtype != DType::kUndefined) type_to_proto(v.type, out->mutable_type());
}

namespace {

void export_attribute(const ir::Attribute& a, onnx::AttributeProto* out) {
  out->set_name(a.name);
  if (!a.doc_string.empty()) out->set_doc_string(a.doc_string);
  using AP = onnx::AttributeProto;
  switch (a.kind) {
    case ir::AttrKind::kFloat:
      out->set_type(AP::FLOAT);
      out->set_f(a.f);
      break;
    case ir::AttrKind::kInt:
      out->set_type(AP::INT);
      out->set_i(a.i);
      break;
    case ir::AttrKind::kString:
      out->set_type(AP::STRING);
      out->set_s(a.s);
      break;
    case ir::AttrKind::kTensor:
      out->set_type(AP::TENSOR);
      tensor_to_proto(a.t, out->mutable_t());
      break;
    case ir::AttrKind::kGraph:
      out->set_type(AP::GRAPH);
      export_graph(*a.g, out->mutable_g());
      break;
    case ir::AttrKind::kFloats:
      out->set_type(AP::FLOATS);
      for (float f : a.floats) out->add_floats(f);
      break;
    case ir::AttrKind::kInts:
      out->set_type(AP::INTS);
      for (int64_t i : a.ints) out->add_ints(i);
      break;
    case ir::AttrKind::kStrings:
      out->set_type(AP::STRINGS);
      for (const auto& s : a.strings) out->add_strings(s);
      break;
    case ir::AttrKind::kTensors:
      out->set_type(AP::TENSORS);
      for (const auto& t : a.tensors) tensor_to_proto(t, out->add_tensors());
      break;
    case ir::AttrKind::kGraphs:
      out->set_type(AP::GRAPHS);
      for (const auto& sg : a.graphs) export_graph(*sg, out->add_graphs());
      break;
  }
}

}  // namespace

void export_node(const ir::Node& n, onnx::NodeProto* np) {
  for (const ir::Value* v : n.inputs) np->add_input(v ? v->name : "");
  for (const ir::Value* v : n.outputs) np->add_output(v ? v->name : "");
  if (!n.name.empty()) np->set_name(n.name);
  np->set_op_type(n.op_type);
  if (!n.domain.empty()) np->set_domain(n.domain);
  if (!n.doc_string.empty()) np->set_doc_string(n.doc_string);
  for (const auto& a : n.attributes) export_attribute(a, np->add_attribute());
}

void export_graph(const ir::Graph& g, onnx::GraphProto* out) {
  out->set_name(g.name);
  if (!g.doc_string.empty()) out->set_doc_string(g.doc_string);
  for (const ir::Value* v : g.inputs) value_info(*v, out->add_input());
  for (const ir::Value* v : g.initializers)
    tensor_to_proto(*v->initializer, out->add_initializer());
  for (const auto& n : g.nodes) export_node(*n, out->add_node());
  for (const ir::Value* v : g.outputs) value_info(*v, out->add_output());
  // Types of intermediate values, so that a re-import needs no inference to know them.
  for (const auto& v : g.values) {
    if (is_intermediate(*v, g.outputs)) value_info(*v, out->add_value_info());
  }
}

bool is_intermediate(const ir::Value& v, const std::vector<ir::Value*>& outputs) {
  if (v.is_graph_input || v.is_initializer() || v.type.dtype == DType::kUndefined) return false;
  for (const ir::Value* o : outputs) {
    if (o == &v) return false;
  }
  return true;
}

void export_model_header(const ir::Model& model, onnx::ModelProto* proto) {
  proto->set_ir_version(model.ir_version);
  for (const auto& o : model.opsets) {
    auto* op = proto->add_opset_import();
    op->set_domain(o.domain);
    op->set_version(o.version);
  }
  if (!model.producer_name.empty()) proto->set_producer_name(model.producer_name);
  if (!model.producer_version.empty()) proto->set_producer_version(model.producer_version);
  if (!model.domain.empty()) proto->set_domain(model.domain);
  if (model.model_version) proto->set_model_version(model.model_version);
  if (!model.doc_string.empty()) proto->set_doc_string(model.doc_string);
  for (const auto& [k, v] : model.metadata) {
    auto* kv = proto->add_metadata_props();
    kv->set_key(k);
    kv->set_value(v);
  }
}

onnx::ModelProto export_model(const ir::Model& model) {
  onnx::ModelProto proto;
  export_model_header(model, &proto);
  export_graph(*model.graph, proto.mutable_graph());
  return proto;
}

std::string serialize_model(const onnx::ModelProto& proto) {
  std::string bytes;
  if (!proto.SerializeToString(&bytes)) throw Error("cannot serialise the model (over 2 GiB?)");
  return bytes;
}

void save_model(const ir::Model& model, const std::string& path) {
  write_file_atomically(path, serialize_model(export_model(model)));
}

void check_model(const onnx::ModelProto& proto) {
  ops::register_amp_schemas();  // the whole "ampc" domain
  with_first_line_errors("ONNX checker: ", [&] {
    onnx::checker::check_model(proto);
    onnx::ShapeInferenceOptions strict(/*check_type=*/true, /*error_mode=*/1, /*data_prop=*/false);
    // libonnx 1.12's checker does not look at training_info; the combined training graph
    // (main graph + algorithm) must be a valid graph too, so check that as a model of its own.
    onnx::ModelProto copy = proto.training_info_size() ? combined_training_model(proto) : proto;
    if (proto.training_info_size()) onnx::checker::check_model(copy);
    onnx::shape_inference::InferShapes(copy, onnx::OpSchemaRegistry::Instance(), strict);
  });
}

}  // namespace ampc::onnx_io
