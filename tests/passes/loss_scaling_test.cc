// The loss-scaling pass (passes/loss_scaling.h) on models/mlp.onnx, compiled and run
// in-process: the default mode per precision and refused options; the exported training step
// passes ONNX's full check, binds amp.scale and amp.growth_tracker and makes every optimizer
// update a Where on amp.found_inf; a step whose batch holds inf/NaN leaves every parameter,
// moment and the step counter bit-identical and backs the scale off (fp32, and fp16
// autocast); power-of-two scaling (dynamic or static) trains bit-identically to no scaling
// in fp32; an fp16 plan unscales its 16-bit gradients in fp32; --skip-nonfinite without
// scaling; no scaling adds nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>

#include "base/error.h"
#include "driver/pipeline.h"
#include "frontend/onnx/export.h"
#include "frontend/onnx/export_training.h"
#include "runtime/cpu/executor.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/random_batch.h"
#include "tests/support/temp_dir.h"

namespace ampc {
namespace {

using ::testing::HasSubstr;

const std::string kMlp = std::string(AMPC_SOURCE_DIR) + "/models/mlp.onnx";

compiler::CompileOptions adam(const std::string& mode) {
  compiler::CompileOptions o;
  o.train = true;
  o.optimizer.kind = "adam";
  o.optimizer.lr = 1e-3;
  o.loss_scale.mode = mode;
  o.loss_scale.growth_interval = 2;
  return o;
}

bool same_bits(const rt::Tensor& a, const rt::Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

float f32(const rt::Tensor& t) {
  return t.data<float>()[0];
}

TEST(LossScaleOptions, DefaultModeFollowsThePrecision) {
  passes::LossScaleOptions o;
  EXPECT_EQ(passes::resolve_loss_scale(o).mode, "none");
  o.precision = passes::Precision::kBF16;
  EXPECT_EQ(passes::resolve_loss_scale(o).mode, "none");
  o.precision = passes::Precision::kFP16;
  EXPECT_EQ(passes::resolve_loss_scale(o).mode, "dynamic");
  o.mode = "static:1024";
  const auto c = passes::resolve_loss_scale(o);
  EXPECT_EQ(c.mode, "static");
  EXPECT_EQ(c.static_scale, 1024);
  EXPECT_TRUE(c.checks());
  o.mode = "none";
  EXPECT_FALSE(passes::resolve_loss_scale(o).checks());
  o.skip_nonfinite = true;
  EXPECT_TRUE(passes::resolve_loss_scale(o).checks());
}

TEST(LossScaleOptions, RefusesBadValues) {
  auto error = [](auto change) {
    passes::LossScaleOptions o;
    o.mode = "dynamic";
    change(o);
    try {
      passes::resolve_loss_scale(o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(error([](auto& o) { o.mode = "sometimes"; }), HasSubstr("dynamic, static:S or none"));
  EXPECT_THAT(error([](auto& o) { o.mode = "static:x"; }), HasSubstr("static:S"));
  EXPECT_THAT(error([](auto& o) { o.mode = "static:0"; }), HasSubstr("positive"));
  EXPECT_THAT(error([](auto& o) { o.init_scale = 1e39; }), HasSubstr("--init-scale"));
  EXPECT_THAT(error([](auto& o) { o.growth_interval = 0; }), HasSubstr("--growth-interval"));
  EXPECT_THAT(error([](auto& o) { o.backoff_factor = 2; }), HasSubstr("--backoff-factor"));
  EXPECT_THAT(error([](auto& o) { o.growth_factor = 0.5; }), HasSubstr("--growth-factor"));
  EXPECT_THAT(error([](auto& o) {
                o.min_scale = 8;
                o.max_scale = 4;
              }),
              HasSubstr("above --max-scale"));
  EXPECT_THAT(error([](auto& o) {
                o.mode = "none";
                o.max_scale = 4;
              }),
              HasSubstr("bound the dynamic loss scale"));
}

TEST(LossScaling, ExportedStepIsCheckedAndSkipIsVisible) {
  const auto options = adam("dynamic");
  auto model = compiler::load_for_compile(kMlp, options);
  compiler::compile_model(*model, options, "mlp");
  const onnx::ModelProto proto = onnx_io::export_training_model(*model);
  EXPECT_NO_THROW(onnx_io::check_model(proto));
  ASSERT_EQ(proto.training_info_size(), 1);
  const auto& info = proto.training_info(0);
  std::map<std::string, std::string> binding;
  for (const auto& b : info.update_binding()) binding[b.key()] = b.value();
  ASSERT_TRUE(binding.count("amp.scale"));
  ASSERT_TRUE(binding.count("amp.growth_tracker"));
  // Every update of the optimizer (parameters, moments, step) is Where(amp.found_inf, old, new).
  std::map<std::string, const onnx::NodeProto*> producer;
  std::multiset<std::string> ampc_ops;
  for (const auto& n : info.algorithm().node()) {
    for (const auto& o : n.output()) producer[o] = &n;
    // The ampc ops besides the gradients' (LayerNormalizationGrad of the mlp's LayerNorm).
    if (n.domain() == "ampc" && !n.op_type().ends_with("Grad")) ampc_ops.insert(n.op_type());
  }
  EXPECT_EQ(ampc_ops, (std::multiset<std::string>{"UnscaleCheck", "UpdateScale"}));
  int predicated = 0;
  for (const auto& [key, value] : binding) {
    if (key.rfind("amp.", 0) == 0) continue;
    ASSERT_TRUE(producer.count(value)) << key;
    const onnx::NodeProto& n = *producer.at(value);
    EXPECT_EQ(n.op_type(), "Where") << key;
    EXPECT_EQ(n.input(0), "amp.found_inf") << key;
    EXPECT_EQ(n.input(1), key) << key;
    ++predicated;
  }
  EXPECT_EQ(predicated, 1 + 3 * 6);  // the step counter; 6 parameters with 2 moments each
}

// fp32 with dynamic scaling, and fp16 autocast whose default is dynamic scaling.
class SkipStep : public ::testing::TestWithParam<passes::Precision> {};

TEST_P(SkipStep, NonFiniteStepKeepsEveryBitAndBacksOff) {
  auto options = adam(GetParam() == passes::Precision::kFP32 ? "dynamic" : "");
  options.autocast.precision = GetParam();
  const plan::Plan p = compiler::compile_file(kMlp, options);
  rt::cpu::Executor exec(p);
  exec.run(test::random_batch(p, 1));
  for (float bad : {std::numeric_limits<float>::infinity(), std::nanf("")}) {
    const auto before = exec.state();
    exec.run(test::random_batch(p, 2, bad));
    const auto after = exec.state();
    ASSERT_EQ(before.size(), after.size());
    for (const auto& [name, t] : before) {
      if (name == "amp.scale") {
        EXPECT_EQ(f32(after.at(name)), f32(t) / 2) << bad;
      } else if (name == "amp.growth_tracker") {
        EXPECT_EQ(after.at(name).data<int32_t>()[0], 0);
      } else {
        EXPECT_TRUE(same_bits(t, after.at(name)))
            << name << " changed on a skipped step (" << bad << ")";
      }
    }
  }
  // A clean step trains again and counts towards growth.
  const auto before = exec.state();
  exec.run(test::random_batch(p, 3));
  const auto after = exec.state();
  EXPECT_FALSE(same_bits(before.at("fc1.weight"), after.at("fc1.weight")));
  EXPECT_EQ(f32(after.at("optimizer.step")), f32(before.at("optimizer.step")) + 1);
  EXPECT_EQ(after.at("amp.growth_tracker").data<int32_t>()[0], 1);
}

INSTANTIATE_TEST_SUITE_P(LossScaling, SkipStep,
                         ::testing::Values(passes::Precision::kFP32, passes::Precision::kFP16),
                         [](const auto& info) {
                           return info.param == passes::Precision::kFP32 ? "fp32" : "fp16";
                         });

// Scaling by a power of two and unscaling is exact in fp32 (no overflow or underflow here),
// so the parameters must be those of an unscaled run, bit for bit.
TEST(LossScaling, PowerOfTwoScalingTrainsLikeNoScaling) {
  std::map<std::string, std::map<std::string, rt::Tensor>> state;
  for (const std::string mode : {"none", "dynamic", "static:1024"}) {
    const plan::Plan p = compiler::compile_file(kMlp, adam(mode));
    rt::cpu::Executor exec(p);
    for (unsigned s = 0; s < 5; ++s) exec.run(test::random_batch(p, 10 + s));
    state[mode] = exec.state();
  }
  EXPECT_EQ(f32(state["dynamic"].at("amp.scale")), 65536.0f * 4);  // grew after steps 2 and 4
  EXPECT_FALSE(state["static:1024"].count("amp.scale")) << "a static scale is a constant";
  for (const auto& [name, t] : state["none"]) {
    EXPECT_TRUE(same_bits(t, state["dynamic"].at(name))) << name;
    EXPECT_TRUE(same_bits(t, state["static:1024"].at(name))) << name;
  }
}

// An fp16 plan unscales its parameters' fp16 gradients in fp32 (torch's unscale_ of the fp32
// .grad): loss = 2^-30 * sum(x W), x of ones [4, 2], W [2, 3] zeros, so dW = 4 * 2^-30 =
// 2^-28, scaled by 65536 to 2^-12 (exact in fp16), and SGD with lr 1 moves W to -2^-28 exactly.
// Unscaled in fp16, 2^-28 is below its smallest subnormal (2^-24): W would stay 0.
TEST(LossScaling, Fp16GradientsAreUnscaledInFp32) {
  test::TempDir dir;
  const std::string path = dir / "tiny_grad.onnx";
  {
    namespace ob = test::onnx_build;
    onnx::ModelProto m = ob::model("tiny_grad");
    onnx::GraphProto* g = m.mutable_graph();
    ob::add_float_io(g, "x", {4, 2});
    ob::add_float_io(g, "loss", {}, true);
    ob::add_float_initializer(g, "w", {2, 3}, std::vector<float>(6, 0.0f));
    ob::add_float_initializer(g, "k", {}, {std::ldexp(1.0f, -30)});
    ob::add_node(g, "MatMul", {"x", "w"}, "y");
    ob::add_int(ob::add_node(g, "ReduceSum", {"y"}, "sum"), "keepdims", 0);
    ob::add_node(g, "Mul", {"sum", "k"}, "loss");
    ob::write_model(m, path);
  }
  compiler::CompileOptions o;
  o.train = true;
  o.optimizer.kind = "sgd";
  o.optimizer.lr = 1.0;
  o.autocast.precision = passes::Precision::kFP16;
  const plan::Plan p = compiler::compile_file(path, o);
  rt::cpu::Executor exec(p);
  rt::Tensor x(DType::kFloat32, {4, 2});
  for (int i = 0; i < 8; ++i) x.data<float>()[i] = 1.0f;
  exec.run({{"x", x}});
  const auto state = exec.state();
  EXPECT_EQ(f32(state.at("amp.scale")), 65536.0f);
  const rt::Tensor& w = state.at("w");
  for (int i = 0; i < 6; ++i) EXPECT_EQ(w.data<float>()[i], -std::ldexp(1.0f, -28)) << i;
}

TEST(LossScaling, SkipNonFiniteWithoutScaling) {
  auto options = adam("none");
  options.loss_scale.skip_nonfinite = true;
  const plan::Plan p = compiler::compile_file(kMlp, options);
  std::set<std::string> names;
  for (const auto& b : p.buffers()) names.insert(b.name());
  EXPECT_FALSE(names.count("amp.scale"));
  EXPECT_TRUE(names.count("amp.found_inf"));
  rt::cpu::Executor exec(p);
  const auto before = exec.state();
  exec.run(test::random_batch(p, 1, std::nanf("")));
  for (const auto& [name, t] : before) EXPECT_TRUE(same_bits(t, exec.state().at(name))) << name;
  exec.run(test::random_batch(p, 1));
  EXPECT_FALSE(same_bits(before.at("fc1.weight"), exec.state().at("fc1.weight")));
}

TEST(LossScaling, NoScalingAddsNothing) {
  auto model = compiler::load_for_compile(kMlp, adam(""));
  compiler::compile_model(*model, adam(""), "mlp");
  for (const auto& n : model->graph->nodes) {  // gradient ops only (LayerNormalizationGrad)
    if (n->domain == "ampc") {
      EXPECT_TRUE(n->op_type.ends_with("Grad")) << n->label();
    }
  }
  for (const auto& v : model->graph->values) EXPECT_NE(v->name.rfind("amp.", 0), 0u) << v->name;
  for (const auto& u : model->state_updates) EXPECT_NE(u.source->producer->op_type, "Where");
}

}  // namespace
}  // namespace ampc
