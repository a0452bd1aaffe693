// A small training model of the ops that move data between channels and space, for the tests
// of what the backends run: x [2, 4, 5, 5] -> ConvTranspose (weights [4, 2, 3, 3], group 2,
// stride 2, bias; torch's padding 1 with output padding 1, or an asymmetric padding cuDNN does
// not serve) -> [2, 4, 10, 10] -> DepthToSpace (CRD, torch's PixelShuffle, blocksize 2) ->
// [2, 1, 20, 20] -> SpaceToDepth (blocksize 2) -> [2, 4, 10, 10] -> + ConstantOfShape(0.5)
// -> loss = mean of the squares. Opset 17. Header-only: ONNX's protobuf classes.
#pragma once

#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace ampc::test {

namespace detail {

inline onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op,
                                 const std::vector<std::string>& in, const std::string& out) {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name("/" + op);
  for (const auto& i : in) n->add_input(i);
  n->add_output(out);
  return n;
}

inline void add_ints(onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

inline void add_int(onnx::NodeProto* n, const std::string& name, int64_t v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

inline void add_float_input(onnx::GraphProto* g, const std::string& name,
                            const std::vector<int64_t>& dims, bool output = false) {
  onnx::ValueInfoProto* v = output ? g->add_output() : g->add_input();
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
}

}  // namespace detail

// asymmetric: ConvTranspose pads (0, 0, 1, 1) and no output padding, which the CPU backend runs
// and the CUDA backend refuses (the same output size, 10 x 10).
inline void write_layout_ops_model(const std::string& out_path, bool asymmetric = false) {
  using detail::add_int;
  using detail::add_ints;
  using detail::add_node;
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("layout_ops");
  detail::add_float_input(g, "x", {2, 4, 5, 5});
  auto init = [&](const std::string& name, const std::vector<int64_t>& dims, float step) {
    onnx::TensorProto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) {
      t->add_dims(d);
      n *= d;
    }
    for (int64_t i = 0; i < n; ++i) t->add_float_data(0.3f * std::sin(step * (i + 1)));
  };
  init("w", {4, 2, 3, 3}, 0.7f);
  init("b", {4}, 1.3f);
  onnx::NodeProto* ct = add_node(g, "ConvTranspose", {"x", "w", "b"}, "up");
  add_ints(ct, "strides", {2, 2});
  add_int(ct, "group", 2);
  if (asymmetric) {
    add_ints(ct, "pads", {0, 0, 1, 1});
  } else {
    add_ints(ct, "pads", {1, 1, 1, 1});
    add_ints(ct, "output_padding", {1, 1});
  }
  onnx::NodeProto* d2s = add_node(g, "DepthToSpace", {"up"}, "space");
  add_int(d2s, "blocksize", 2);
  onnx::AttributeProto* mode = d2s->add_attribute();
  mode->set_name("mode");
  mode->set_type(onnx::AttributeProto::STRING);
  mode->set_s("CRD");
  add_int(add_node(g, "SpaceToDepth", {"space"}, "depth"), "blocksize", 2);
  onnx::TensorProto* shape = g->add_initializer();
  shape->set_name("fill_shape");
  shape->set_data_type(onnx::TensorProto::INT64);
  shape->add_dims(4);
  for (int64_t d : {2, 4, 10, 10}) shape->add_int64_data(d);
  onnx::NodeProto* fill = add_node(g, "ConstantOfShape", {"fill_shape"}, "half");
  onnx::AttributeProto* value = fill->add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  value->mutable_t()->add_dims(1);
  value->mutable_t()->add_float_data(0.5f);
  add_node(g, "Add", {"depth", "half"}, "z");
  add_node(g, "Mul", {"z", "z"}, "z2");
  add_int(add_node(g, "ReduceMean", {"z2"}, "loss"), "keepdims", 0);
  detail::add_float_input(g, "loss", {}, true);
  std::string bytes;
  if (!m.SerializeToString(&bytes)) throw std::runtime_error("cannot serialise the model");
  std::ofstream(out_path, std::ios::binary) << bytes;
}

}  // namespace ampc::test
