// Data parallel on the GPU (runtime/cuda/ops_comm.cc, nccl_comm.h):
// - without a device: every step of a data-parallel mlp plan (fp32, fp16) has a CUDA builder;
// - on one GPU: a one-rank NCCL communicator, the plan's all-reduces (ncclAvg of one rank: the
//   identity) captured in the step's CUDA Graph, and the losses and parameters of 5 Adam steps
//   against the CPU backend running the same plan (where the communication ops are copies).
// The 2-rank run on two GPUs is tests/gpu/run.sh's (mpirun).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "driver/pipeline.h"
#include "runtime/cpu/executor.h"
#include "runtime/cuda/device.h"
#include "runtime/cuda/executor.h"
#include "runtime/cuda/nccl_comm.h"
#include "runtime/cuda/op_builders.h"
#include "runtime/data/batcher.h"
#include "tests/gpu/require_device.h"

namespace ampc {
namespace {

std::string source_dir() {
  const char* env = std::getenv("AMPC_SOURCE_DIR");
  return env && *env ? env : AMPC_SOURCE_DIR;
}

// A world of one rank: what init_nccl needs of MPI when there is no other process.
class OneRank final : public rt::dist::Collectives {
 public:
  int rank() const override { return 0; }
  int world() const override { return 1; }
  int local_rank() const override { return 0; }
  void start_sum(int64_t, void*, int64_t, DType) override {}
  void wait(int64_t) override {}
  void sum_now(void*, int64_t, DType, const std::string&) override {}
  void sum(std::vector<double>&, const std::string&) override {}
  std::vector<uint64_t> all_gather(uint64_t v, const std::string&) override { return {v}; }
  void broadcast(std::vector<char>&, int, const std::string&) override {}
  void set_phase(const std::string&) override {}
};

plan::Plan compile(passes::Precision precision, const std::string& target) {
  compiler::CompileOptions o;
  o.train = true;
  o.optimizer.kind = "adam";
  o.optimizer.lr = 1e-3;
  o.autocast.precision = precision;
  o.data_parallel = {.enabled = true, .bucket_bytes = 4 << 10};  // several buckets
  o.lowering.target = target;
  return compiler::compile_file(source_dir() + "/models/mlp.onnx", o);
}

int count_steps(const plan::Plan& p, const std::string& op) {
  int n = 0;
  for (const auto& s : p.steps()) n += s.op() == op;
  return n;
}

TEST(NcclPlan, EveryStepHasACudaBuilder) {
  for (auto precision : {passes::Precision::kFP32, passes::Precision::kFP16}) {
    const plan::Plan p = compile(precision, "cuda:sm_90");
    EXPECT_GE(count_steps(p, "AllReduceStart"), 2);
    EXPECT_EQ(count_steps(p, "AllReduceStart"), count_steps(p, "AllReduceWait"));
    EXPECT_TRUE(rt::cuda::missing_cuda_ops(p).empty())
        << "no CUDA builder for " << rt::cuda::missing_cuda_ops(p)[0];
  }
}

// --sync-batchnorm's ops (ampc.AllReduceSum, ampc.BatchStatistics) have CUDA builders too.
TEST(NcclPlan, SyncBatchNormStepsHaveCudaBuilders) {
  compiler::CompileOptions o;
  o.train = true;
  o.data_parallel = {.enabled = true, .sync_batchnorm = true};
  o.lowering.target = "cuda:sm_90";
  const plan::Plan p = compiler::compile_file(source_dir() + "/models/cnn.onnx", o);
  EXPECT_EQ(count_steps(p, "AllReduceSum"), 1 + 4 * 2);  // world size; 2 + 2 per BatchNorm
  EXPECT_EQ(count_steps(p, "BatchStatistics"), 2);
  EXPECT_TRUE(rt::cuda::missing_cuda_ops(p).empty())
      << "no CUDA builder for " << rt::cuda::missing_cuda_ops(p)[0];
}

TEST(NcclSmoke, OneRankTrainsLikeTheCpuBackend) {
  AMPC_REQUIRE_CUDA_DEVICE();
  const rt::cuda::DeviceInfo d = rt::cuda::open_device(0);
  const plan::Plan p =
      compile(passes::Precision::kFP32, d.arch() >= 90 ? "cuda:sm_90" : "cuda:sm_80");
  std::map<std::string, rt::data::InputSpec> specs;
  for (const auto& binding : p.inputs()) {
    const auto& b = p.buffers(binding.buffer());
    specs[binding.name()] = {static_cast<DType>(b.dtype()),
                             {b.shape().begin() + 1, b.shape().end()}};
  }
  rt::data::Batcher batcher(rt::data::Dataset::open(source_dir() + "/models/data/digits.npz"),
                            specs, {.batch_size = 32});

  rt::cuda::Executor gpu(p, {.device = 0, .pipeline_depth = 5});
  OneRank world;
  rt::cuda::init_nccl(world);
  ASSERT_NE(rt::cuda::nccl_communicator(), nullptr);
  rt::cpu::Executor cpu(p);
  for (int s = 0; s < 5; ++s) {
    const auto batch = batcher.next();
    const float want = cpu.run(batch).at("loss").data<float>()[0];
    const float got = gpu.run(batch).at("loss").data<float>()[0];
    EXPECT_NEAR(got, want, 1e-4 * std::abs(want)) << "step " << s;
  }
  const auto cpu_state = cpu.state(), gpu_state = gpu.state();
  for (const auto& [name, want] : cpu_state) {
    if (want.dtype() != DType::kFloat32) continue;
    const rt::Tensor& got = gpu_state.at(name);
    for (int64_t i = 0; i < want.numel(); ++i) {
      ASSERT_NEAR(got.data<float>()[i], want.data<float>()[i],
                  1e-4 * std::abs(want.data<float>()[i]) + 1e-6)
          << name << "[" << i << "]";
    }
  }
  std::cout << "[cuda] NCCL one-rank smoke test: " << count_steps(p, "AllReduceStart")
            << " buckets per step through NCCL\n";
  rt::cuda::finish_nccl();
}

}  // namespace
}  // namespace ampc
