// passes/data_parallel.h on the example models, in-process:
// - the plan's buckets: every parameter gradient reduced exactly once (the gradients
//   UnscaleCheck reads are the waits' outputs), buckets filled to the size asked, each start
//   scheduled before backward work that follows it (overlap), every wait before UnscaleCheck;
// - --reduce-dtype fp16: the in-flight buffers are f16, the reduced gradients f32;
// - on one process (no collectives) the data-parallel plan trains bit for bit like the plan
//   without it: the communication ops are then copies (division by a world of 1).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>
#include <string>

#include "driver/pipeline.h"
#include "runtime/cpu/executor.h"
#include "runtime/data/batcher.h"

namespace ampc {
namespace {

plan::Plan compile(const std::string& model, passes::Precision precision, bool data_parallel,
                   int64_t bucket_bytes = 16 << 10, DType reduce = DType::kUndefined) {
  compiler::CompileOptions o;
  o.train = true;
  o.optimizer.kind = "adam";
  o.optimizer.lr = 1e-3;
  o.autocast.precision = precision;
  o.data_parallel = {
      .enabled = data_parallel, .reduce_dtype = reduce, .bucket_bytes = bucket_bytes};
  o.lowering.target = "cpu";
  return compiler::compile_file(std::string(AMPC_SOURCE_DIR) + "/models/" + model + ".onnx", o);
}

int64_t bytes_of(const plan::Buffer& b) {
  int64_t n = static_cast<int64_t>(dtype_size(static_cast<DType>(b.dtype())));
  for (int64_t d : b.shape()) n *= d;
  return n;
}

int64_t bucket(const plan::Step& s) {
  if (!s.has_all_reduce()) ADD_FAILURE() << "no all-reduce parameters";
  return s.all_reduce().bucket();
}

TEST(DataParallelPass, BucketsCoverEveryGradientAndOverlapTheBackward) {
  const int64_t cap = 16 << 10;
  const plan::Plan p = compile("gpt", passes::Precision::kFP16, true, cap);
  int unscale = -1, first_wait = -1;
  std::vector<int> starts;
  std::map<int64_t, int> start_of, wait_of;  // bucket -> step index
  std::set<int> reduced;                     // buffers the waits produce
  std::vector<int64_t> bucket_bytes;
  for (int i = 0; i < p.steps_size(); ++i) {
    const auto& s = p.steps(i);
    if (s.op() == "AllReduceStart") {
      EXPECT_TRUE(start_of.emplace(bucket(s), i).second) << "bucket started twice";
      starts.push_back(i);
      int64_t bytes = 0;
      for (int id : s.inputs()) bytes += bytes_of(p.buffers(id));
      bucket_bytes.push_back(bytes);
    } else if (s.op() == "AllReduceWait") {
      EXPECT_TRUE(wait_of.emplace(bucket(s), i).second) << "bucket waited twice";
      if (first_wait < 0) first_wait = i;
      for (int id : s.outputs()) reduced.insert(id);
    } else if (s.op() == "UnscaleCheck") {
      unscale = i;
    }
  }
  ASSERT_GE(starts.size(), 3u) << "gpt's gradients in 16 KiB buckets";
  ASSERT_GE(unscale, 0);
  for (const auto& [bucket, start] : start_of) {
    ASSERT_TRUE(wait_of.count(bucket)) << "bucket " << bucket << " is never waited for";
    EXPECT_LT(start, wait_of[bucket]);
    EXPECT_LT(wait_of[bucket], unscale) << "bucket " << bucket << " waited after UnscaleCheck";
  }
  // Every gradient the loss scaler checks comes from a wait, and every wait output is checked.
  const auto& u = p.steps(unscale);
  std::set<int> checked(u.inputs().begin() + 1, u.inputs().end());
  EXPECT_EQ(checked, reduced);
  // Buckets closed at the size asked (all but the last), or where the dtype changes.
  for (size_t k = 0; k + 1 < bucket_bytes.size(); ++k)
    EXPECT_GE(bucket_bytes[k], cap) << "bucket " << k;
  // Overlap: backward steps run between the first start and the first wait.
  int between = 0;
  for (int i = starts.front() + 1; i < first_wait; ++i) {
    const std::string& op = p.steps(i).op();
    between += op != "AllReduceStart" && op != "AllReduceWait";
  }
  EXPECT_GT(between, 10) << "the first bucket starts only after the whole backward";
}

TEST(DataParallelPass, LowDtypeTravelsInFp16) {
  const plan::Plan p = compile("mlp", passes::Precision::kFP32, true, 1 << 20, DType::kFloat16);
  int starts = 0;
  for (const auto& s : p.steps()) {
    if (s.op() == "AllReduceStart") {
      ++starts;
      for (int id : s.outputs())
        EXPECT_EQ(static_cast<DType>(p.buffers(id).dtype()), DType::kFloat16);
    }
    if (s.op() == "AllReduceWait") {
      for (int id : s.outputs())
        EXPECT_EQ(static_cast<DType>(p.buffers(id).dtype()), DType::kFloat32);
    }
  }
  EXPECT_EQ(starts, 1) << "the mlp's 40 KB of gradients in one 1 MiB bucket";
}

TEST(DataParallelPass, OneProcessTrainsBitForBitLikeThePlainPlan) {
  const plan::Plan plain = compile("mlp", passes::Precision::kFP16, false);
  const plan::Plan dp = compile("mlp", passes::Precision::kFP16, true, 4 << 10);
  std::map<std::string, rt::data::InputSpec> specs;
  for (const auto& binding : plain.inputs()) {
    const auto& b = plain.buffers(binding.buffer());
    specs[binding.name()] = {static_cast<DType>(b.dtype()),
                             {b.shape().begin() + 1, b.shape().end()}};
  }
  rt::data::Batcher batcher(
      rt::data::Dataset::open(std::string(AMPC_SOURCE_DIR) + "/models/data/digits.npz"), specs,
      {.batch_size = 32});
  rt::cpu::Executor a(plain), b(dp);
  for (int step = 0; step < 3; ++step) {
    const auto batch = batcher.next();
    const float la = a.run(batch).at("loss").data<float>()[0];
    const float lb = b.run(batch).at("loss").data<float>()[0];
    EXPECT_EQ(std::memcmp(&la, &lb, sizeof la), 0) << "loss of step " << step;
  }
  const auto sa = a.state(), sb = b.state();
  ASSERT_EQ(sa.size(), sb.size());
  for (const auto& [name, t] : sa) {
    const rt::Tensor& u = sb.at(name);
    ASSERT_EQ(t.nbytes(), u.nbytes()) << name;
    EXPECT_EQ(std::memcmp(t.raw(), u.raw(), t.nbytes()), 0) << "state " << name;
  }
}

}  // namespace
}  // namespace ampc
