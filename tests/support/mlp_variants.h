// Variants of models/mlp.onnx with one node inserted after its first Gemm, for the tests of
// what the backends run: a training-mode Dropout as torch.onnx.export writes nn.Dropout in
// training mode (opset 12 on: the ratio and training_mode as constant inputs), random noise
// as torch.randn_like / torch.rand_like export, a square (Pow by 2), or a unary op.
// Header-only: ONNX's protobuf classes.
#pragma once

#include <onnx/onnx_pb.h>

#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

#include "tests/support/onnx_builder.h"

namespace ampc::test {

namespace detail {

// `mlp_path`'s model with `node` (its first input and output still unset) reading the first
// Gemm's output; every other reader of that output reads the node's output instead.
inline onnx::ModelProto with_node_after_first_gemm(const std::string& mlp_path,
                                                   onnx::NodeProto node) {
  std::ifstream in(mlp_path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  onnx::ModelProto m;
  if (!m.ParseFromString(bytes)) throw std::runtime_error("not a model: " + mlp_path);
  onnx::GraphProto* g = m.mutable_graph();
  int at = 0;
  while (at < g->node_size() && g->node(at).op_type() != "Gemm") ++at;
  if (at == g->node_size()) throw std::runtime_error("no Gemm in " + mlp_path);
  const std::string h = g->node(at).output(0), replaced = h + "_" + node.op_type();
  for (auto& n : *g->mutable_node()) {
    for (auto& name : *n.mutable_input()) {
      if (name == h) name = replaced;
    }
  }
  node.set_input(0, h);
  node.set_output(0, replaced);
  // Insert after the Gemm: append, then bubble it back to position at + 1.
  *g->add_node() = node;
  for (int k = g->node_size() - 1; k > at + 1; --k) g->mutable_node()->SwapElements(k, k - 1);
  return m;
}

// A binary node `op` named `name` reading the first Gemm's output (set by
// with_node_after_first_gemm) and `second`.
inline onnx::NodeProto binary(const std::string& op, const std::string& name,
                              const std::string& second) {
  onnx::NodeProto n;
  n.set_op_type(op);
  n.set_name(name);
  n.add_input("");
  n.add_input(second);
  n.add_output("");
  return n;
}

using onnx_build::write_model;

}  // namespace detail

// y = Dropout(gemm_out, ratio, true) after the first Gemm, with its mask output.
inline void write_mlp_with_dropout(const std::string& mlp_path, const std::string& out_path,
                                   float ratio) {
  onnx::NodeProto d;
  d.set_op_type("Dropout");
  d.set_name("/dropout/Dropout");
  for (const char* i : {"", "dropout_ratio", "dropout_training"}) d.add_input(i);
  d.add_output("");
  d.add_output("dropout_mask");
  onnx::ModelProto m = detail::with_node_after_first_gemm(mlp_path, d);
  onnx::GraphProto* g = m.mutable_graph();
  onnx::TensorProto* r = g->add_initializer();
  r->set_name("dropout_ratio");
  r->set_data_type(onnx::TensorProto::FLOAT);
  r->add_float_data(ratio);
  onnx::TensorProto* t = g->add_initializer();
  t->set_name("dropout_training");
  t->set_data_type(onnx::TensorProto::BOOL);
  t->add_int32_data(1);
  detail::write_model(m, out_path);
}

// y = h + RandomNormalLike(h, scale 0.3) * RandomUniformLike(h, 0.5, 1.5) after the first Gemm
// (h): noise drawn anew each step, as `h + 0.3 * torch.randn_like(h) * (torch.rand_like(h) +
// 0.5)` exports (the scale and bounds as the ops' attributes), a constant of the step for the
// gradient.
inline void write_mlp_with_noise(const std::string& mlp_path, const std::string& out_path) {
  onnx::ModelProto m =
      detail::with_node_after_first_gemm(mlp_path, detail::binary("Add", "/noise/Add", "noise"));
  onnx::GraphProto* g = m.mutable_graph();
  int at = 0;
  while (g->node(at).name() != "/noise/Add") ++at;
  const std::string h = g->node(at).input(0);
  onnx::NodeProto n, u, mul;
  n.set_op_type("RandomNormalLike");
  n.set_name("/noise/RandomNormalLike");
  n.add_input(h);
  n.add_output("noise_normal");
  onnx_build::add_float(&n, "scale", 0.3f);
  u.set_op_type("RandomUniformLike");
  u.set_name("/noise/RandomUniformLike");
  u.add_input(h);
  u.add_output("noise_uniform");
  onnx_build::add_float(&u, "low", 0.5f);
  onnx_build::add_float(&u, "high", 1.5f);
  mul.set_op_type("Mul");
  mul.set_name("/noise/Mul");
  mul.add_input("noise_normal");
  mul.add_input("noise_uniform");
  mul.add_output("noise");
  // Insert the three before the Add, in this order.
  for (const onnx::NodeProto* node : {&n, &u, &mul}) {
    *g->add_node() = *node;
    for (int k = g->node_size() - 1; k > at; --k) g->mutable_node()->SwapElements(k, k - 1);
    ++at;
  }
  detail::write_model(m, out_path);
}

// y = Pow(gemm_out, 2) after the first Gemm (the exponent a float Constant node, as torch
// exports h.pow(2)), the node named "/square/Pow".
inline void write_mlp_with_square(const std::string& mlp_path, const std::string& out_path) {
  onnx::ModelProto m = detail::with_node_after_first_gemm(
      mlp_path, detail::binary("Pow", "/square/Pow", "square_exponent"));
  // The exponent from a Constant node (an initializer would be a parameter), first.
  onnx::GraphProto* g = m.mutable_graph();
  onnx::NodeProto* c = g->add_node();
  c->set_op_type("Constant");
  c->set_name("/square/Constant");
  c->add_output("square_exponent");
  onnx::AttributeProto* a = c->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  a->mutable_t()->add_float_data(2.0f);
  for (int k = g->node_size() - 1; k > 0; --k) g->mutable_node()->SwapElements(k, k - 1);
  detail::write_model(m, out_path);
}

// y = op(gemm_out) after the first Gemm, the node named `node_name`.
inline void write_mlp_with_unary(const std::string& mlp_path, const std::string& out_path,
                                 const std::string& op, const std::string& node_name) {
  onnx::NodeProto n;
  n.set_op_type(op);
  n.set_name(node_name);
  n.add_input("");
  n.add_output("");
  detail::write_model(detail::with_node_after_first_gemm(mlp_path, n), out_path);
}

}  // namespace ampc::test
