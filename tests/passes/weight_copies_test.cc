// The 16-bit weight copies the optimizer keeps (passes/weight_copies.h) on models/mlp.onnx,
// compiled and run in-process in bf16 and fp16: every GEMM of the forward reads a copy instead
// of a cast of its parameter; before every step (including a skipped fp16 step and after
// load_state sets other masters) each copy the step reads holds its master rounded to nearest
// even, checked against the host compiler's _Float16 conversion (fp16) and a bit-level bf16
// rounding written here; state() reports masters only, and load_state needs no copies. fp32
// plans and --recast-weights keep none.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>

#include "driver/pipeline.h"
#include "passes/weight_copies.h"
#include "runtime/cpu/executor.h"
#include "tests/support/random_batch.h"

namespace ampc {
namespace {

const std::string kMlp = std::string(AMPC_SOURCE_DIR) + "/models/mlp.onnx";

compiler::CompileOptions sgd(passes::Precision precision) {
  compiler::CompileOptions o;
  o.train = true;
  o.optimizer.kind = "sgd";
  o.optimizer.lr = 0.1;
  o.optimizer.momentum = 0.9;
  o.autocast.precision = precision;
  return o;
}

// Round to nearest even, the oracle for finite values: bf16 on the bits, fp16 by the host
// compiler's _Float16 conversion.
uint16_t rounded_bits(float x, DType to) {
  if (to == DType::kFloat16) {
    const _Float16 h = static_cast<_Float16>(x);
    uint16_t out;
    std::memcpy(&out, &h, 2);
    return out;
  }
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// Runs one step and checks every copy the steps read against its master as it was before.
class CopyCheck {
 public:
  CopyCheck(const plan::Plan& p, rt::cpu::Executor& e) : p_(p), e_(e) {
    e_.set_step_observer([this](int step, const std::vector<const rt::Tensor*>& inputs,
                                const std::vector<const rt::Tensor*>&) {
      const auto& s = p_.steps(step);
      for (int k = 0; k < s.inputs_size(); ++k) {
        const int id = s.inputs(k);
        if (id < 0 || p_.buffers(id).copy_of() == 0 || !inputs[static_cast<size_t>(k)]) continue;
        check(p_.buffers(id), *inputs[static_cast<size_t>(k)]);
        read_.insert(id);
      }
    });
  }

  // The number of distinct copies the step read.
  size_t run(const std::map<std::string, rt::Tensor>& inputs) {
    masters_ = e_.state();
    read_.clear();
    e_.run(inputs);
    return read_.size();
  }

 private:
  void check(const plan::Buffer& copy, const rt::Tensor& value) {
    const plan::Buffer& master = p_.buffers(copy.copy_of() - 1);
    const rt::Tensor& m = masters_.at(master.name());
    ASSERT_EQ(value.numel(), m.numel()) << copy.name();
    const auto to = static_cast<DType>(copy.dtype());
    ASSERT_EQ(value.dtype(), to);
    const auto* bits = static_cast<const uint16_t*>(value.raw());
    for (int64_t i = 0; i < m.numel(); ++i) {
      ASSERT_EQ(bits[i], rounded_bits(m.data<float>()[i], to))
          << copy.name() << "[" << i << "] is not " << master.name() << " rounded";
    }
  }

  const plan::Plan& p_;
  rt::cpu::Executor& e_;
  std::map<std::string, rt::Tensor> masters_;
  std::set<int> read_;
};

class WeightCopies : public ::testing::TestWithParam<passes::Precision> {};

TEST_P(WeightCopies, ForwardReadsCopiesTheOptimizerKeepsRounded) {
  const plan::Plan p = compiler::compile_file(kMlp, sgd(GetParam()));
  // One copy per weight and bias of the mlp's two Gemms (LayerNormalization's stay fp32), each
  // of an fp32 parameter.
  std::set<std::string> masters;
  for (const auto& b : p.buffers()) {
    if (b.copy_of() == 0) continue;
    EXPECT_EQ(b.role(), plan::STATE) << b.name();
    const plan::Buffer& m = p.buffers(b.copy_of() - 1);
    EXPECT_TRUE(m.from_model()) << m.name();
    EXPECT_EQ(static_cast<DType>(m.dtype()), DType::kFloat32);
    EXPECT_THAT(b.name(), ::testing::StartsWith(m.name() + std::string(passes::kCopySuffix)));
    masters.insert(m.name());
  }
  EXPECT_EQ(masters.size(), 4u);
  // Only the optimizer's steps read the masters (fused with backward work): the forward
  // reads the copies.
  for (const auto& s : p.steps()) {
    for (int id : s.inputs()) {
      if (id < 0 || !masters.count(p.buffers(id).name())) continue;
      EXPECT_THAT(s.source_phases(), ::testing::Contains(plan::OPTIMIZER)) << s.source_nodes(0);
      EXPECT_THAT(s.source_phases(), ::testing::Not(::testing::Contains(plan::FORWARD)))
          << p.buffers(id).name() << " read by " << s.source_nodes(0);
    }
  }
  rt::cpu::Executor e(p);
  CopyCheck check(p, e);
  EXPECT_EQ(check.run(test::random_batch(p, 1)), 4u);  // the initial copies
  EXPECT_EQ(check.run(test::random_batch(p, 2)), 4u);  // written by step 1's update
  if (GetParam() == passes::Precision::kFP16) {
    const auto before = e.state();
    check.run(test::random_batch(
        p, 3, std::nanf("")));  // skipped: the masters and the copies keep their bits
    EXPECT_EQ(std::memcmp(before.at("fc1.weight").raw(), e.state().at("fc1.weight").raw(),
                          before.at("fc1.weight").nbytes()),
              0);
  }
  EXPECT_EQ(check.run(test::random_batch(p, 4)), 4u);

  // State as reported has the masters only; loading other masters recomputes the copies.
  auto state = e.state();
  for (const auto& [name, t] : state) {
    EXPECT_EQ(name.find(passes::kCopySuffix), std::string::npos) << name;
  }
  for (const std::string& name : masters) {
    rt::Tensor& t = state.at(name);
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<float>()[i] = -0.37f * t.data<float>()[i] + 1e-3f;
  }
  e.load_state(state);
  EXPECT_EQ(check.run(test::random_batch(p, 5)), 4u);
}

INSTANTIATE_TEST_SUITE_P(Training, WeightCopies,
                         ::testing::Values(passes::Precision::kBF16, passes::Precision::kFP16),
                         [](const auto& info) {
                           return info.param == passes::Precision::kBF16 ? "bf16" : "fp16";
                         });

// fp32 plans cast nothing and keep no copies; --recast-weights keeps none either, and then
// the forward casts the masters.
TEST(WeightCopiesOff, Fp32AndRecastWeights) {
  const plan::Plan fp32 = compiler::compile_file(kMlp, sgd(passes::Precision::kFP32));
  for (const auto& b : fp32.buffers()) EXPECT_EQ(b.copy_of(), 0) << b.name();
  auto o = sgd(passes::Precision::kBF16);
  o.recast_weights = true;
  const plan::Plan p = compiler::compile_file(kMlp, o);
  bool forward_reads_master = false;
  for (const auto& b : p.buffers()) EXPECT_EQ(b.copy_of(), 0) << b.name();
  for (const auto& s : p.steps()) {
    for (int id : s.inputs()) {
      forward_reads_master |=
          id >= 0 && p.buffers(id).name() == "fc1.weight" && s.source_phases(0) == plan::FORWARD;
    }
  }
  EXPECT_TRUE(forward_reads_master);
}

}  // namespace
}  // namespace ampc
