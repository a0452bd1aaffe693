// The loss scaler's CPU ops of the "ampc" domain (runtime/cpu/ops/amp_ops.cc) on hand-built
// steps: UnscaleCheck (unscale + found_inf; omitted outputs: checked only), UpdateScale (torch's
// _amp_update_scale_ rule and ampc's bounds), ClipGradNorm (clip_grad_norm_), and their refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "base/error.h"
#include "runtime/cpu/op_context.h"
#include "runtime/cpu/op_registry.h"
#include "tests/unit/op_test_helpers.h"

namespace ampc::rt::cpu {
namespace {

using optest::attr_f;
using optest::attr_i;
using optest::make;
using optest::values;

std::vector<Tensor> run_amp(const std::string& op, const std::vector<Tensor>& inputs,
                            const std::vector<plan::Attribute>& attrs, int num_outputs) {
  return optest::run(op, inputs, attrs, num_outputs, 1, "ampc");
}

Tensor f32(float v) {
  return make(DType::kFloat32, {}, {v});
}
Tensor i32(int32_t v) {
  return make(DType::kInt32, {}, {static_cast<double>(v)});
}
Tensor flag(bool v) {
  Tensor t(DType::kBool, {});
  t.data<bool>()[0] = v;
  return t;
}
bool flag_of(const Tensor& t) {
  return t.data<bool>()[0];
}
float f32_of(const Tensor& t) {
  return t.data<float>()[0];
}
int32_t i32_of(const Tensor& t) {
  return t.data<int32_t>()[0];
}

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(UnscaleCheck, UnscalesEveryGradientAndReportsFinite) {
  const float inv = static_cast<float>(1.0 / 65536.0);
  const auto out = run_amp("UnscaleCheck",
                           {f32(inv), make(DType::kFloat32, {2, 2}, {65536, -131072, 3, 0}),
                            make(DType::kFloat64, {3}, {1, 2, 4})},
                           {}, 3);
  EXPECT_FALSE(flag_of(out[0]));
  EXPECT_EQ(out[0].shape(), std::vector<int64_t>{});
  EXPECT_EQ(values(out[1]), (std::vector<double>{1, -2, 3.0f * inv, 0}));
  EXPECT_EQ(out[2].dtype(), DType::kFloat64);
  EXPECT_EQ(values(out[2]), (std::vector<double>{inv, 2.0 * inv, 4.0 * inv}));
}

TEST(UnscaleCheck, FindsInfAndNanInAnyGradient) {
  for (float bad : {kInf, -kInf, std::numeric_limits<float>::quiet_NaN()}) {
    const auto out = run_amp(
        "UnscaleCheck",
        {f32(0.5f), make(DType::kFloat32, {2}, {1, 2}), make(DType::kFloat32, {3}, {1, bad, 3})},
        {}, 3);
    EXPECT_TRUE(flag_of(out[0])) << bad;
    EXPECT_EQ(values(out[1]), (std::vector<double>{0.5, 1}));
  }
}

TEST(UnscaleCheck, SixteenBitGradientsComputeInFp32AndRoundOnce) {
  // Expected values worked out by hand (not with the conversion under test). fp16: 2047 * 3 =
  // 6141 and 2046 * 3 = 6138 are exact in fp32; in [4096, 8192) fp16's spacing is 4, so 6141
  // rounds to 6140 and the tie 6138 to the even 6136 (mantissa 510, not 511). bf16: 255 * 3 =
  // 765 and 254 * 3 = 762; in [512, 1024) bf16's spacing is 4: 764, and the tie 762 to the
  // even 760. The inputs are exact in their formats. An fp16 inf gradient is found.
  const auto out = run_amp(
      "UnscaleCheck",
      {f32(3), make(DType::kFloat16, {2}, {2047, 2046}), make(DType::kBFloat16, {2}, {255, 254})},
      {}, 3);
  EXPECT_FALSE(flag_of(out[0]));
  ASSERT_EQ(out[1].dtype(), DType::kFloat16);
  EXPECT_EQ(out[1].data<Half>()[0].bits, 0x6dff);  // 6140 = 2^12 * (1 + 511 / 1024)
  EXPECT_EQ(out[1].data<Half>()[1].bits, 0x6dfe);  // 6136 = 2^12 * (1 + 510 / 1024)
  ASSERT_EQ(out[2].dtype(), DType::kBFloat16);
  EXPECT_EQ(out[2].data<BFloat16>()[0].bits, 0x443f);  // 764 = 2^9 * (1 + 63 / 128)
  EXPECT_EQ(out[2].data<BFloat16>()[1].bits, 0x443e);  // 760 = 2^9 * (1 + 62 / 128)
  const auto inf16 = run_amp("UnscaleCheck", {f32(1), make(DType::kFloat16, {1}, {kInf})}, {}, 2);
  EXPECT_TRUE(flag_of(inf16[0]));
}

// UnscaleCheck with the gradient outputs omitted where `present` is false.
std::vector<Tensor> unscale_check_some(const std::vector<Tensor>& inputs,
                                       const std::vector<bool>& present) {
  plan::Step step;
  step.set_op("UnscaleCheck");
  step.set_domain("ampc");
  step.set_opset_version(1);
  step.add_source_nodes("test_node");
  std::vector<const Tensor*> in;
  for (const auto& t : inputs) in.push_back(&t);
  std::vector<Tensor> out(inputs.size());
  std::vector<Tensor*> ptrs{&out[0]};
  for (size_t j = 0; j < present.size(); ++j) ptrs.push_back(present[j] ? &out[j + 1] : nullptr);
  OpContext ctx(step, in, ptrs);
  (*OpRegistry::instance().find("UnscaleCheck", "ampc"))(ctx);
  return out;
}

// A gradient whose output is omitted is checked only (the loss scaler's 16-bit gradients,
// which the optimizer unscales as it reads them), fp16 and bf16 by their exponent bits: the
// largest finite values and subnormals pass, inf of either sign and NaN are found. A present
// output is still unscaled beside it.
TEST(UnscaleCheck, OmittedOutputsAreCheckedOnly) {
  struct Case {
    DType t;
    std::vector<uint16_t> finite, bad;
  };
  const Case cases[] = {
      {DType::kFloat16, {0x7BFF, 0xFBFF, 0x0001, 0x8000, 0x3C00}, {0x7C00, 0xFC00, 0x7E00, 0x7C01}},
      {DType::kBFloat16,
       {0x7F7F, 0xFF7F, 0x0001, 0x8000, 0x3F80},
       {0x7F80, 0xFF80, 0x7FC0, 0x7F81}}};
  for (const Case& c : cases) {
    for (int bad = -1; bad < static_cast<int>(c.bad.size()); ++bad) {
      Tensor g(c.t, {static_cast<int64_t>(c.finite.size()) + 1});
      auto* bits = static_cast<uint16_t*>(g.raw());
      for (size_t i = 0; i < c.finite.size(); ++i) bits[i] = c.finite[i];
      bits[c.finite.size()] = bad < 0 ? c.finite[0] : c.bad[static_cast<size_t>(bad)];
      const auto out =
          unscale_check_some({f32(0.5f), g, make(DType::kFloat32, {2}, {4, 6})}, {false, true});
      EXPECT_EQ(flag_of(out[0]), bad >= 0) << dtype_name(c.t) << " case " << bad;
      EXPECT_FALSE(out[1].defined());
      EXPECT_EQ(values(out[2]), (std::vector<double>{2, 3}));
    }
  }
}

TEST(UnscaleCheck, RefusesABadInvScaleOrOutputCount) {
  EXPECT_THROW(run_amp("UnscaleCheck", {make(DType::kFloat64, {}, {1}), f32(1)}, {}, 2), Error);
  EXPECT_THROW(run_amp("UnscaleCheck", {f32(1), f32(1)}, {}, 3), Error);
}

// One UpdateScale call with the given attributes.
std::pair<float, int32_t> update(float scale, int32_t tracker, bool found_inf,
                                 std::vector<plan::Attribute> attrs = {}) {
  const auto out = run_amp("UpdateScale", {f32(scale), i32(tracker), flag(found_inf)}, attrs, 2);
  return {f32_of(out[0]), i32_of(out[1])};
}

TEST(UpdateScale, FollowsTorchsRule) {
  const std::vector<plan::Attribute> a = {attr_f("growth_factor", 2), attr_f("backoff_factor", 0.5),
                                          attr_i("growth_interval", 3)};
  EXPECT_EQ(update(65536, 0, false, a), std::make_pair(65536.0f, 1));
  EXPECT_EQ(update(65536, 1, false, a), std::make_pair(65536.0f, 2));
  EXPECT_EQ(update(65536, 2, false, a), std::make_pair(131072.0f, 0));  // grows, resets
  EXPECT_EQ(update(65536, 2, true, a), std::make_pair(32768.0f, 0));    // backs off, resets
  // A growth that overflows fp32 is not applied, but the tracker still resets.
  EXPECT_EQ(update(std::ldexp(1.0f, 127), 2, false, a), std::make_pair(std::ldexp(1.0f, 127), 0));
  // Defaults: 2, 0.5, 2000.
  EXPECT_EQ(update(1024, 1998, false), std::make_pair(1024.0f, 1999));
  EXPECT_EQ(update(1024, 1999, false), std::make_pair(2048.0f, 0));
  EXPECT_EQ(update(1024, 1999, true), std::make_pair(512.0f, 0));
  // torch has no floor: the scale keeps halving.
  EXPECT_EQ(update(std::ldexp(1.0f, -149), 0, true).first, 0.0f);
}

TEST(UpdateScale, HonoursTheOptionalBounds) {
  const std::vector<plan::Attribute> a = {attr_i("growth_interval", 1), attr_f("min_scale", 256),
                                          attr_f("max_scale", 4096)};
  EXPECT_EQ(update(256, 0, true, a), std::make_pair(256.0f, 0));
  EXPECT_EQ(update(300, 0, true, a), std::make_pair(256.0f, 0));
  EXPECT_EQ(update(4096, 0, false, a), std::make_pair(4096.0f, 0));
  EXPECT_EQ(update(3000, 0, false, a), std::make_pair(4096.0f, 0));
  EXPECT_EQ(update(1024, 0, false, a), std::make_pair(2048.0f, 0));
}

TEST(ClipGradNorm, ClipsLikeTorch) {
  // Norms 5 and 12: total 13.
  const auto out = run_amp("ClipGradNorm",
                           {make(DType::kFloat32, {2}, {3, 4}), make(DType::kFloat64, {1}, {12})},
                           {attr_f("max_norm", 6.5f)}, 3);
  EXPECT_EQ(f32_of(out[0]), 13.0f);
  const float coef = 6.5f / (13.0f + 1e-6f);
  EXPECT_EQ(values(out[1]), (std::vector<double>{3 * coef, 4 * coef}));
  EXPECT_EQ(values(out[2]), (std::vector<double>{12.0 * static_cast<double>(coef)}));
  // Below the threshold the coefficient is clamped to 1: the gradients are unchanged.
  const auto same =
      run_amp("ClipGradNorm", {make(DType::kFloat32, {2}, {3, 4})}, {attr_f("max_norm", 100)}, 2);
  EXPECT_EQ(values(same[1]), (std::vector<double>{3, 4}));
}

TEST(ClipGradNorm, MeasuresOnlyWithoutMaxNorm) {
  const auto out =
      run_amp("ClipGradNorm",
              {make(DType::kFloat32, {2}, {3, 4}), make(DType::kFloat32, {1}, {12})}, {}, 1);
  EXPECT_EQ(f32_of(out[0]), 13.0f);
  EXPECT_THROW(run_amp("ClipGradNorm", {make(DType::kFloat32, {1}, {1})}, {}, 2), Error);
  const auto inf = run_amp("ClipGradNorm", {make(DType::kFloat32, {1}, {kInf})}, {}, 1);
  EXPECT_TRUE(std::isinf(f32_of(inf[0])));
}

}  // namespace
}  // namespace ampc::rt::cpu
