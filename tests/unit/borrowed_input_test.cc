// Inputs read where they lie (Tensor::borrowed, what the Python API hands the executor): a
// training step over borrowed inputs computes bit for bit what it computes over owned
// copies, its steps read the caller's memory itself (seen through the step observer), the
// caller's memory is never written, and nothing the executor returns or keeps (outputs,
// state) points into it.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "driver/pipeline.h"
#include "runtime/cpu/executor.h"

namespace ampc::rt::cpu {
namespace {

plan::Plan mlp_training_plan() {
  compiler::CompileOptions o;
  o.train = true;
  o.autocast.precision = passes::parse_precision("fp16");
  o.lowering.target = "cpu";  // fused kernels through the host JIT
  return compiler::compile_file(std::string(AMPC_SOURCE_DIR) + "/models/mlp.onnx", o);
}

// A batch of models/mlp.onnx (x f32[32,64], y i64[32]) in the caller's own vectors.
struct CallerBatch {
  std::vector<float> x = std::vector<float>(32 * 64);
  std::vector<int64_t> y = std::vector<int64_t>(32);
  explicit CallerBatch(int step) {
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7 + step) % 17) / 17.f;
    for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int64_t>((i + step) % 10);
  }
  std::map<std::string, Tensor> borrowed() {
    return {{"x", Tensor::borrowed(DType::kFloat32, {32, 64}, x.data())},
            {"y", Tensor::borrowed(DType::kInt64, {32}, y.data())}};
  }
  std::map<std::string, Tensor> owned() {
    std::map<std::string, Tensor> out;
    for (auto& [name, t] : borrowed()) out.emplace(name, t.owned_copy());
    return out;
  }
};

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

bool points_into(const Tensor& t, const void* begin, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(t.raw());
  const auto* b = static_cast<const uint8_t*>(begin);
  return t.nbytes() > 0 && p < b + bytes && b < p + t.nbytes();
}

TEST(BorrowedTensor, SharesMemoryAndOwnedCopyDoesNot) {
  std::vector<float> v{1, 2, 3, 4, 5, 6};
  const Tensor t = Tensor::borrowed(DType::kFloat32, {2, 3}, v.data());
  EXPECT_TRUE(t.is_borrowed());
  EXPECT_EQ(t.raw(), v.data());
  EXPECT_EQ(t.nbytes(), 24u);
  const Tensor copy = t;  // a plain copy shares the memory
  EXPECT_EQ(copy.raw(), v.data());
  const Tensor own = t.owned_copy();
  EXPECT_FALSE(own.is_borrowed());
  EXPECT_NE(own.raw(), v.data());
  EXPECT_TRUE(same_bits(own, t));
  // An empty tensor borrows nothing.
  EXPECT_FALSE(Tensor::borrowed(DType::kFloat32, {0, 3}, nullptr).is_borrowed());
  EXPECT_THROW(Tensor::borrowed(DType::kFloat32, {2}, nullptr), Error);
}

TEST(BorrowedInputs, TrainingStepsReadTheCallersMemoryAndMatchOwnedInputs) {
  const plan::Plan plan = mlp_training_plan();
  Executor on_borrowed(plan);
  Executor on_owned(plan);
  for (int step = 0; step < 3; ++step) {
    CallerBatch batch(step);
    const CallerBatch before(step);
    size_t reads_of_caller_memory = 0;
    on_borrowed.set_step_observer([&](int, const std::vector<const Tensor*>& inputs,
                                      const std::vector<const Tensor*>& outputs) {
      for (const Tensor* t : inputs) {
        if (t && (t->raw() == batch.x.data() || t->raw() == batch.y.data()))
          ++reads_of_caller_memory;
      }
      for (const Tensor* t : outputs) {
        ASSERT_FALSE(t && (points_into(*t, batch.x.data(), batch.x.size() * 4) ||
                           points_into(*t, batch.y.data(), batch.y.size() * 8)))
            << "a step wrote into the caller's memory";
      }
    });
    const auto out_b = on_borrowed.run(batch.borrowed());
    const auto out_o = on_owned.run(batch.owned());
    EXPECT_GT(reads_of_caller_memory, 0u) << "no step read the caller's arrays where they lie";
    EXPECT_EQ(batch.x, before.x);
    EXPECT_EQ(batch.y, before.y);
    ASSERT_EQ(out_b.size(), out_o.size());
    for (const auto& [name, t] : out_b) {
      EXPECT_FALSE(t.is_borrowed()) << name;
      EXPECT_TRUE(same_bits(t, out_o.at(name))) << "output " << name << " at step " << step;
    }
  }
  const auto state_b = on_borrowed.state();
  const auto state_o = on_owned.state();
  ASSERT_EQ(state_b.size(), state_o.size());
  for (const auto& [name, t] : state_b) {
    EXPECT_FALSE(t.is_borrowed()) << name;
    EXPECT_TRUE(same_bits(t, state_o.at(name))) << "state " << name;
  }
}

TEST(BorrowedInputs, LoadStateKeepsNoReferenceToTheCallersMemory) {
  Executor executor(mlp_training_plan());
  auto state = executor.state();
  std::map<std::string, std::vector<uint8_t>> caller;
  std::map<std::string, Tensor> borrowed;
  for (const auto& [name, t] : state) {
    auto& bytes = caller[name];
    bytes.assign(static_cast<const uint8_t*>(t.raw()),
                 static_cast<const uint8_t*>(t.raw()) + t.nbytes());
    borrowed.emplace(name, Tensor::borrowed(t.dtype(), t.shape(), bytes.data()));
  }
  executor.load_state(borrowed);
  CallerBatch batch(0);
  executor.run(batch.borrowed());  // updates the state in place
  for (const auto& [name, t] : executor.state()) {
    EXPECT_FALSE(t.is_borrowed()) << name;
    EXPECT_TRUE(std::memcmp(caller[name].data(), state.at(name).raw(), t.nbytes()) == 0)
        << "the step wrote state '" << name << "' into the caller's memory";
  }
}

}  // namespace
}  // namespace ampc::rt::cpu
