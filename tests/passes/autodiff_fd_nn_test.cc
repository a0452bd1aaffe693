// Gradient rules of Conv, the pooling ops and the normalisation layers (rules_nn.cc and the
// "ampc" domain's gradient ops) against central finite differences in fp64 (fd_check.h).
#include <gtest/gtest.h>

#include "frontend/onnx/export.h"
#include "frontend/onnx/import.h"
#include "passes/autodiff/autodiff.h"
#include "tests/passes/fd_check.h"

namespace ampc {
namespace {

using namespace ampc::fd;  // NOLINT: the test speaks the harness vocabulary

using ir::Attribute;
using passes::autodiff::attrs;
using passes::autodiff::GradBuilder;
using P = const std::vector<ir::Value*>&;

Case conv(std::string name, Shape x, Shape w, Shape out, int64_t group, Shape strides, Shape pads,
          Shape dilations, bool bias = true) {
  std::vector<Shape> params = {x, w};
  if (bias) params.push_back({w[0]});
  return {name, params, out, [=](GradBuilder& g, P p) {
            auto a =
                attrs(Attribute::make_int("group", group), Attribute::make_ints("strides", strides),
                      Attribute::make_ints("dilations", dilations));
            if (!pads.empty()) a.push_back(Attribute::make_ints("pads", pads));
            if (pads.empty()) a.push_back(Attribute::make_string("auto_pad", "SAME_UPPER"));
            return g.op("Conv", p, f64(out), std::move(a));
          }};
}

TEST(AutodiffFiniteDifferencesNn, Conv) {
  // 2-D: groups, different strides, asymmetric pads and dilations per axis.
  check(conv("Conv2d_group", {1, 4, 5, 5}, {6, 2, 3, 3}, {1, 6, 3, 3}, 2, {2, 1}, {1, 0, 1, 2},
             {1, 2}));
  check(conv("Conv1d_dilated", {2, 3, 7}, {4, 3, 2}, {2, 4, 4}, 1, {2}, {1, 1}, {2}, false));
  check(conv("Conv1d_depthwise_same", {1, 2, 5}, {2, 1, 3}, {1, 2, 3}, 2, {2}, {}, {1}));
}

Case pool(const std::string& op, std::string name, Shape x, Shape out, std::vector<Attribute> a0) {
  auto shared = std::make_shared<std::vector<Attribute>>(std::move(a0));
  return {name, {x}, out, [=](GradBuilder& g, P p) {
            std::vector<Attribute> a;
            for (const auto& at : *shared) {
              if (!at.ints.empty())
                a.push_back(Attribute::make_ints(at.name, at.ints));
              else
                a.push_back(Attribute::make_int(at.name, at.i));
            }
            return g.op(op, {p[0]}, f64(out), std::move(a));
          }};
}

TEST(AutodiffFiniteDifferencesNn, Pooling) {
  check(pool("MaxPool", "MaxPool_ceil", {1, 2, 5, 5}, {1, 2, 3, 3},
             attrs(Attribute::make_ints("kernel_shape", {2, 2}),
                   Attribute::make_ints("strides", {2, 2}), Attribute::make_int("ceil_mode", 1))));
  check(pool(
      "MaxPool", "MaxPool_pads_dilations", {1, 2, 6, 5}, {1, 2, 3, 5},
      attrs(Attribute::make_ints("kernel_shape", {2, 3}), Attribute::make_ints("strides", {2, 1}),
            Attribute::make_ints("pads", {0, 1, 1, 1}),
            Attribute::make_ints("dilations", {2, 1}))));
  for (int include = 0; include < 2; ++include) {
    check(pool(
        "AveragePool", "AveragePool_pad" + std::to_string(include), {2, 2, 5, 5}, {2, 2, 3, 3},
        attrs(Attribute::make_ints("kernel_shape", {3, 3}), Attribute::make_ints("strides", {2, 2}),
              Attribute::make_ints("pads", {1, 1, 1, 1}),
              Attribute::make_int("count_include_pad", include))));
  }
  check(pool("AveragePool", "AveragePool1d_ceil", {1, 3, 6}, {1, 3, 3},
             attrs(Attribute::make_ints("kernel_shape", {3}), Attribute::make_ints("strides", {2}),
                   Attribute::make_int("ceil_mode", 1))));
  check({"GlobalAveragePool", {{2, 3, 3, 2}}, {2, 3, 1, 1}, [](GradBuilder& g, P p) {
           return g.op("GlobalAveragePool", {p[0]}, f64({2, 3, 1, 1}));
         }});
  // AdaptiveMaxPool(1): the whole map's maximum (random inputs: no ties).
  check({"GlobalMaxPool", {{2, 3, 3, 2}}, {2, 3, 1, 1}, [](GradBuilder& g, P p) {
           return g.op("GlobalMaxPool", {p[0]}, f64({2, 3, 1, 1}));
         }});
}

TEST(AutodiffFiniteDifferencesNn, BatchNormalization) {
  // Training mode: batch statistics; the running mean and var inputs get no gradient.
  check({"BatchNorm_training", {{3, 2, 2, 2}, {2}, {2}}, {3, 2, 2, 2}, [](GradBuilder& g, P p) {
           ir::Value* mean = g.filled(0.1, f64({2}));
           ir::Value* var = g.filled(0.9, f64({2}));
           return g.op("BatchNormalization", {p[0], p[1], p[2], mean, var}, f64({3, 2, 2, 2}),
                       attrs(Attribute::make_float("epsilon", 1e-3f),
                             Attribute::make_int("training_mode", 1)));
         }});
  // Inference mode: a plain affine map, with gradients for mean and var too (var = exp(p4)).
  check(
      {"BatchNorm_inference", {{2, 3, 2}, {3}, {3}, {3}, {3}}, {2, 3, 2}, [](GradBuilder& g, P p) {
         ir::Value* var = g.op("Exp", {p[4]}, f64({3}));
         return g.op("BatchNormalization", {p[0], p[1], p[2], p[3], var}, f64({2, 3, 2}));
       }});
}

TEST(AutodiffFiniteDifferencesNn, LayerNormalization) {
  // Normalised over the last two axes, no Mean/InvStdDev outputs: recomputed.
  check({"LayerNorm_axes12", {{2, 3, 4}, {3, 4}, {3, 4}}, {2, 3, 4}, [](GradBuilder& g, P p) {
           return g.op("LayerNormalization", {p[0], p[1], p[2]}, f64({2, 3, 4}),
                       attrs(Attribute::make_int("axis", 1)));
         }});
  // Over the last axis, broadcast scale, no bias, Mean and InvStdDev outputs present (in
  // the float stash type, so recomputed in double).
  check({"LayerNorm_last_outputs", {{2, 3, 4}, {4}}, {2, 3, 4}, [](GradBuilder& g, P p) {
           const ir::TensorType stat{DType::kFloat32, Shape{2, 3, 1}};
           auto outs = g.op_n(
               "LayerNormalization", {p[0], p[1]}, {f64({2, 3, 4}), stat, stat},
               attrs(Attribute::make_int("axis", -1), Attribute::make_float("epsilon", 1e-3f)));
           return outs[0];
         }});
  // Over all three axes.
  check({"LayerNorm_all", {{2, 2, 3}, {2, 2, 3}, {3}}, {2, 2, 3}, [](GradBuilder& g, P p) {
           return g.op("LayerNormalization", {p[0], p[1], p[2]}, f64({2, 2, 3}),
                       attrs(Attribute::make_int("axis", 0)));
         }});
}

TEST(AutodiffFiniteDifferencesNn, InstanceNormalization) {
  // Per sample and channel over the spatial axes (2-D and 1-D), scale and bias per channel.
  check({"InstanceNorm_2d", {{2, 3, 2, 3}, {3}, {3}}, {2, 3, 2, 3}, [](GradBuilder& g, P p) {
           return g.op("InstanceNormalization", {p[0], p[1], p[2]}, f64({2, 3, 2, 3}),
                       attrs(Attribute::make_float("epsilon", 1e-3f)));
         }});
  check({"InstanceNorm_1d", {{3, 2, 4}, {2}, {2}}, {3, 2, 4}, [](GradBuilder& g, P p) {
           return g.op("InstanceNormalization", {p[0], p[1], p[2]}, f64({3, 2, 4}));
         }});
}

// Resize is lowered into MatMuls with interpolation matrices (passes/lower_resize.h); the
// gradient is that of the lowering: torch's nearest Upsample, bilinear with and without
// align_corners, a 1-D linear downsampling and a trilinear volume.
Case resize(std::string name, Shape x, Shape out, std::vector<Attribute> a0) {
  auto shared = std::make_shared<std::vector<Attribute>>(std::move(a0));
  return {name, {x}, out, [=](GradBuilder& g, P p) {
            std::vector<Attribute> a;
            for (const auto& at : *shared) a.push_back(Attribute::make_string(at.name, at.s));
            return g.op("Resize", {p[0], nullptr, nullptr, g.ints(out)}, f64(out), std::move(a));
          }};
}

TEST(AutodiffFiniteDifferencesNn, Resize) {
  check(resize("Resize_nearest_floor", {1, 2, 2, 3}, {1, 2, 4, 6},
               attrs(Attribute::make_string("mode", "nearest"),
                     Attribute::make_string("coordinate_transformation_mode", "asymmetric"),
                     Attribute::make_string("nearest_mode", "floor"))));
  check(resize(
      "Resize_bilinear", {2, 1, 3, 2}, {2, 1, 6, 4},
      attrs(Attribute::make_string("mode", "linear"),
            Attribute::make_string("coordinate_transformation_mode", "pytorch_half_pixel"))));
  check(resize("Resize_bilinear_align_corners", {1, 2, 2, 3}, {1, 2, 3, 5},
               attrs(Attribute::make_string("mode", "linear"),
                     Attribute::make_string("coordinate_transformation_mode", "align_corners"))));
  check(resize("Resize_linear_1d_down", {1, 2, 7}, {1, 2, 3},
               attrs(Attribute::make_string("mode", "linear"))));
  // A volume: the depth, third from the end, goes through the Reshape form.
  check(resize(
      "Resize_trilinear", {1, 2, 2, 3, 2}, {1, 2, 4, 5, 3},
      attrs(Attribute::make_string("mode", "linear"),
            Attribute::make_string("coordinate_transformation_mode", "pytorch_half_pixel"))));
}

// DepthToSpace in both modes (CRD is torch's PixelShuffle) and SpaceToDepth.
TEST(AutodiffFiniteDifferencesNn, DepthToSpace) {
  for (const char* mode : {"DCR", "CRD"}) {
    check({std::string("DepthToSpace_") + mode,
           {{2, 8, 2, 3}},
           {2, 2, 4, 6},
           [mode](GradBuilder& g, P p) {
             return g.op(
                 "DepthToSpace", {p[0]}, f64({2, 2, 4, 6}),
                 attrs(Attribute::make_int("blocksize", 2), Attribute::make_string("mode", mode)));
           }});
  }
  check({"SpaceToDepth", {{1, 2, 4, 6}}, {1, 8, 2, 3}, [](GradBuilder& g, P p) {
           return g.op("SpaceToDepth", {p[0]}, f64({1, 8, 2, 3}),
                       attrs(Attribute::make_int("blocksize", 2)));
         }});
}

// The gradient graph with ops of the "ampc" domain imports that domain, passes ONNX's
// checker (with strict shape inference) and imports back.
TEST(AutodiffNn, AmpcDomainPassesChecker) {
  Case c{"conv_pool", {{1, 2, 6, 6}, {4, 2, 3, 3}, {4}}, {1, 4, 2, 2}, [](GradBuilder& g, P p) {
           ir::Value* y = g.op("Conv", p, f64({1, 4, 4, 4}));
           ir::Value* m = g.op("MaxPool", {y}, f64({1, 4, 3, 3}),
                               attrs(Attribute::make_ints("kernel_shape", {2, 2}),
                                     Attribute::make_ints("strides", {1, 1})));
           return g.op("AveragePool", {m}, f64({1, 4, 2, 2}),
                       attrs(Attribute::make_ints("kernel_shape", {2, 2}),
                             Attribute::make_int("count_include_pad", 1)));
         }};
  auto m = make_model(
      c, {std::vector<double>(72, 0.5), std::vector<double>(72, 0.25), std::vector<double>(4, 0.1)},
      std::vector<double>(16, 1.0));
  for (const auto& pg : passes::differentiate(*m, {.loss = "", .freeze = {"R", "fwd/*"}}))
    m->graph->outputs.push_back(pg.gradient);
  EXPECT_EQ(m->opset_version("ampc"), 1);
  onnx::ModelProto proto = onnx_io::export_model(*m);
  int ampc_nodes = 0;
  for (const auto& n : proto.graph().node()) ampc_nodes += n.domain() == "ampc";
  EXPECT_EQ(ampc_nodes, 3);  // ConvGrad, MaxPoolGrad, AveragePoolGrad
  EXPECT_NO_THROW(onnx_io::check_model(proto));
  EXPECT_NO_THROW(onnx_io::import_model(proto));
}

}  // namespace
}  // namespace ampc
