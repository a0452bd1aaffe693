// A training plan's file holds each parameter's bytes once, whatever the optimizer and
// precision: all-zero initial values (fresh optimizer moments, BatchNorm's running mean) are
// stored without their bytes (TensorData.zeros) and read back as zeros, and the 16-bit weight
// copies carry no initial value (the backends round their masters). The oracle is the ONNX
// file itself: its initializers' bytes, read with ONNX's own protobuf classes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <string>

#include <onnx/onnx_pb.h>

#include "base/error.h"
#include "driver/pipeline.h"
#include "ir/tensor.h"
#include "lower/plan_convert.h"
#include "runtime/cpu/executor.h"
#include "runtime/cpu/op_context.h"
#include "runtime/plan/plan_file.h"
#include "runtime/state_copies.h"

namespace ampc {
namespace {

std::string model_path(const std::string& name) {
  return std::string(AMPC_SOURCE_DIR) + "/models/" + name + ".onnx";
}

// The model's initializers (raw_data as torch.onnx.export writes them), by name.
std::map<std::string, std::string> onnx_initializer_bytes(const std::string& path) {
  onnx::ModelProto m;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(m.ParseFromIstream(&in)) << path;
  std::map<std::string, std::string> out;
  for (const auto& t : m.graph().initializer()) out[t.name()] = t.raw_data();
  return out;
}

bool all_zero(const std::string& bytes) {
  return bytes.find_first_not_of('\0') == std::string::npos;
}

struct Case {
  std::string model;
  std::string optimizer;
  passes::Precision precision;
};

class PlanStateBytes : public ::testing::TestWithParam<Case> {};

TEST_P(PlanStateBytes, FileHoldsEachParameterOnce) {
  const Case& c = GetParam();
  compiler::CompileOptions o;
  o.train = true;
  o.optimizer.kind = c.optimizer;
  o.optimizer.lr = 0.01;
  if (c.optimizer == "sgd") o.optimizer.momentum = 0.9;
  o.autocast.precision = c.precision;
  const plan::Plan p = compiler::compile_file(model_path(c.model), o);
  const auto onnx_bytes = onnx_initializer_bytes(model_path(c.model));

  // The state the plan keeps beside the model's initializers (moments, scaler, copies) is
  // several times the model's bytes: what the file stores of it is what is checked.
  size_t model_bytes = 0, nonzero_model_bytes = 0, state_bytes = 0;
  for (const auto& [name, bytes] : onnx_bytes) {
    model_bytes += bytes.size();
    if (!all_zero(bytes)) nonzero_model_bytes += bytes.size();
  }
  plan::Plan without_state = p;
  rt::cpu::Executor exec(p);
  const auto state = exec.state();
  for (auto& b : *without_state.mutable_buffers()) {
    if (b.role() != plan::STATE) continue;
    const rt::Tensor value = rt::initial_value(p, b);
    state_bytes += static_cast<size_t>(value.nbytes());
    if (b.copy_of() != 0) {
      EXPECT_FALSE(b.has_initial()) << "rounded copy '" << b.name() << "' stores a value";
    } else if (b.from_model()) {
      // The model's value, bit for bit, whether stored or marked all-zero.
      ASSERT_TRUE(onnx_bytes.count(b.name())) << b.name();
      const std::string& want = onnx_bytes.at(b.name());
      ASSERT_EQ(static_cast<size_t>(value.nbytes()), want.size()) << b.name();
      EXPECT_EQ(std::memcmp(value.raw(), want.data(), want.size()), 0) << b.name();
      EXPECT_EQ(b.initial().zeros(), all_zero(want)) << b.name();
    }
    // What the executor starts from is that value.
    if (b.copy_of() == 0) {
      const rt::Tensor& loaded = state.at(b.name());
      EXPECT_EQ(std::memcmp(loaded.raw(), value.raw(), value.nbytes()), 0) << b.name();
    }
    b.clear_initial();
  }
  EXPECT_GE(state_bytes, 2 * model_bytes) << "the optimizer keeps less state than expected";
  const size_t stored = plan::serialize_plan(p).size() - plan::serialize_plan(without_state).size();
  // Each stored tensor costs a few bytes of framing (dtype, dims, lengths) beside its data.
  const size_t framing = 64 * static_cast<size_t>(p.buffers_size());
  EXPECT_GE(stored, nonzero_model_bytes);
  EXPECT_LE(stored, nonzero_model_bytes + framing)
      << "the plan stores " << stored << " bytes of state for " << nonzero_model_bytes
      << " bytes of non-zero parameters";
}

INSTANTIATE_TEST_SUITE_P(Models, PlanStateBytes,
                         ::testing::Values(Case{"mlp", "sgd", passes::Precision::kFP32},
                                           Case{"mlp", "adam", passes::Precision::kBF16},
                                           Case{"cnn", "sgd", passes::Precision::kBF16},
                                           Case{"cnn", "adam", passes::Precision::kFP16}),
                         [](const auto& info) {
                           const Case& c = info.param;
                           const char* prec = c.precision == passes::Precision::kFP32   ? "fp32"
                                              : c.precision == passes::Precision::kBF16 ? "bf16"
                                                                                        : "fp16";
                           return c.model + "_" + c.optimizer + "_" + prec;
                         });

ir::Tensor tensor_of(const std::string& bytes) {
  ir::Tensor t;
  t.dtype = DType::kFloat32;
  t.dims = {static_cast<int64_t>(bytes.size() / 4)};
  t.bytes.assign(bytes.begin(), bytes.end());
  return t;
}

// All-zero bytes are marked and left out; -0.0 (a set sign bit) and any other value keep
// their bytes; a marked tensor that carries bytes anyway is refused, not half read.
TEST(PlanTensorData, AllZeroBytesAreMarkedAndReadBackAsZeros) {
  plan::TensorData zeros;
  lower::plan_tensor_data(tensor_of(std::string(16, '\0')), &zeros);
  EXPECT_TRUE(zeros.zeros());
  EXPECT_TRUE(zeros.data().empty());
  const rt::Tensor z = rt::cpu::tensor_from_data(zeros);
  ASSERT_EQ(z.numel(), 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(z.data<float>()[i], 0.0f);

  const float minus_zero[4] = {0.0f, -0.0f, 0.0f, 0.0f};
  plan::TensorData signed_zero;
  lower::plan_tensor_data(tensor_of(std::string(reinterpret_cast<const char*>(minus_zero), 16)),
                          &signed_zero);
  EXPECT_FALSE(signed_zero.zeros());
  EXPECT_EQ(signed_zero.data().size(), 16u);
  EXPECT_TRUE(std::signbit(rt::cpu::tensor_from_data(signed_zero).data<float>()[1]));

  plan::TensorData empty;
  lower::plan_tensor_data(tensor_of(""), &empty);
  EXPECT_FALSE(empty.zeros());

  zeros.set_data(std::string(16, '\0'));
  EXPECT_THROW(rt::cpu::tensor_from_data(zeros), Error);
}

}  // namespace
}  // namespace ampc
