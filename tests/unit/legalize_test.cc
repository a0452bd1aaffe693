// The legalize stage (lower/legalize.h): each op's ONNX attributes, opset and
// operands against the typed parameters the ONNX specification implies (defaults, negative
// axes, Softmax's 2-D coercion before opset 13, BatchNormalization's outputs before opset 14,
// a Reduce op's axes input, Dropout's mode by opset), invalid attributes refused with the node
// named, and compiled plans with no attribute left on a typed step. The numerics of the ops that
// read these parameters are checked against ONNX's test data (conformance) and PyTorch (oracle,
// zoo).
#include "lower/legalize.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <google/protobuf/util/message_differencer.h>

#include <cmath>
#include <map>
#include <memory>
#include <set>

#include "base/error.h"
#include "driver/pipeline.h"
#include "runtime/cpu/executor.h"
#include "runtime/plan/step_params.h"
#include "tests/support/mlp_variants.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/step_test_helpers.h"

namespace ampc::lower {
namespace {

using ::testing::HasSubstr;

plan::Step step(const std::string& op, int64_t opset) {
  plan::Step s;
  s.set_op(op);
  s.set_opset_version(opset);
  s.add_source_nodes("n");
  return s;
}

using rt::cpu::testing::set_float;
using rt::cpu::testing::set_int;
using rt::cpu::testing::set_ints;
using rt::cpu::testing::set_string;

// Operands: input ranks; input 1's constant values when given.
StepOperands operands(std::vector<std::optional<int64_t>> ranks,
                      std::optional<std::vector<int64_t>> input1 = std::nullopt) {
  StepOperands o;
  o.input_ranks = std::move(ranks);
  o.constant_ints = [input1](int i) {
    return i == 1 ? input1 : std::optional<std::vector<int64_t>>();
  };
  return o;
}

std::string failure(plan::Step s, const StepOperands& o) {
  try {
    legalize_step(s, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Dropout: inputs give the ratio and the mode from opset 12 (before, the ratio attribute and
// an inference op); a bool mask from opset 10; the seed attribute carried when present.
TEST(Legalize, DropoutReadsTheOpsetsModeAndMaskType) {
  plan::Step s13 = step("Dropout", 13);
  set_int(s13, "seed", 77);
  legalize_step(s13, operands({2}));
  ASSERT_TRUE(s13.has_dropout());
  EXPECT_EQ(s13.attributes_size(), 0);
  EXPECT_EQ(s13.dropout().default_ratio(), 0.5f);
  EXPECT_TRUE(s13.dropout().mode_inputs());
  EXPECT_TRUE(s13.dropout().mask_bool());
  EXPECT_TRUE(s13.dropout().seeded());
  EXPECT_EQ(s13.dropout().seed(), 77);
  plan::Step s10 = step("Dropout", 10);
  set_float(s10, "ratio", 0.25f);
  legalize_step(s10, operands({2}));
  EXPECT_EQ(s10.dropout().default_ratio(), 0.25f);
  EXPECT_FALSE(s10.dropout().mode_inputs());
  EXPECT_TRUE(s10.dropout().mask_bool());
  EXPECT_FALSE(s10.dropout().seeded());
  plan::Step s7 = step("Dropout", 7);
  legalize_step(s7, operands({2}));
  EXPECT_EQ(s7.dropout().default_ratio(), 0.5f);
  EXPECT_FALSE(s7.dropout().mask_bool());
}

TEST(Legalize, SoftmaxFromOpset13NormalisesOneAxisDefaultLast) {
  plan::Step s = step("Softmax", 13);
  legalize_step(s, operands({4}));
  ASSERT_TRUE(s.has_rowwise());
  EXPECT_EQ(s.rowwise().kind(), plan::RowwiseParams::SOFTMAX);
  EXPECT_EQ(s.rowwise().axis(), 3);
  EXPECT_FALSE(s.rowwise().flatten());
  const plan::RowShape r = plan::row_shape(s.rowwise(), {2, 3, 4, 5});
  EXPECT_EQ(r.outer, 24);
  EXPECT_EQ(r.n, 5);
  EXPECT_EQ(r.inner, 1);

  plan::Step mid = step("LogSoftmax", 13);
  set_int(mid, "axis", -3);
  legalize_step(mid, operands({4}));
  EXPECT_EQ(mid.rowwise().kind(), plan::RowwiseParams::LOG_SOFTMAX);
  EXPECT_EQ(mid.rowwise().axis(), 1);
  EXPECT_EQ(mid.attributes_size(), 0);
  const plan::RowShape m = plan::row_shape(mid.rowwise(), {2, 3, 4, 5});
  EXPECT_EQ(m.outer, 2);
  EXPECT_EQ(m.n, 3);
  EXPECT_EQ(m.inner, 20);
}

TEST(Legalize, SoftmaxBeforeOpset13CoercesTo2DAtAxisDefaultOne) {
  plan::Step s = step("Softmax", 11);
  legalize_step(s, operands({4}));
  EXPECT_EQ(s.rowwise().axis(), 1);
  EXPECT_TRUE(s.rowwise().flatten());
  const plan::RowShape r = plan::row_shape(s.rowwise(), {2, 3, 4, 5});
  EXPECT_EQ(r.outer, 2);
  EXPECT_EQ(r.n, 60);
  EXPECT_EQ(r.inner, 1);
  // axis == rank: rows of one element (ONNX allows axis in [-r, r] here).
  plan::Step last = step("Hardmax", 11);
  set_int(last, "axis", 4);
  legalize_step(last, operands({4}));
  EXPECT_EQ(last.rowwise().kind(), plan::RowwiseParams::HARDMAX);
  const plan::RowShape l = plan::row_shape(last.rowwise(), {2, 3, 4, 5});
  EXPECT_EQ(l.outer, 120);
  EXPECT_EQ(l.n, 1);
  plan::Step neg = step("Softmax", 11);
  set_int(neg, "axis", -1);
  legalize_step(neg, operands({3}));
  EXPECT_EQ(neg.rowwise().axis(), 2);
}

TEST(Legalize, SoftmaxOfAScalarIsOneRowOfOne) {
  plan::Step s = step("Softmax", 13);
  legalize_step(s, operands({0}));
  const plan::RowShape r = plan::row_shape(s.rowwise(), {});
  EXPECT_EQ(r.outer * r.n * r.inner, 1);
}

TEST(Legalize, AxisOutOfRangeAndUnknownRankAreRefusedNamingTheNode) {
  plan::Step s = step("Softmax", 13);
  set_int(s, "axis", 3);
  EXPECT_THAT(failure(s, operands({3})), HasSubstr("node 'n' (Softmax): axis 3 is out of range"));
  EXPECT_THAT(failure(step("LayerNormalization", 17), operands({std::nullopt})),
              HasSubstr("rank of input 0 is not known"));
}

TEST(Legalize, LayerNormalizationDefaultsAndStashType) {
  plan::Step s = step("LayerNormalization", 17);
  legalize_step(s, operands({3, 1, 1}));
  EXPECT_EQ(s.rowwise().kind(), plan::RowwiseParams::LAYER_NORM);
  EXPECT_EQ(s.rowwise().axis(), 2);
  EXPECT_TRUE(s.rowwise().flatten());
  EXPECT_FLOAT_EQ(s.rowwise().epsilon(), 1e-5f);
  EXPECT_EQ(s.rowwise().stash_type(), 1);  // FLOAT
  plan::Step two = step("LayerNormalization", 17);
  set_int(two, "axis", -2);
  set_float(two, "epsilon", 1e-3f);
  set_int(two, "stash_type", 11);  // DOUBLE
  legalize_step(two, operands({3, 2, 2}));
  EXPECT_EQ(two.rowwise().axis(), 1);
  EXPECT_FLOAT_EQ(two.rowwise().epsilon(), 1e-3f);
  EXPECT_EQ(two.rowwise().stash_type(), 11);
  const plan::RowShape r = plan::row_shape(two.rowwise(), {4, 5, 6});
  EXPECT_EQ(r.outer, 4);
  EXPECT_EQ(r.n, 30);
  plan::Step bad = step("LayerNormalization", 17);
  set_int(bad, "stash_type", 7);  // INT64
  EXPECT_THAT(failure(bad, operands({3})), HasSubstr("'stash_type' must name a float type"));
}

TEST(Legalize, LpNormalizationOneAxisAndTheOrder) {
  plan::Step s = step("LpNormalization", 1);
  legalize_step(s, operands({3}));
  EXPECT_EQ(s.rowwise().kind(), plan::RowwiseParams::LP_NORM);
  EXPECT_EQ(s.rowwise().axis(), 2);  // default -1
  EXPECT_FALSE(s.rowwise().flatten());
  EXPECT_EQ(s.rowwise().p(), 2);  // default 2
  plan::Step one = step("LpNormalization", 1);
  set_int(one, "axis", -2);
  set_int(one, "p", 1);
  legalize_step(one, operands({3}));
  EXPECT_EQ(one.rowwise().p(), 1);
  const plan::RowShape r = plan::row_shape(one.rowwise(), {4, 5, 6});  // along 5 only
  EXPECT_EQ(r.outer, 4);
  EXPECT_EQ(r.n, 5);
  EXPECT_EQ(r.inner, 6);
  plan::Step bad = step("LpNormalization", 1);
  set_int(bad, "p", 3);
  EXPECT_THAT(failure(bad, operands({2})),
              HasSubstr("node 'n' (LpNormalization): attribute 'p' is 3"));
  EXPECT_THAT(failure(step("LpNormalization", 1), operands({0})), HasSubstr("is a scalar"));
}

TEST(Legalize, InstanceNormalizationRowsAreThePlanes) {
  plan::Step s = step("InstanceNormalization", 6);
  set_float(s, "epsilon", 0.01f);
  legalize_step(s, operands({4, 1, 1}));
  EXPECT_EQ(s.rowwise().kind(), plan::RowwiseParams::INSTANCE_NORM);
  const plan::RowShape r = plan::row_shape(s.rowwise(), {2, 3, 4, 5});
  EXPECT_EQ(r.outer, 6);
  EXPECT_EQ(r.n, 20);
  EXPECT_FLOAT_EQ(s.rowwise().epsilon(), 0.01f);
  EXPECT_THAT(failure(step("InstanceNormalization", 6), operands({2})),
              HasSubstr("no spatial dimension"));
}

TEST(Legalize, ReduceAxesFromTheAttributeNormalisedSortedAndDistinct) {
  plan::Step s = step("ReduceMax", 13);
  set_ints(s, "axes", {-1, 0, 3});
  set_int(s, "keepdims", 0);
  legalize_step(s, operands({4}));
  ASSERT_TRUE(s.has_reduce());
  EXPECT_EQ(s.reduce().kind(), plan::ReduceParams::MAX);
  EXPECT_THAT(s.reduce().axes(), ::testing::ElementsAre(0, 3));
  EXPECT_FALSE(s.reduce().keep_dims());
  const auto flags = plan::reduced_axes(s.reduce(), 4);
  ASSERT_TRUE(flags);
  EXPECT_THAT(plan::reduced_dims(s.reduce(), *flags, {2, 3, 4, 5}), ::testing::ElementsAre(3, 4));
  // No axes: every axis, keepdims by default.
  plan::Step all = step("ReduceL2", 13);
  legalize_step(all, operands({3}));
  EXPECT_TRUE(all.reduce().axes().empty());
  const auto every = plan::reduced_axes(all.reduce(), 3);
  ASSERT_TRUE(every);
  EXPECT_THAT(plan::reduced_dims(all.reduce(), *every, {2, 3, 4}), ::testing::ElementsAre(1, 1, 1));
}

TEST(Legalize, ReduceAxesFromAConstantInputAreMovedIntoTheParameters) {
  plan::Step s = step("ReduceSum", 13);
  s.add_inputs(7);
  s.add_inputs(8);
  s.add_outputs(9);
  legalize_step(s, operands({3, 1}, std::vector<int64_t>{-2}));
  EXPECT_THAT(s.reduce().axes(), ::testing::ElementsAre(1));
  EXPECT_TRUE(s.reduce().keep_dims());
  EXPECT_THAT(s.inputs(), ::testing::ElementsAre(7));  // the axes input is gone
  // Axes computed at run time stay input 1, which the CPU backend reads (normalised there).
  plan::Step runtime_axes = step("ReduceSum", 13);
  runtime_axes.add_inputs(7);
  runtime_axes.add_inputs(8);
  legalize_step(runtime_axes, operands({3, 1}));
  EXPECT_TRUE(runtime_axes.reduce().runtime_axes());
  EXPECT_EQ(runtime_axes.inputs_size(), 2);
  const auto at_run_time = plan::reduced_axes(runtime_axes.reduce(), 3, {-1});
  ASSERT_TRUE(at_run_time);
  EXPECT_THAT(*at_run_time, ::testing::ElementsAre(false, false, true));
  EXPECT_THROW(plan::reduced_axes(runtime_axes.reduce(), 3, {3}), Error);
  // Empty axes with noop_with_empty_axes: the identity.
  plan::Step noop = step("ReduceSum", 13);
  set_int(noop, "noop_with_empty_axes", 1);
  legalize_step(noop, operands({3}));
  EXPECT_FALSE(plan::reduced_axes(noop.reduce(), 3));
}

TEST(Legalize, BatchNormalizationTrainingModeByOpset) {
  // Before opset 14: training when the running statistics are asked for; outputs 3 and 4 are
  // the saved batch statistics.
  plan::Step old = step("BatchNormalization", 9);
  for (int o : {0, 1, 2, 3, 4}) old.add_outputs(o);
  legalize_step(old, operands({4, 1, 1, 1, 1}));
  EXPECT_TRUE(old.batch_norm().training());
  EXPECT_TRUE(old.batch_norm().saved_statistics());
  EXPECT_FLOAT_EQ(old.batch_norm().momentum(), 0.9f);
  EXPECT_FLOAT_EQ(old.batch_norm().epsilon(), 1e-5f);
  plan::Step inference = step("BatchNormalization", 9);
  for (int o : {0, -1, -1}) inference.add_outputs(o);
  legalize_step(inference, operands({4, 1, 1, 1, 1}));
  EXPECT_FALSE(inference.batch_norm().training());
  // From opset 14: the training_mode attribute.
  plan::Step now = step("BatchNormalization", 15);
  for (int o : {0, 1, 2}) now.add_outputs(o);
  set_int(now, "training_mode", 1);
  set_float(now, "momentum", 0.99f);
  legalize_step(now, operands({4, 1, 1, 1, 1}));
  EXPECT_TRUE(now.batch_norm().training());
  EXPECT_FALSE(now.batch_norm().saved_statistics());
  EXPECT_FLOAT_EQ(now.batch_norm().momentum(), 0.99f);
  plan::Step spatial = step("BatchNormalization", 7);
  set_int(spatial, "spatial", 0);
  EXPECT_THAT(failure(spatial, operands({4})), HasSubstr("'spatial' value 0 is not supported"));
}

TEST(Legalize, LossReductionAndIgnoreIndex) {
  for (const char* op : {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"}) {
    SCOPED_TRACE(op);
    plan::Step s = step(op, 13);
    legalize_step(s, operands({2, 1}));
    EXPECT_EQ(s.cross_entropy().reduction(), plan::CrossEntropyParams::MEAN);
    EXPECT_FALSE(s.cross_entropy().has_ignore_index());
    plan::Step sum = step(op, 13);
    set_string(sum, "reduction", "none");
    set_int(sum, "ignore_index", -100);
    legalize_step(sum, operands({2, 1}));
    EXPECT_EQ(sum.cross_entropy().reduction(), plan::CrossEntropyParams::NONE);
    EXPECT_TRUE(sum.cross_entropy().has_ignore_index());
    EXPECT_EQ(sum.cross_entropy().ignore_index(), -100);
    plan::Step bad = step(op, 13);
    set_string(bad, "reduction", "max");
    EXPECT_THAT(failure(bad, operands({2, 1})), HasSubstr("'reduction' value 'max'"));
  }
}

TEST(Legalize, PoolingWindowDefaultsAndOptions) {
  plan::Step s = step("AveragePool", 19);
  set_ints(s, "kernel_shape", {3, 2});
  set_int(s, "count_include_pad", 1);
  set_int(s, "ceil_mode", 1);
  set_string(s, "auto_pad", "SAME_LOWER");
  legalize_step(s, operands({4}));
  ASSERT_TRUE(s.has_window());
  const plan::WindowParams& w = s.window();
  EXPECT_THAT(w.kernel(), ::testing::ElementsAre(3, 2));
  EXPECT_THAT(w.strides(), ::testing::ElementsAre(1, 1));
  EXPECT_THAT(w.dilations(), ::testing::ElementsAre(1, 1));
  EXPECT_THAT(w.pads(), ::testing::ElementsAre(0, 0, 0, 0));
  EXPECT_EQ(w.auto_pad(), plan::WindowParams::SAME_LOWER);
  EXPECT_TRUE(w.ceil_mode());
  EXPECT_TRUE(w.count_include_pad());
  EXPECT_EQ(s.attributes_size(), 0);
  // The gradient op of the ampc domain reads X's rank from its input 1.
  plan::Step grad = step("MaxPoolGrad", 1);
  grad.set_domain("ampc");
  set_ints(grad, "kernel_shape", {2});
  set_int(grad, "storage_order", 1);
  legalize_step(grad, operands({3, 3}));
  EXPECT_THAT(grad.window().kernel(), ::testing::ElementsAre(2));
  EXPECT_TRUE(grad.window().column_major_indices());
  EXPECT_THAT(failure(step("MaxPool", 12), operands({4})),
              HasSubstr("attribute 'kernel_shape' is required"));
  plan::Step bad_pad = step("MaxPool", 12);
  set_ints(bad_pad, "kernel_shape", {2, 2});
  set_string(bad_pad, "auto_pad", "SAME");
  EXPECT_THAT(failure(bad_pad, operands({4})), HasSubstr("'auto_pad' value 'SAME'"));
  plan::Step lp = step("LpPool", 18);
  set_ints(lp, "kernel_shape", {2});
  legalize_step(lp, operands({3}));
  EXPECT_EQ(lp.window().p(), 2);
  plan::Step global = step("GlobalLpPool", 2);
  set_int(global, "p", 3);
  legalize_step(global, operands({4}));
  EXPECT_EQ(global.window().p(), 3);
  EXPECT_TRUE(global.window().kernel().empty());
}

TEST(Legalize, ConvolutionWindowAndGroup) {
  plan::Step s = step("Conv", 11);
  set_ints(s, "strides", {2, 2, 1});
  set_ints(s, "pads", {1, 1, 0, 1, 1, 0});
  set_int(s, "group", 4);
  legalize_step(s, operands({5, 5, 1}));
  EXPECT_TRUE(s.window().kernel().empty());  // the weights' dims at run time
  EXPECT_THAT(s.window().strides(), ::testing::ElementsAre(2, 2, 1));
  EXPECT_THAT(s.window().pads(), ::testing::ElementsAre(1, 1, 0, 1, 1, 0));
  EXPECT_EQ(s.window().group(), 4);
  EXPECT_FALSE(s.window().ceil_mode());
  plan::Step grad = step("ConvGrad", 1);
  grad.set_domain("ampc");
  legalize_step(grad, operands({4, 4, 4}));
  EXPECT_EQ(grad.window().group(), 1);
  plan::Step wrong = step("Conv", 11);
  set_ints(wrong, "strides", {1});
  EXPECT_THAT(failure(wrong, operands({4, 4})), HasSubstr("do not match the 2 spatial"));
  plan::Step rank2 = step("Conv", 11);
  EXPECT_THAT(failure(rank2, operands({2, 2})), HasSubstr("input of rank 2 is not supported"));
}

TEST(Legalize, LossScalerOpsOfTheAmpcDomain) {
  plan::Step update = step("UpdateScale", 1);
  update.set_domain("ampc");
  set_float(update, "growth_factor", 4.0f);
  set_int(update, "growth_interval", 3);
  set_float(update, "min_scale", 1.0f);
  legalize_step(update, operands({0, 0, 0}));
  const plan::ScaleUpdateParams& u = update.scale_update();
  EXPECT_FLOAT_EQ(u.growth_factor(), 4.0f);
  EXPECT_FLOAT_EQ(u.backoff_factor(), 0.5f);  // torch's default
  EXPECT_EQ(u.growth_interval(), 3);
  EXPECT_TRUE(u.has_min_scale());
  EXPECT_FLOAT_EQ(u.min_scale(), 1.0f);
  EXPECT_FALSE(u.has_max_scale());
  plan::Step zero = step("UpdateScale", 1);
  zero.set_domain("ampc");
  set_int(zero, "growth_interval", 0);
  EXPECT_THAT(failure(zero, operands({0, 0, 0})), HasSubstr("growth_interval must be at least 1"));
  plan::Step measure = step("ClipGradNorm", 1);
  measure.set_domain("ampc");
  legalize_step(measure, operands({1}));
  EXPECT_FALSE(measure.clip().clip());
  plan::Step clip = step("ClipGradNorm", 1);
  clip.set_domain("ampc");
  set_float(clip, "max_norm", 0.5f);
  legalize_step(clip, operands({1}));
  EXPECT_TRUE(clip.clip().clip());
  EXPECT_FLOAT_EQ(clip.clip().max_norm(), 0.5f);
}

TEST(Legalize, OtherOpsKeepTheirAttributes) {
  plan::Step s = step("Trilu", 14);
  set_int(s, "upper", 0);
  const plan::Step before = s;
  legalize_step(s, operands({2}));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(s, before));
  EXPECT_FALSE(has_typed_params("ampc", "Softmax"));
  EXPECT_FALSE(has_typed_params("", "Trilu"));
}

// ConvTranspose: a Conv's window and group, the output padding (zeros by default) and the
// output's spatial sizes, the last n entries of an output_shape that also lists N and C.
TEST(Legalize, ConvTransposeOutputPaddingAndShape) {
  plan::Step s = step("ConvTranspose", 11);
  set_ints(s, "strides", {2, 3});
  set_ints(s, "output_padding", {1, 2});
  set_int(s, "group", 2);
  legalize_step(s, operands({4, 4}));
  EXPECT_EQ(s.attributes_size(), 0);
  EXPECT_THAT(s.window().strides(), ::testing::ElementsAre(2, 3));
  EXPECT_THAT(s.window().output_padding(), ::testing::ElementsAre(1, 2));
  EXPECT_TRUE(s.window().output_shape().empty());
  EXPECT_EQ(s.window().group(), 2);
  plan::Step shaped = step("ConvTranspose", 11);
  set_ints(shaped, "output_shape", {1, 3, 9, 10});
  set_string(shaped, "auto_pad", "SAME_UPPER");
  legalize_step(shaped, operands({4, 4}));
  EXPECT_THAT(shaped.window().output_shape(), ::testing::ElementsAre(9, 10));
  EXPECT_THAT(shaped.window().output_padding(), ::testing::ElementsAre(0, 0));
  EXPECT_EQ(shaped.window().auto_pad(), plan::WindowParams::SAME_UPPER);
  plan::Step wrong = step("ConvTranspose", 11);
  set_ints(wrong, "output_padding", {1});
  EXPECT_THAT(failure(wrong, operands({4, 4})), HasSubstr("output_padding or output_shape"));
  plan::Step negative = step("ConvTranspose", 11);
  set_ints(negative, "output_padding", {0, -1});
  EXPECT_THAT(failure(negative, operands({4, 4})), HasSubstr("must not be negative"));
}

// DepthToSpace's mode (DCR by default, CRD as torch's PixelShuffle exports it), SpaceToDepth's
// block size, and ConstantOfShape's value: its type and bytes, fp32 zero without one.
TEST(Legalize, BlockMovesAndTheFillValue) {
  plan::Step d = step("DepthToSpace", 13);
  set_int(d, "blocksize", 3);
  legalize_step(d, operands({4}));
  EXPECT_EQ(d.block().blocksize(), 3);
  EXPECT_FALSE(d.block().crd());
  plan::Step crd = step("DepthToSpace", 13);
  set_int(crd, "blocksize", 2);
  set_string(crd, "mode", "CRD");
  legalize_step(crd, operands({4}));
  EXPECT_TRUE(crd.block().crd());
  plan::Step bad = step("DepthToSpace", 13);
  set_int(bad, "blocksize", 2);
  set_string(bad, "mode", "RDC");
  EXPECT_THAT(failure(bad, operands({4})), HasSubstr("'mode' value 'RDC'"));
  plan::Step s2d = step("SpaceToDepth", 13);
  set_int(s2d, "blocksize", 0);
  EXPECT_THAT(failure(s2d, operands({4})), HasSubstr("'blocksize' must be positive"));
  plan::Step fill = step("ConstantOfShape", 9);
  plan::Attribute* a = fill.add_attributes();
  a->set_name("value");
  a->mutable_t()->set_dtype(static_cast<int32_t>(DType::kInt64));
  a->mutable_t()->add_dims(1);
  a->mutable_t()->set_data(std::string("\x07\0\0\0\0\0\0\0", 8));
  legalize_step(fill, operands({1}));
  EXPECT_EQ(fill.fill().dtype(), static_cast<int32_t>(DType::kInt64));
  EXPECT_EQ(fill.fill().value(), std::string("\x07\0\0\0\0\0\0\0", 8));
  plan::Step zero = step("ConstantOfShape", 9);
  legalize_step(zero, operands({1}));
  EXPECT_EQ(zero.fill().dtype(), static_cast<int32_t>(DType::kFloat32));
  EXPECT_EQ(zero.fill().value(), std::string(4, '\0'));
}

// Transpose: perm normalised, the reversed axes by default (ONNX), a perm of another rank
// refused.
TEST(Legalize, TransposePermutationDefaultsToTheAxesReversed) {
  plan::Step s = step("Transpose", 13);
  legalize_step(s, operands({3}));
  EXPECT_THAT(std::vector<int64_t>(s.transpose().perm().begin(), s.transpose().perm().end()),
              ::testing::ElementsAre(2, 1, 0));
  plan::Step given = step("Transpose", 13);
  set_ints(given, "perm", {0, -1, 1});
  legalize_step(given, operands({3}));
  EXPECT_THAT(
      std::vector<int64_t>(given.transpose().perm().begin(), given.transpose().perm().end()),
      ::testing::ElementsAre(0, 2, 1));
  plan::Step bad = step("Transpose", 13);
  set_ints(bad, "perm", {1, 0});
  EXPECT_THAT(failure(bad, operands({3})), HasSubstr("perm does not match"));
}

// Concat's axis defaulted to 1 before opset 4 and is required after; Gather's defaults to 0;
// Split's sizes are an attribute before opset 13 and a constant input after (which leaves the
// step), or input 1 at run time.
TEST(Legalize, AxesOfConcatGatherAndSplitByOpset) {
  plan::Step old_concat = step("Concat", 1);
  legalize_step(old_concat, operands({3, 3}));
  EXPECT_EQ(old_concat.axis().axis(), 1);
  plan::Step concat = step("Concat", 13);
  set_int(concat, "axis", -1);
  legalize_step(concat, operands({3, 3}));
  EXPECT_EQ(concat.axis().axis(), 2);
  EXPECT_THAT(failure(step("Concat", 13), operands({3, 3})), HasSubstr("axis"));
  plan::Step gather = step("Gather", 13);
  legalize_step(gather, operands({2, 1}));
  EXPECT_EQ(gather.axis().axis(), 0);
  plan::Step split11 = step("Split", 11);
  set_ints(split11, "split", {2, 3});
  legalize_step(split11, operands({2}));
  EXPECT_THAT(std::vector<int64_t>(split11.axis().split().begin(), split11.axis().split().end()),
              ::testing::ElementsAre(2, 3));
  plan::Step split13 = step("Split", 13);
  split13.add_inputs(0);
  split13.add_inputs(1);
  legalize_step(split13, operands({2, 1}, std::vector<int64_t>{4, 1}));
  EXPECT_THAT(std::vector<int64_t>(split13.axis().split().begin(), split13.axis().split().end()),
              ::testing::ElementsAre(4, 1));
  EXPECT_EQ(split13.inputs_size(), 1);  // the sizes left the step
  plan::Step runtime = step("Split", 13);
  runtime.add_inputs(0);
  runtime.add_inputs(1);
  legalize_step(runtime, operands({2, 1}));
  EXPECT_TRUE(runtime.axis().runtime_split());
  EXPECT_EQ(runtime.inputs_size(), 2);
}

// Scatter ops: opset 16's reduction by name (none before), ScatterElements' axis.
TEST(Legalize, ScatterReductionAndAxis) {
  plan::Step plain = step("ScatterND", 13);
  legalize_step(plain, operands({2, 2, 1}));
  EXPECT_EQ(plain.scatter().reduction(), plan::ScatterParams::NONE);
  plan::Step add = step("ScatterElements", 16);
  set_string(add, "reduction", "add");
  set_int(add, "axis", -1);
  legalize_step(add, operands({3, 3, 3}));
  EXPECT_EQ(add.scatter().reduction(), plan::ScatterParams::ADD);
  EXPECT_EQ(add.scatter().axis(), 2);
  plan::Step bad = step("ScatterND", 16);
  set_string(bad, "reduction", "avg");
  EXPECT_THAT(failure(bad, operands({2, 2, 1})), HasSubstr("'reduction' value 'avg'"));
}

// Cast: a type code, or in opset 1 a type name; unknown types refused.
TEST(Legalize, CastTargetFromACodeOrAnOpset1Name) {
  plan::Step code = step("Cast", 13);
  set_int(code, "to", static_cast<int64_t>(DType::kFloat16));
  legalize_step(code, operands({1}));
  EXPECT_EQ(code.cast().to(), static_cast<int32_t>(DType::kFloat16));
  plan::Step name = step("Cast", 1);
  set_string(name, "to", "DOUBLE");
  legalize_step(name, operands({1}));
  EXPECT_EQ(name.cast().to(), static_cast<int32_t>(DType::kFloat64));
  plan::Step bad = step("Cast", 13);
  set_int(bad, "to", 1000);
  EXPECT_THAT(failure(bad, operands({1})), HasSubstr("not a known element type"));
}

// Slice: attributes before opset 10; constant inputs after, moved into the parameters with
// ONNX's defaults (axes 0..n-1, steps 1); inputs computed at run time stay.
TEST(Legalize, SliceRangesFromAttributesOrConstantInputs) {
  plan::Step old = step("Slice", 1);
  set_ints(old, "starts", {1});
  set_ints(old, "ends", {-1});
  legalize_step(old, operands({2}));
  EXPECT_THAT(std::vector<int64_t>(old.slice().axes().begin(), old.slice().axes().end()),
              ::testing::ElementsAre(0));
  EXPECT_THAT(std::vector<int64_t>(old.slice().steps().begin(), old.slice().steps().end()),
              ::testing::ElementsAre(1));
  plan::Step s = step("Slice", 13);
  for (int i = 0; i < 4; ++i) s.add_inputs(i);
  StepOperands in = operands({3, 1, 1, 1});
  in.constant_ints = [](int i) -> std::optional<std::vector<int64_t>> {
    const std::vector<std::vector<int64_t>> v = {{}, {0}, {2}, {-1}};
    return v.at(static_cast<size_t>(i));
  };
  legalize_step(s, in);
  EXPECT_EQ(s.inputs_size(), 1);
  EXPECT_THAT(std::vector<int64_t>(s.slice().axes().begin(), s.slice().axes().end()),
              ::testing::ElementsAre(2));
  EXPECT_THAT(std::vector<int64_t>(s.slice().ends().begin(), s.slice().ends().end()),
              ::testing::ElementsAre(2));
  plan::Step runtime = step("Slice", 13);
  for (int i = 0; i < 3; ++i) runtime.add_inputs(i);
  legalize_step(runtime, operands({3, 1, 1}));
  EXPECT_TRUE(runtime.slice().runtime_inputs());
  EXPECT_EQ(runtime.inputs_size(), 3);
  plan::Step zero = step("Slice", 1);
  set_ints(zero, "starts", {0});
  set_ints(zero, "ends", {1});
  set_ints(zero, "axes", {0, 1});
  EXPECT_THAT(failure(zero, operands({2})), HasSubstr("different lengths"));
}

// Pad: per-axis pads from opset 2's `pads` (opset 1's `paddings`) with `value`, or from the
// constant input (which becomes omitted; constant_value stays input 2); modes by name.
TEST(Legalize, PadPerAxisFromAttributesOrTheConstantInput) {
  plan::Step v1 = step("Pad", 1);
  set_ints(v1, "paddings", {1, 0, 2, 3});
  set_float(v1, "value", 1.5f);
  legalize_step(v1, operands({2}));
  EXPECT_THAT(std::vector<int64_t>(v1.pad().before().begin(), v1.pad().before().end()),
              ::testing::ElementsAre(1, 0));
  EXPECT_THAT(std::vector<int64_t>(v1.pad().after().begin(), v1.pad().after().end()),
              ::testing::ElementsAre(2, 3));
  EXPECT_FLOAT_EQ(v1.pad().value(), 1.5f);
  plan::Step v13 = step("Pad", 13);
  set_string(v13, "mode", "reflect");
  for (int i = 0; i < 3; ++i) v13.add_inputs(i);
  legalize_step(v13, operands({2, 1, 0}, std::vector<int64_t>{0, 1, 0, 1}));
  EXPECT_EQ(v13.pad().mode(), plan::PadParams::REFLECT);
  EXPECT_THAT(std::vector<int64_t>(v13.inputs().begin(), v13.inputs().end()),
              ::testing::ElementsAre(0, -1, 2));
  EXPECT_THAT(std::vector<int64_t>(v13.pad().after().begin(), v13.pad().after().end()),
              ::testing::ElementsAre(0, 1));
  plan::Step wrap = step("Pad", 13);
  set_string(wrap, "mode", "wrap");
  EXPECT_THAT(failure(wrap, operands({2, 1}, std::vector<int64_t>{0, 0, 0, 0})),
              HasSubstr("'mode' value 'wrap'"));
}

// Gemm: Y = alpha op(A) op(B) + beta C with ONNX's defaults (no transposes, alpha = beta = 1);
// MatMul: alpha 1, no transposes (a folded Transpose is added by plan emission).
TEST(Legalize, GemmTransposesAndScalesWithTheSpecificationsDefaults) {
  plan::Step plain = step("Gemm", 13);
  legalize_step(plain, operands({2, 2, 1}));
  ASSERT_TRUE(plain.has_gemm());
  EXPECT_FALSE(plain.gemm().trans_a());
  EXPECT_FALSE(plain.gemm().trans_b());
  EXPECT_FLOAT_EQ(plain.gemm().alpha(), 1.0f);
  EXPECT_FLOAT_EQ(plain.gemm().beta(), 1.0f);
  EXPECT_EQ(plain.gemm().epilogue(), plan::GemmParams::NONE);
  plan::Step full = step("Gemm", 11);
  set_int(full, "transA", 1);
  set_int(full, "transB", 1);
  set_float(full, "alpha", 0.5f);
  set_float(full, "beta", 2.0f);
  legalize_step(full, operands({2, 2, 2}));
  EXPECT_TRUE(full.gemm().trans_a());
  EXPECT_TRUE(full.gemm().trans_b());
  EXPECT_FLOAT_EQ(full.gemm().alpha(), 0.5f);
  EXPECT_FLOAT_EQ(full.gemm().beta(), 2.0f);
  EXPECT_EQ(full.attributes_size(), 0);
  plan::Step matmul = step("MatMul", 13);
  legalize_step(matmul, operands({3, 2}));
  EXPECT_FALSE(matmul.gemm().trans_a());
  EXPECT_FALSE(matmul.gemm().trans_b());
  EXPECT_FLOAT_EQ(matmul.gemm().alpha(), 1.0f);
}

// A fused training plan's GEMMs carry the folds in their parameters: the mlp's Gemms with
// their bias as the epilogue and transposed operands (the backward's), no attributes.
TEST(Legalize, FoldedGemmStepsCarryTransposesAndEpiloguesAsParameters) {
  compiler::CompileOptions o;
  o.train = true;
  const plan::Plan p = compiler::compile_file(std::string(AMPC_SOURCE_DIR) + "/models/mlp.onnx", o);
  std::set<std::string> epilogues;
  for (const plan::Step& s : p.steps()) {
    if (s.op() != "MatMul" && s.op() != "Gemm") continue;
    SCOPED_TRACE(s.op() + " " + s.source_nodes(0));
    ASSERT_TRUE(s.has_gemm());
    EXPECT_EQ(s.attributes_size(), 0);
    if (s.gemm().epilogue() != plan::GemmParams::NONE)
      epilogues.insert(plan::gemm_epilogue_name(s));
  }
  EXPECT_TRUE(epilogues.count("BIAS")) << "no bias folded";
}

// A Relu after a bf16 GEMM folds into it in CPU plans (oneDNN applies it before the one
// rounding, which it commutes with), not in CUDA plans nor after the CPU's emulated fp16 GEMM;
// after an fp32 GEMM everywhere. The mlp with a Relu after its first Gemm (a Linear + ReLU).
TEST(Legalize, ReluFoldsIntoBf16GemmsOfCpuPlansOnly) {
  const test::TempDir dir;
  const std::string model = dir / "mlp_relu.onnx";
  test::write_mlp_with_unary(std::string(AMPC_SOURCE_DIR) + "/models/mlp.onnx", model, "Relu",
                             "/relu/Relu");
  auto relu_folds = [&](passes::Precision precision, const std::string& target) {
    compiler::CompileOptions o;
    o.train = true;
    o.autocast.precision = precision;
    o.lowering.target = target;
    const plan::Plan p = compiler::compile_file(model, o);
    int folds = 0;
    for (const plan::Step& s : p.steps()) {
      const bool relu = s.has_gemm() && (s.gemm().epilogue() == plan::GemmParams::RELU ||
                                         s.gemm().epilogue() == plan::GemmParams::RELU_BIAS);
      folds += relu ? 1 : 0;
    }
    return folds;
  };
  EXPECT_EQ(relu_folds(passes::Precision::kBF16, "cpu"), 1);
  EXPECT_EQ(relu_folds(passes::Precision::kFP32, "cpu"), 1);
  EXPECT_EQ(relu_folds(passes::Precision::kFP32, "cuda:sm_90"), 1);
  EXPECT_EQ(relu_folds(passes::Precision::kBF16, "cuda:sm_90"), 0);
  EXPECT_EQ(relu_folds(passes::Precision::kFP16, "cpu"), 0);
}

// Operand Transposes folded into the GEMM's flags, on a graph made here where each flag is
// known: Y = MatMul(Transpose(A), B) needs trans_a, which only the fold can set; Z = Gemm(Y,
// Transpose(W), transB=1) with W [5, 6] is Y W, so the call reads W as it is stored (transB and
// the folded Transpose cancel). The plan keeps no Transpose step, and the results equal a
// float64 product written out here.
TEST(Legalize, FoldedOperandTransposesSetTheGemmFlags) {
  auto model = std::make_unique<ir::Model>();
  model->opsets.push_back({"", 17});
  model->graph->name = "g";
  ir::Graph& g = *model->graph;
  auto value = [&](const char* name, std::vector<int64_t> dims) {
    return g.add_value(name, {DType::kFloat64, std::move(dims)});
  };
  ir::Value* a = value("a", {3, 4});
  ir::Value* b = value("b", {3, 5});
  ir::Value* w = value("w", {5, 6});
  g.inputs = {a, b, w};
  ir::Value* at = value("at", {4, 3});
  ir::Value* y = value("y", {4, 5});
  ir::Value* wt = value("wt", {6, 5});
  ir::Value* z = value("z", {4, 6});
  g.add_node("Transpose", {a}, {at}, "ta")
      ->attributes.push_back(ir::Attribute::make_ints("perm", {1, 0}));
  g.add_node("MatMul", {at, b}, {y}, "mm");
  g.add_node("Transpose", {w}, {wt}, "tw")
      ->attributes.push_back(ir::Attribute::make_ints("perm", {1, 0}));
  g.add_node("Gemm", {y, wt}, {z}, "gemm")
      ->attributes.push_back(ir::Attribute::make_int("transB", 1));
  g.outputs = {y, z};

  const plan::Plan p = compiler::compile_model(*model, {}, "folds");
  std::map<std::string, plan::GemmParams> gemms;
  for (const plan::Step& s : p.steps()) {
    EXPECT_NE(s.op(), "Transpose") << s.source_nodes(0) << " was not folded";
    if (s.has_gemm()) gemms[s.op()] = s.gemm();
  }
  ASSERT_EQ(gemms.size(), 2u);
  EXPECT_TRUE(gemms["MatMul"].trans_a());
  EXPECT_FALSE(gemms["MatMul"].trans_b());
  EXPECT_FALSE(gemms["Gemm"].trans_a());
  EXPECT_FALSE(gemms["Gemm"].trans_b());

  auto filled = [](std::vector<int64_t> dims, double seed) {
    rt::Tensor t(DType::kFloat64, dims);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = std::sin(seed * (i + 1));
    return t;
  };
  const rt::Tensor ta = filled({3, 4}, 1.3), tb = filled({3, 5}, 0.7), tw = filled({5, 6}, 2.1);
  rt::cpu::Executor exec(p);
  const auto out = exec.run({{"a", ta}, {"b", tb}, {"w", tw}});
  const double* A = ta.data<double>();
  const double* B = tb.data<double>();
  const double* W = tw.data<double>();
  std::vector<double> want_y(20, 0.0);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j)
      for (int k = 0; k < 3; ++k) want_y[i * 5 + j] += A[k * 4 + i] * B[k * 5 + j];
  for (int i = 0; i < 20; ++i) EXPECT_NEAR(out.at("y").data<double>()[i], want_y[i], 1e-12) << i;
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 6; ++j) {
      double want = 0;
      for (int k = 0; k < 5; ++k) want += want_y[i * 5 + k] * W[k * 6 + j];
      EXPECT_NEAR(out.at("z").data<double>()[i * 6 + j], want, 1e-12) << i << " " << j;
    }
  }
}

// Compiled plans of models with every typed family (gpt: LayerNormalization, Softmax,
// SoftmaxCrossEntropyLoss, reductions in the backward; cnn: Conv, pooling and their
// gradients) carry parameters and no attributes on those steps; the backends read nothing else.
TEST(Legalize, CompiledPlansCarryTypedStepsWithoutAttributes) {
  compiler::CompileOptions o;
  o.train = true;
  o.lowering.fuse = false;
  for (const char* model : {"gpt", "cnn"}) {
    const plan::Plan p =
        compiler::compile_file(std::string(AMPC_SOURCE_DIR) + "/models/" + model + ".onnx", o);
    int typed = 0;
    for (const plan::Step& s : p.steps()) {
      if (!has_typed_params(s.domain(), s.op())) continue;
      SCOPED_TRACE(std::string(model) + ": " + s.op() + " " + s.source_nodes(0));
      EXPECT_NE(s.params_case(), plan::Step::PARAMS_NOT_SET);
      EXPECT_EQ(s.attributes_size(), 0);
      ++typed;
    }
    EXPECT_GT(typed, 3) << model;
  }
}

}  // namespace
}  // namespace ampc::lower
