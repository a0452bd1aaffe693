// models/mlp.onnx with a training-mode Dropout after its first Gemm, as torch.onnx.export
// writes nn.Dropout in training mode (opset 12 on: the ratio and training_mode as constant
// inputs), for the tests of the backends' Dropout. Header-only: ONNX's protobuf classes.
#pragma once

#include <onnx/onnx_pb.h>

#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

namespace ampc::test {

// Reads the model at `mlp_path`, inserts y = Dropout(gemm_out, ratio, true) after the first
// Gemm (every reader of gemm_out reads y instead) and writes it to `out_path`.
inline void write_mlp_with_dropout(const std::string& mlp_path, const std::string& out_path,
                                   float ratio) {
  std::ifstream in(mlp_path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  onnx::ModelProto m;
  if (!m.ParseFromString(bytes)) throw std::runtime_error("not a model: " + mlp_path);
  onnx::GraphProto* g = m.mutable_graph();
  int at = 0;
  while (at < g->node_size() && g->node(at).op_type() != "Gemm") ++at;
  if (at == g->node_size()) throw std::runtime_error("no Gemm in " + mlp_path);
  const std::string h = g->node(at).output(0), dropped = h + "_dropped";
  for (auto& n : *g->mutable_node()) {
    for (auto& name : *n.mutable_input()) {
      if (name == h) name = dropped;
    }
  }
  onnx::TensorProto* r = g->add_initializer();
  r->set_name("dropout_ratio");
  r->set_data_type(onnx::TensorProto::FLOAT);
  r->add_float_data(ratio);
  onnx::TensorProto* t = g->add_initializer();
  t->set_name("dropout_training");
  t->set_data_type(onnx::TensorProto::BOOL);
  t->add_int32_data(1);
  onnx::NodeProto d;
  d.set_op_type("Dropout");
  d.set_name("/dropout/Dropout");
  for (const char* i : {"", "dropout_ratio", "dropout_training"}) d.add_input(i);
  d.set_input(0, h);
  d.add_output(dropped);
  d.add_output("dropout_mask");
  // Insert after the Gemm: append, then bubble it back to position at + 1.
  *g->add_node() = d;
  for (int k = g->node_size() - 1; k > at + 1; --k) g->mutable_node()->SwapElements(k, k - 1);
  std::string out;
  if (!m.SerializeToString(&out)) throw std::runtime_error("cannot serialise the model");
  std::ofstream(out_path, std::ios::binary) << out;
}

}  // namespace ampc::test
