// Whole training plans on the GPU against the CPU backend (label gpu). models/{mlp,cnn,gpt}
// compiled for the device's CUDA target with Adam in fp32, fp16 (dynamic loss scaling) and
// bf16 run 5 steps on the same real batches on both backends (the CPU backend runs the same
// plan, its kernels JIT-compiled for the host); every step's loss and, after the last step,
// every float state must agree within the precision's tolerance, and the loss scaler's state
// exactly. The 5 steps are submitted without waiting and collected once: 5 graph launches
// and 1 host synchronisation. The skip-step: an fp16 plan whose initial scale (1e30)
// overflows leaves every parameter and moment bit for bit unchanged on the device and backs
// the scale off. Without a device those print "skipped: no CUDA device" and skip; what needs
// no device runs everywhere: every step of the example plans has a builder that accepts it
// (those of the hand-written kernels' ops), the PTX choice, the clean "no CUDA device" error.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <string>

#include "compiler/pipeline.h"
#include "passes/loss_scaling.h"
#include "runtime/cpu/executor.h"
#include "runtime/cuda/device.h"
#include "runtime/cuda/executor.h"
#include "runtime/cuda/op_builders.h"
#include "runtime/cuda/ptx_library.h"
#include "runtime/data/batcher.h"

namespace ampc {
namespace {

// The checkout: AMPC_SOURCE_DIR from the environment when set (tests/gpu/run.sh sets it when
// it runs executables built elsewhere, tests/gpu/bundle.sh), else where the test was built.
std::string source_dir() {
  const char* env = std::getenv("AMPC_SOURCE_DIR");
  return env && *env ? env : AMPC_SOURCE_DIR;
}

constexpr int kSteps = 5;
constexpr double kLr = 1e-3;

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

#define REQUIRE_CUDA_DEVICE()                              \
  do {                                                     \
    if (device_count() == 0) {                             \
      std::cout << "skipped: no CUDA device" << std::endl; \
      GTEST_SKIP() << "no CUDA device";                    \
    }                                                      \
  } while (0)

struct Case {
  std::string model;
  std::string data;
  passes::Precision precision;
};

std::string name_of(const Case& c) {
  return c.model + "_" + std::string(passes::precision_name(c.precision));
}
std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return name_of(info.param);
}
void PrintTo(const Case& c, std::ostream* os) {
  *os << name_of(c);
}

std::string device_target() {
  const rt::cuda::DeviceInfo d = rt::cuda::open_device(0);
  return d.arch() >= 90 ? "cuda:sm_90" : "cuda:sm_80";
}

plan::Plan compile(const Case& c, double init_scale = 0) {
  compiler::CompileOptions o;
  o.train = true;
  o.optimizer.kind = "adam";
  o.optimizer.lr = kLr;
  o.autocast.precision = c.precision;
  if (init_scale > 0) o.loss_scale.init_scale = init_scale;
  o.lowering.target = device_target();
  return compiler::compile_file(source_dir() + "/models/" + c.model + ".onnx", o);
}

// The first kSteps batches of the model's data set, in file order.
std::vector<std::map<std::string, rt::Tensor>> batches(const Case& c, const plan::Plan& p) {
  std::map<std::string, rt::data::InputSpec> specs;
  int64_t batch = 0;
  for (const auto& binding : p.inputs()) {
    const auto& b = p.buffers(binding.buffer());
    specs[binding.name()] = {static_cast<DType>(b.dtype()),
                             {b.shape().begin() + 1, b.shape().end()}};
    batch = b.shape(0);
  }
  rt::data::Batcher batcher(
      rt::data::Dataset::open(source_dir() + "/models/data/" + c.data + ".npz"), specs,
      {.batch_size = batch});
  std::vector<std::map<std::string, rt::Tensor>> out;
  for (int s = 0; s < kSteps; ++s) out.push_back(batcher.next());
  return out;
}

double value(const rt::Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat32:
      return t.data<float>()[i];
    case DType::kFloat64:
      return t.data<double>()[i];
    case DType::kFloat16:
      return half_to_float(t.data<Half>()[i]);
    case DType::kBFloat16:
      return bf16_to_float(t.data<BFloat16>()[i]);
    default:
      return 0;
  }
}

