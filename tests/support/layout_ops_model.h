// A small training model of the ops that move data between channels and space, for the tests
// of what the backends run: x [2, 4, 5, 5] -> ConvTranspose (weights [4, 2, 3, 3], group 2,
// stride 2, bias; torch's padding 1 with output padding 1, or an asymmetric padding cuDNN does
// not serve) -> [2, 4, 10, 10] -> DepthToSpace (CRD, torch's PixelShuffle, blocksize 2) ->
// [2, 1, 20, 20] -> SpaceToDepth (blocksize 2) -> [2, 4, 10, 10] -> + ConstantOfShape(0.5)
// -> loss = mean of the squares. Opset 17.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/onnx_builder.h"

namespace ampc::test {

// asymmetric: ConvTranspose pads (0, 0, 1, 1) and no output padding, which the CPU backend runs
// and the CUDA backend refuses (the same output size, 10 x 10).
inline void write_layout_ops_model(const std::string& out_path, bool asymmetric = false) {
  namespace ob = onnx_build;
  onnx::ModelProto m = ob::model("layout_ops");
  onnx::GraphProto* g = m.mutable_graph();
  ob::add_float_io(g, "x", {2, 4, 5, 5});
  auto waves = [](int64_t n, float step) {
    std::vector<float> v;
    for (int64_t i = 0; i < n; ++i) v.push_back(0.3f * std::sin(step * static_cast<float>(i + 1)));
    return v;
  };
  ob::add_float_initializer(g, "w", {4, 2, 3, 3}, waves(72, 0.7f));
  ob::add_float_initializer(g, "b", {4}, waves(4, 1.3f));
  onnx::NodeProto* ct = ob::add_node(g, "ConvTranspose", {"x", "w", "b"}, "up");
  ob::add_ints(ct, "strides", {2, 2});
  ob::add_int(ct, "group", 2);
  if (asymmetric) {
    ob::add_ints(ct, "pads", {0, 0, 1, 1});
  } else {
    ob::add_ints(ct, "pads", {1, 1, 1, 1});
    ob::add_ints(ct, "output_padding", {1, 1});
  }
  onnx::NodeProto* d2s = ob::add_node(g, "DepthToSpace", {"up"}, "space");
  ob::add_int(d2s, "blocksize", 2);
  ob::add_string(d2s, "mode", "CRD");
  ob::add_int(ob::add_node(g, "SpaceToDepth", {"space"}, "depth"), "blocksize", 2);
  ob::add_int64_initializer(g, "fill_shape", {2, 4, 10, 10});
  onnx::NodeProto* fill = ob::add_node(g, "ConstantOfShape", {"fill_shape"}, "half");
  onnx::AttributeProto* value = fill->add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  value->mutable_t()->add_dims(1);
  value->mutable_t()->add_float_data(0.5f);
  ob::add_node(g, "Add", {"depth", "half"}, "z");
  ob::add_node(g, "Mul", {"z", "z"}, "z2");
  ob::add_int(ob::add_node(g, "ReduceMean", {"z2"}, "loss"), "keepdims", 0);
  ob::add_float_io(g, "loss", {}, true);
  ob::write_model(m, out_path);
}

}  // namespace ampc::test
