// Small ONNX models written by hand for the tests: nodes with int, ints and string attributes,
// float graph inputs and outputs, float and int64 initializers, and the model written to a
// file. Header-only: ONNX's protobuf classes.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace ampc::test::onnx_build {

// A model of one graph at ONNX opset `opset`.
inline onnx::ModelProto model(const std::string& name, int64_t opset = 17) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(opset);
  m.mutable_graph()->set_name(name);
  return m;
}

// Node `op` named "/out", reading `in`, writing `out`.
inline onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op,
                                 const std::vector<std::string>& in, const std::string& out) {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name("/" + out);
  for (const auto& i : in) n->add_input(i);
  n->add_output(out);
  return n;
}

inline void add_int(onnx::NodeProto* n, const std::string& name, int64_t v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

inline void add_float(onnx::NodeProto* n, const std::string& name, float v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

inline void add_ints(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

inline void add_string(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

// A float graph input (or output) of static shape `dims`.
inline void add_float_io(onnx::GraphProto* g, const std::string& name,
                         const std::vector<int64_t>& dims, bool output = false) {
  onnx::ValueInfoProto* v = output ? g->add_output() : g->add_input();
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  t->mutable_shape();
  for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
}

inline onnx::TensorProto* add_float_initializer(onnx::GraphProto* g, const std::string& name,
                                                const std::vector<int64_t>& dims,
                                                const std::vector<float>& values) {
  onnx::TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  for (float v : values) t->add_float_data(v);
  return t;
}

inline onnx::TensorProto* add_int64_initializer(onnx::GraphProto* g, const std::string& name,
                                                const std::vector<int64_t>& values) {
  onnx::TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) t->add_int64_data(v);
  return t;
}

inline void write_model(const onnx::ModelProto& m, const std::string& out_path) {
  std::string out;
  if (!m.SerializeToString(&out)) throw std::runtime_error("cannot serialise the model");
  std::ofstream(out_path, std::ios::binary) << out;
}

}  // namespace ampc::test::onnx_build