bool same_bits(const rt::Tensor& a, const rt::Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

class CudaPlan : public ::testing::TestWithParam<Case> {};

TEST_P(CudaPlan, TrainsLikeTheCpuBackend) {
  REQUIRE_CUDA_DEVICE();
  const Case& c = GetParam();
  const plan::Plan p = compile(c);
  const auto data = batches(c, p);

  rt::cpu::Executor cpu(p);
  std::vector<float> want;
  for (const auto& batch : data) want.push_back(cpu.run(batch).at("loss").data<float>()[0]);

  rt::cuda::Executor gpu(p, {.device = 0, .pipeline_depth = kSteps});
  for (const auto& batch : data) gpu.submit(batch);
  EXPECT_EQ(gpu.counters().host_syncs, 0) << "submitting steps waited for the device";
  const auto outputs = gpu.collect();
  EXPECT_EQ(gpu.counters().graph_launches, kSteps);
  EXPECT_EQ(gpu.counters().host_syncs, 1);
  std::cout << "[cuda] " << name_of(c) << ": " << gpu.launching_steps() << " launching steps, "
            << gpu.graph_nodes() << " graph nodes, " << (gpu.device_bytes() >> 20)
            << " MiB; per step 1 graph launch, 0 host synchronisations\n";

  const bool fp32 = c.precision == passes::Precision::kFP32;
  const double loss_tol = fp32 ? 1e-4 : 2e-2;
  ASSERT_EQ(outputs.size(), static_cast<size_t>(kSteps));
  for (int s = 0; s < kSteps; ++s) {
    const float got = outputs[static_cast<size_t>(s)].at("loss").data<float>()[0];
    EXPECT_NEAR(got, want[static_cast<size_t>(s)],
                loss_tol * std::abs(want[static_cast<size_t>(s)]) + 1e-6)
        << "loss of step " << s;
  }
  const auto cpu_state = cpu.state();
  const auto gpu_state = gpu.state();
  ASSERT_EQ(cpu_state.size(), gpu_state.size());
  // Adam moves a parameter by at most about lr per step, whatever the gradient's error.
  const double rel = fp32 ? 1e-3 : 2e-2, abs_tol = 2 * kSteps * kLr;
  for (const auto& [name, w] : cpu_state) {
    const rt::Tensor& g = gpu_state.at(name);
    ASSERT_EQ(g.dtype(), w.dtype()) << name;
    ASSERT_EQ(g.shape(), w.shape()) << name;
    if (!is_float(w.dtype())) {
      EXPECT_TRUE(same_bits(g, w)) << "state '" << name << "' differs";
      continue;
    }
    if (name == passes::kScaleName) {
      EXPECT_TRUE(same_bits(g, w)) << "the loss scale differs";
      continue;
    }
    double scale = 0, worst = 0;
    for (int64_t i = 0; i < w.numel(); ++i) {
      scale = std::max(scale, std::abs(value(w, i)));
      worst = std::max(worst, std::abs(value(g, i) - value(w, i)));
    }
    EXPECT_LE(worst, abs_tol + rel * scale) << "state '" << name << "'";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CudaPlan,
                         ::testing::Values(Case{"mlp", "digits", passes::Precision::kFP32},
                                           Case{"mlp", "digits", passes::Precision::kFP16},
                                           Case{"mlp", "digits", passes::Precision::kBF16},
                                           Case{"cnn", "digits_images", passes::Precision::kFP32},
                                           Case{"cnn", "digits_images", passes::Precision::kFP16},
                                           Case{"cnn", "digits_images", passes::Precision::kBF16},
                                           Case{"gpt", "seqtask", passes::Precision::kFP32},
                                           Case{"gpt", "seqtask", passes::Precision::kFP16},
                                           Case{"gpt", "seqtask", passes::Precision::kBF16}),
                         case_name);

// A scale of 1e30 overflows fp16 gradients: the step is skipped on the device, leaving the
// parameters and Adam's moments bit for bit as they were, and the scale backs off.
TEST(CudaSkipStep, OverflowLeavesParametersUnchanged) {
  REQUIRE_CUDA_DEVICE();
  const Case c{"mlp", "digits", passes::Precision::kFP16};
  const plan::Plan p = compile(c, 1e30);
  const auto data = batches(c, p);
  rt::cuda::Executor gpu(p);
  const auto before = gpu.state();
  gpu.run(data[0]);
  const auto after = gpu.state();
  int params = 0;
  for (const auto& [name, t] : before) {
    if (name == passes::kScaleName || name.find("amp.") == 0) continue;
    ++params;
    EXPECT_TRUE(same_bits(after.at(name), t)) << "'" << name << "' changed in a skipped step";
  }
  EXPECT_GT(params, 0);
  const float scale = after.at(passes::kScaleName).data<float>()[0];
  EXPECT_EQ(scale, 0.5e30f) << "the scale did not back off";
  // The CPU backend skips the same step.
  rt::cpu::Executor cpu(p);
  cpu.run(data[0]);
  EXPECT_TRUE(same_bits(cpu.state().at(passes::kScaleName), after.at(passes::kScaleName)));
}

// Without a device: every step of the example plans has a CUDA builder, the memory plan fits
// the device layout, and every builder that needs no library handle or generated kernel (the
// hand-written kernels' ops, views) accepts its step: attributes, element types, shapes and
// constant inputs as the compiler emits them.
plan::Plan compile_for(const Case& c, const std::string& target) {
  compiler::CompileOptions o;
  o.train = true;
  o.optimizer.kind = "adam";
  o.autocast.precision = c.precision;
  o.lowering.target = target;
  return compiler::compile_file(source_dir() + "/models/" + c.model + ".onnx", o);
}

class CudaPlanLoad : public ::testing::TestWithParam<Case> {};

TEST_P(CudaPlanLoad, EveryStepHasABuilder) {
  const plan::Plan p = compile_for(GetParam(), "cuda:sm_90");
  EXPECT_TRUE(rt::cuda::missing_cuda_ops(p).empty());
  rt::cuda::DeviceMemory memory(p);  // checks the layout, allocates nothing
  const rt::cuda::Handles handles;
  const rt::cuda::DeviceInfo device;
  int built = 0;
  for (int i = 0; i < p.steps_size(); ++i) {
    const auto& s = p.steps(i);
    if (s.op() == "FusedElementwise" || s.op() == "MatMul" || s.op() == "Gemm" ||
        s.op() == "Conv" || s.op() == "ConvGrad")
      continue;  // these need the device (kernels, cuBLASLt, cuDNN)
    rt::cuda::StepContext ctx(p, i, memory, handles, device);
    EXPECT_NO_THROW(rt::cuda::find_builder(s.domain(), s.op())(ctx)) << s.op();
    ++built;
  }
  EXPECT_GT(built, 0);
  for (const auto& k : p.kernels()) EXPECT_NE(rt::cuda::pick_code(k, 90), nullptr) << k.name();
}

INSTANTIATE_TEST_SUITE_P(Models, CudaPlanLoad,
                         ::testing::Values(Case{"mlp", "digits", passes::Precision::kFP16},
                                           Case{"cnn", "digits_images", passes::Precision::kFP32},
                                           Case{"cnn", "digits_images", passes::Precision::kFP16},
                                           Case{"gpt", "seqtask", passes::Precision::kFP32},
                                           Case{"gpt", "seqtask", passes::Precision::kBF16}),
                         case_name);

// A plan the device cannot hold statically is refused with the reason.
TEST(CudaPlanLoad, RefusesPlansWithoutAStaticMemoryPlan) {
  const Case c{"mlp", "digits", passes::Precision::kFP32};
  plan::Plan no_memory = compile_for(c, "cuda:sm_90");
  no_memory.clear_memory();
  try {
    rt::cuda::DeviceMemory memory(no_memory);
    FAIL() << "a plan without a memory plan was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no static memory plan"), std::string::npos) << e.what();
  }
  plan::Plan dynamic = compile_for(c, "cuda:sm_90");
  plan::Buffer& b = *dynamic.mutable_buffers(dynamic.steps(0).outputs(0));
  b.set_shape_known(false);
  try {
    rt::cuda::DeviceMemory memory(dynamic);
    FAIL() << "a data-dependent shape was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'" + b.name() + "' has a data-dependent shape"),
              std::string::npos)
        << e.what();
  }
}

// The plan's PTX is chosen for the device: the highest target not above it.
TEST(CudaPtx, PicksTheBestTargetForTheDevice) {
  kernels::KernelDef def;
  auto* a = def.add_code();
  a->set_target("sm_80");
  a->set_ptx("// sm_80");
  auto* b = def.add_code();
  b->set_target("sm_90");
  b->set_ptx("// sm_90");
  EXPECT_EQ(rt::cuda::pick_code(def, 90), b);
  EXPECT_EQ(rt::cuda::pick_code(def, 100), b);
  EXPECT_EQ(rt::cuda::pick_code(def, 86), a);
  EXPECT_EQ(rt::cuda::pick_code(def, 80), a);
  EXPECT_EQ(rt::cuda::pick_code(def, 75), nullptr);
}

// Without a GPU (or driver) the executor refuses cleanly, before touching the plan.
TEST(CudaDevice, NoDeviceIsACleanError) {
  if (device_count() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  try {
    rt::cuda::open_device(0);
    FAIL() << "open_device succeeded without a device";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("use --device cpu"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ampc
