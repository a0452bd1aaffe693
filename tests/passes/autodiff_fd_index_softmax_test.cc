// Finite-difference checks (fp64) of the gradient rules for indexing ops (rules_index.cc),
// softmax and the losses (rules_softmax.cc), and the activations, Clip, Cast and Dropout
// (rules_elementwise.cc). Integer inputs (indices, labels) are constants, not parameters.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "passes/autodiff/autodiff.h"
#include "tests/passes/fd_check.h"

namespace ampc {
namespace {

using namespace ampc::fd;  // NOLINT: the test speaks the harness vocabulary

using passes::autodiff::attrs;
using passes::autodiff::GradBuilder;
using P = const std::vector<ir::Value*>&;
using ir::Attribute;
using ir::Value;

Value* f64_const(GradBuilder& g, const std::vector<int64_t>& v) {  // small exact values
  return g.op("Cast", {g.ints(v)}, f64({static_cast<int64_t>(v.size())}),
              attrs(Attribute::make_int("to", static_cast<int64_t>(DType::kFloat64))));
}

TEST(AutodiffFdIndex, Gather) {
  // Embedding: repeated and negative indices add up.
  check({"Gather_embedding", {{5, 3}}, {2, 4, 3}, [](GradBuilder& g, P p) {
           Value* idx = int_tensor(g, {1, 4, 1, 0, -1, 2, 1, 1}, {2, 4});
           return g.op("Gather", {p[0], idx}, f64({2, 4, 3}));
         }});
  check({"Gather_axis1", {{2, 4, 3}}, {2, 3, 3}, [](GradBuilder& g, P p) {
           return g.op("Gather", {p[0], g.ints({3, -1, 0})}, f64({2, 3, 3}),
                       attrs(Attribute::make_int("axis", 1)));
         }});
  check({"Gather_last_axis", {{2, 3}}, {2, 2, 2}, [](GradBuilder& g, P p) {
           return g.op("Gather", {p[0], int_tensor(g, {0, 2, 2, 2}, {2, 2})}, f64({2, 2, 2}),
                       attrs(Attribute::make_int("axis", -1)));
         }});
  check({"Gather_int32_indices", {{4, 2}}, {3, 2}, [](GradBuilder& g, P p) {
           Value* idx = g.op("Cast", {g.ints({3, 3, -4})}, {DType::kInt32, Shape{3}},
                             attrs(Attribute::make_int("to", static_cast<int64_t>(DType::kInt32))));
           return g.op("Gather", {p[0], idx}, f64({3, 2}));
         }});
  check({"Gather_scalar_index", {{3, 4}}, {4}, [](GradBuilder& g, P p) {
           return g.op("Gather", {p[0], int_tensor(g, {2}, {})}, f64({4}));
         }});
}

TEST(AutodiffFdIndex, GatherElementsAndTopK) {
  // torch.gather: repeated indices add up, negative ones count from the end, on the first,
  // a middle and the last axis, indices narrower than the data on the other axes.
  check({"GatherElements_axis1", {{3, 4}}, {3, 2}, [](GradBuilder& g, P p) {
           return g.op("GatherElements", {p[0], int_tensor(g, {1, 1, -1, 0, 3, 2}, {3, 2})},
                       f64({3, 2}), attrs(Attribute::make_int("axis", 1)));
         }});
  check({"GatherElements_axis0", {{3, 2}}, {4, 2}, [](GradBuilder& g, P p) {
           return g.op("GatherElements", {p[0], int_tensor(g, {2, 0, 2, 1, -3, 1, 0, 2}, {4, 2})},
                       f64({4, 2}));
         }});
  check({"GatherElements_middle_axis", {{2, 3, 4}}, {2, 2, 3}, [](GradBuilder& g, P p) {
           Value* idx = int_tensor(g, {0, 2, 1, 2, 2, 0, 1, 1, 1, -1, 0, 2}, {2, 2, 3});
           return g.op("GatherElements", {p[0], idx}, f64({2, 2, 3}),
                       attrs(Attribute::make_int("axis", -2)));
         }});
  // TopK's values: the gradient goes to the selected elements, largest or smallest.
  for (int64_t largest : {1, 0}) {
    check({"TopK_last_axis_largest" + std::to_string(largest),
           {{3, 5}},
           {3, 2},
           [largest](GradBuilder& g, P p) {
             auto outs =
                 g.op_n("TopK", {p[0], g.ints({2})}, {f64({3, 2}), {DType::kInt64, Shape{3, 2}}},
                        attrs(Attribute::make_int("largest", largest)));
             return outs[0];
           }});
  }
  check({"TopK_axis0", {{4, 3}}, {3, 3}, [](GradBuilder& g, P p) {
           auto outs =
               g.op_n("TopK", {p[0], g.ints({3})}, {f64({3, 3}), {DType::kInt64, Shape{3, 3}}},
                      attrs(Attribute::make_int("axis", 0)));
           return outs[0];
         }});
}

TEST(AutodiffFdIndex, GatherND) {
  // Index tuples naming elements (full tuples) and rows (short ones), repeated and negative
  // tuples adding up, and batch_dims 1.
  check({"GatherND_elements", {{3, 4}}, {5}, [](GradBuilder& g, P p) {
           Value* idx = int_tensor(g, {0, 1, 2, 3, 0, 1, -1, -4, 1, 2}, {5, 2});
           return g.op("GatherND", {p[0], idx}, f64({5}));
         }});
  check({"GatherND_rows", {{3, 2, 2}}, {2, 2, 2, 2}, [](GradBuilder& g, P p) {
           Value* idx = int_tensor(g, {2, 0, -1, 2}, {2, 2, 1});
           return g.op("GatherND", {p[0], idx}, f64({2, 2, 2, 2}));
         }});
  check({"GatherND_batch_dims1", {{2, 3, 2}}, {2, 2, 2}, [](GradBuilder& g, P p) {
           Value* idx = int_tensor(g, {1, 1, 0, 2}, {2, 2, 1});
           return g.op("GatherND", {p[0], idx}, f64({2, 2, 2}),
                       attrs(Attribute::make_int("batch_dims", 1)));
         }});
}

// A repeated index for scatter_add; a distinct one where replacing (ONNX leaves repeats
// undefined there).
int64_t r_idx(const char* reduction) {
  return std::string(reduction) == "add" ? 2 : 1;
}

TEST(AutodiffFdIndex, ScatterElementsAndScatterND) {
  // torch's scatter (replacing: written elements take no gradient from data) and
  // scatter_add (repeated indices), along the last and the first axis.
  for (const char* reduction : {"none", "add"}) {
    const std::string r = reduction;
    check(
        {"ScatterElements_axis1_" + r, {{3, 4}, {3, 2}}, {3, 4}, [reduction](GradBuilder& g, P p) {
           Value* idx = int_tensor(g, {1, 3, 0, -1, 2, r_idx(reduction)}, {3, 2});
           return g.op("ScatterElements", {p[0], idx, p[1]}, f64({3, 4}),
                       attrs(Attribute::make_int("axis", 1),
                             Attribute::make_string("reduction", reduction)));
         }});
    check(
        {"ScatterElements_axis0_" + r, {{3, 2}, {2, 2}}, {3, 2}, [reduction](GradBuilder& g, P p) {
           return g.op("ScatterElements", {p[0], int_tensor(g, {2, 0, -3, 1}, {2, 2}), p[1]},
                       f64({3, 2}), attrs(Attribute::make_string("reduction", reduction)));
         }});
    // x[i] = v (rows), x[i, j] = v (elements), over a middle slice of a 3-D tensor.
    check({"ScatterND_rows_" + r, {{4, 3}, {2, 3}}, {4, 3}, [reduction](GradBuilder& g, P p) {
             return g.op("ScatterND", {p[0], int_tensor(g, {2, -4}, {2, 1}), p[1]}, f64({4, 3}),
                         attrs(Attribute::make_string("reduction", reduction)));
           }});
    check({"ScatterND_elements_" + r, {{3, 4}, {3}}, {3, 4}, [reduction](GradBuilder& g, P p) {
             return g.op("ScatterND", {p[0], int_tensor(g, {0, 1, 2, 1, 1, -1}, {3, 2}), p[1]},
                         f64({3, 4}), attrs(Attribute::make_string("reduction", reduction)));
           }});
    check({"ScatterND_slices_" + r,
           {{2, 3, 4}, {2, 2, 4}},
           {2, 3, 4},
           [reduction](GradBuilder& g, P p) {
             Value* idx = int_tensor(g, {0, 2, 1, 0, 1, 1, 0, 1}, {2, 2, 2});
             return g.op("ScatterND", {p[0], idx, p[1]}, f64({2, 3, 4}),
                         attrs(Attribute::make_string("reduction", reduction)));
           }});
  }
}

TEST(AutodiffFdIndex, Trilu) {
  for (int64_t upper : {1, 0}) {
    check({"Trilu_upper" + std::to_string(upper),
           {{2, 3, 4}},
           {2, 3, 4},
           [upper](GradBuilder& g, P p) {
             return g.op("Trilu", {p[0], g.reshape(g.ints({-1}), {})}, f64({2, 3, 4}),
                         attrs(Attribute::make_int("upper", upper)));
           }});
  }
  check({"Trilu_default", {{3, 3}}, {3, 3}, [](GradBuilder& g, P p) {
           return g.op("Trilu", {p[0]}, f64({3, 3}));
         }});
}

TEST(AutodiffFdIndex, ConcatAndSplit) {
  check({"Concat_axis1", {{2, 3}, {2, 1}}, {2, 4}, [](GradBuilder& g, P p) {
           return g.op("Concat", {p[0], p[1]}, f64({2, 4}), attrs(Attribute::make_int("axis", 1)));
         }});
  check({"Concat_reuse", {{1, 3}, {2, 3}}, {4, 3}, [](GradBuilder& g, P p) {
           return g.op("Concat", {p[0], p[1], p[0]}, f64({4, 3}),
                       attrs(Attribute::make_int("axis", -2)));
         }});
  check({"Split_one_output_used", {{2, 5}}, {2, 3}, [](GradBuilder& g, P p) {
           auto outs = g.op_n("Split", {p[0], g.ints({2, 3})}, {f64({2, 2}), f64({2, 3})},
                              attrs(Attribute::make_int("axis", 1)));
           return outs[1];
         }});
  check({"Split_equal", {{4, 3}}, {2, 3}, [](GradBuilder& g, P p) {
           auto outs = g.op_n("Split", {p[0]}, {f64({2, 3}), f64({2, 3})});
           Value* sq = g.op("Mul", {outs[1], outs[1]}, f64({2, 3}));
           return g.op("Add", {outs[0], sq}, f64({2, 3}));
         }});
}

TEST(AutodiffFdIndex, Slice) {
  check({"Slice_unit", {{4, 5}}, {2, 4}, [](GradBuilder& g, P p) {
           return g.op("Slice", {p[0], g.ints({1, -4}), g.ints({3, 100}), g.ints({0, 1})},
                       f64({2, 4}));
         }});
  check({"Slice_default_axes", {{3, 4}}, {2, 2}, [](GradBuilder& g, P p) {
           return g.op("Slice", {p[0], g.ints({1, 1}), g.ints({3, 3})}, f64({2, 2}));
         }});
  check({"Slice_steps", {{5, 6}}, {3, 2}, [](GradBuilder& g, P p) {
           return g.op("Slice",
                       {p[0], g.ints({4, 0}), g.ints({-6, 6}), g.ints({0, 1}), g.ints({-2, 3})},
                       f64({3, 2}));
         }});
  check({"Slice_reverse", {{2, 3}}, {2, 3}, [](GradBuilder& g, P p) {
           const int64_t lowest = std::numeric_limits<int64_t>::min();
           return g.op("Slice", {p[0], g.ints({-1}), g.ints({lowest}), g.ints({-1}), g.ints({-1})},
                       f64({2, 3}));
         }});
}

TEST(AutodiffFdIndex, WhereExpandTilePad) {
  check({"Where_broadcast", {{2, 3}, {3}}, {2, 3}, [](GradBuilder& g, P p) {
           Value* c = g.op("Less", {int_tensor(g, {0, 1, 1, 0, 0, 1}, {2, 3}), g.ints({1})},
                           {DType::kBool, Shape{2, 3}});
           return g.op("Where", {c, p[0], p[1]}, f64({2, 3}));
         }});
  check({"Expand", {{3, 1}}, {2, 3, 4}, [](GradBuilder& g, P p) {
           return g.op("Expand", {p[0], g.ints({2, 1, 4})}, f64({2, 3, 4}));
         }});
  check({"Tile_2d", {{2, 3}}, {4, 6}, [](GradBuilder& g, P p) {
           return g.op("Tile", {p[0], g.ints({2, 2})}, f64({4, 6}));
         }});
  check({"Tile_3d", {{1, 3, 2}}, {2, 3, 6}, [](GradBuilder& g, P p) {
           return g.op("Tile", {p[0], g.ints({2, 1, 3})}, f64({2, 3, 6}));
         }});
  check({"Pad_zero", {{2, 3}}, {3, 5}, [](GradBuilder& g, P p) {
           return g.op("Pad", {p[0], g.ints({1, 0, 0, 2})}, f64({3, 5}));
         }});
  check({"Pad_trainable_value", {{2, 3}, {}}, {4, 4}, [](GradBuilder& g, P p) {
           return g.op("Pad", {p[0], g.ints({1, 1, 1, 0}), p[1]}, f64({4, 4}),
                       attrs(Attribute::make_string("mode", "constant")));
         }});
  // nn.ReflectionPad2d / nn.ReplicationPad2d: the padding copies inputs, whose gradients sum.
  check({"Pad_reflect", {{3, 4}}, {6, 7}, [](GradBuilder& g, P p) {
           return g.op("Pad", {p[0], g.ints({1, 2, 2, 1})}, f64({6, 7}),
                       attrs(Attribute::make_string("mode", "reflect")));
         }});
  check({"Pad_reflect_last_two_axes", {{2, 3, 4}}, {2, 6, 7}, [](GradBuilder& g, P p) {
           return g.op("Pad", {p[0], g.ints({0, 1, 3, 0, 2, 0})}, f64({2, 6, 7}),
                       attrs(Attribute::make_string("mode", "reflect")));
         }});
  check({"Pad_edge", {{2, 3}}, {5, 6}, [](GradBuilder& g, P p) {
           return g.op("Pad", {p[0], g.ints({2, 0, 1, 3})}, f64({5, 6}),
                       attrs(Attribute::make_string("mode", "edge")));
         }});
}

// An op that reads only its input's shape passes no gradient to it (autodiff.cc's shape-only
// ops): x * EyeLike(x) has the identity as its gradient, and random noise drawn like x is a
// constant of the step.
TEST(AutodiffFdIndex, ShapeOnlyOpsPassNoGradient) {
  check({"Mul_EyeLike", {{3, 3}}, {3, 3}, [](GradBuilder& g, P p) {
           return g.op("Mul", {p[0], g.op("EyeLike", {p[0]}, f64({3, 3}))}, f64({3, 3}));
         }});
  // A VAE's reparameterisation, mu + randn_like(mu) * exp(log_std), its noise seeded so that
  // every evaluation draws the same: the gradient reaches mu and log_std, not the noise.
  check({"reparameterisation", {{2, 3}, {2, 3}}, {2, 3}, [](GradBuilder& g, P p) {
           ir::Value* noise = g.op("RandomNormalLike", {p[0]}, f64({2, 3}),
                                   attrs(Attribute::make_float("seed", 5)));
           ir::Value* spread = g.op("Mul", {noise, g.op("Exp", {p[1]}, f64({2, 3}))}, f64({2, 3}));
           return g.op("Add", {p[0], spread}, f64({2, 3}));
         }});
}

TEST(AutodiffFdSoftmax, SoftmaxAndLogSoftmax) {
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    const std::string name = op;
    check({name + "_default_axis", {{2, 4}}, {2, 4}, [op](GradBuilder& g, P p) {
             return g.op(op, {p[0]}, f64({2, 4}));
           }});
    for (int64_t axis : {0, 1, -1}) {
      check({name + "_axis" + std::to_string(axis),
             {{2, 3, 2}},
             {2, 3, 2},
             [op, axis](GradBuilder& g, P p) {
               return g.op(op, {p[0]}, f64({2, 3, 2}), attrs(Attribute::make_int("axis", axis)));
             }});
    }
  }
}

// A loss node over x [N, C, d...] (a parameter) with constant labels and options.
struct LossCase {
  std::string op;
  std::string reduction;
  bool ignore;
  bool weights;
  bool nd;
};

Case loss_case(const LossCase& l) {
  const Shape x = l.nd ? Shape{2, 3, 2} : Shape{4, 3};
  const Shape labels = l.nd ? Shape{2, 2} : Shape{4};
  const Shape out = l.reduction == "none" ? labels : Shape{};
  std::string name = l.op + "_" + l.reduction + (l.ignore ? "_ignore" : "") +
                     (l.weights ? "_weights" : "") + (l.nd ? "_nd" : "");
  return {name, {x}, out, [l, labels, out](GradBuilder& g, P p) {
            std::vector<Value*> in{p[0], int_tensor(g, {2, 0, 1, 2}, labels)};
            if (l.weights) in.push_back(f64_const(g, {3, 1, 2}));
            std::vector<Attribute> a = attrs(Attribute::make_string("reduction", l.reduction));
            if (l.ignore) a.push_back(Attribute::make_int("ignore_index", 2));
            return g.op(l.op, in, f64(out), std::move(a));
          }};
}

TEST(AutodiffFdSoftmax, Losses) {
  for (const char* op : {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"}) {
    for (const char* reduction : {"mean", "sum", "none"}) {
      for (int options = 0; options < 8; ++options) {
        check(
            loss_case({op, reduction, (options & 1) != 0, (options & 2) != 0, (options & 4) != 0}));
      }
    }
  }
}

TEST(AutodiffFdSoftmax, CrossEntropyLogProbOutput) {
  // Both outputs carry a gradient; ignore_index outside [0, C) as PyTorch's -100.
  check({"SCE_log_prob", {{4, 3}}, {4, 3}, [](GradBuilder& g, P p) {
           auto outs =
               g.op_n("SoftmaxCrossEntropyLoss", {p[0], g.ints({2, -100, 1, 0})},
                      {f64({}), f64({4, 3})}, attrs(Attribute::make_int("ignore_index", -100)));
           return g.op("Add", {outs[1], outs[0]}, f64({4, 3}));
         }});
  check({"NLL_ignore_minus_100_sum", {{4, 3}}, {}, [](GradBuilder& g, P p) {
           return g.op("NegativeLogLikelihoodLoss", {p[0], g.ints({-100, 1, -100, 0})}, f64({}),
                       attrs(Attribute::make_int("ignore_index", -100),
                             Attribute::make_string("reduction", "sum")));
         }});
  check({"SCE_log_prob_only", {{4, 3}}, {4, 3}, [](GradBuilder& g, P p) {
           auto outs = g.op_n("SoftmaxCrossEntropyLoss", {p[0], g.ints({2, 1, 1, 0})},
                              {f64({}), f64({4, 3})});
           return outs[1];
         }});
}

TEST(AutodiffFdElementwise, Activations) {
  auto act = [](const std::string& name, const std::string& op, std::vector<Attribute> (*a)()) {
    return Case{name, {{2, 3}}, {2, 3}, [op, a](GradBuilder& g, P p) {
                  return g.op(op, {p[0]}, f64({2, 3}), a());
                }};
  };
  check(act("LeakyRelu_default", "LeakyRelu", [] { return std::vector<Attribute>{}; }));
  check(act("LeakyRelu_alpha", "LeakyRelu",
            [] { return attrs(Attribute::make_float("alpha", 0.2f)); }));
  check(act("Elu_default", "Elu", [] { return std::vector<Attribute>{}; }));
  check(act("Elu_alpha", "Elu", [] { return attrs(Attribute::make_float("alpha", 0.5f)); }));
  // Enough values that some fall between 0 and alpha, where only the right rule gives 0.
  Case thresholded{"ThresholdedRelu_alpha", {{4, 5}}, {4, 5}, [](GradBuilder& g, P p) {
                     return g.op("ThresholdedRelu", {p[0]}, f64({4, 5}),
                                 attrs(Attribute::make_float("alpha", 0.6f)));
                   }};
  thresholded.kinks = {0.6};
  check(thresholded);
}

TEST(AutodiffFdElementwise, Clip) {
  check({"Clip_min_max", {{3, 4}}, {3, 4}, [](GradBuilder& g, P p) {
           return g.op("Clip",
                       {p[0], g.scalar(-0.5, DType::kFloat64), g.scalar(0.7, DType::kFloat64)},
                       f64({3, 4}));
         }});
  check({"Clip_min_only", {{3, 4}}, {3, 4}, [](GradBuilder& g, P p) {
           return g.op("Clip", {p[0], g.scalar(0.1, DType::kFloat64)}, f64({3, 4}));
         }});
  check({"Clip_max_only", {{3, 4}}, {3, 4}, [](GradBuilder& g, P p) {
           return g.op("Clip", {p[0], nullptr, g.scalar(0.3, DType::kFloat64)}, f64({3, 4}));
         }});
  check({"Clip_no_bounds", {{2, 3}}, {2, 3}, [](GradBuilder& g, P p) {
           return g.op("Clip", {p[0]}, f64({2, 3}));
         }});
}

TEST(AutodiffFdElementwise, CastAndDropout) {
  check({"Cast_f64", {{2, 3}}, {2, 3}, [](GradBuilder& g, P p) {
           return g.op("Cast", {p[0]}, f64({2, 3}),
                       attrs(Attribute::make_int("to", static_cast<int64_t>(DType::kFloat64))));
         }});
  check({"Dropout_inference", {{2, 3}}, {2, 3}, [](GradBuilder& g, P p) {
           return g.op("Dropout", {p[0]}, f64({2, 3}));
         }});
  check({"Dropout_training_off", {{2, 3}}, {2, 3}, [](GradBuilder& g, P p) {
           return g.op("Dropout", {p[0], g.scalar(0.4, DType::kFloat64), bool_scalar(g, false)},
                       f64({2, 3}));
         }});
  check({"Dropout_training", {{4, 5}}, {4, 5}, [](GradBuilder& g, P p) {
           auto outs = g.op_n(
               "Dropout", {p[0], g.scalar(0.3, DType::kFloat64), bool_scalar(g, true)},
               {f64({4, 5}), {DType::kBool, Shape{4, 5}}}, attrs(Attribute::make_int("seed", 7)));
           return outs[0];
         }});
}

// Cast to float32 and back: the gradient of each Cast has its input's type.
TEST(AutodiffFdElementwise, CastChangesTypeBack) {
  Case c{"Cast_f32", {{2, 3}}, {2, 3}, [](GradBuilder& g, P p) {
           Value* f = g.op("Cast", {p[0]}, {DType::kFloat32, Shape{2, 3}},
                           attrs(Attribute::make_int("to", static_cast<int64_t>(DType::kFloat32))));
           return g.op("Cast", {f}, f64({2, 3}),
                       attrs(Attribute::make_int("to", static_cast<int64_t>(DType::kFloat64))));
         }};
  auto m = make_model(c, {{1, 2, 3, 4, 5, 6}}, {1, 1, 1, 1, 1, 1});
  const auto grads = passes::differentiate(*m, {.loss = "", .freeze = {"R", "fwd/*"}});
  ASSERT_EQ(grads.size(), 1u);
  EXPECT_EQ(grads[0].gradient->type.dtype, DType::kFloat64);
}

}  // namespace
}  // namespace ampc
