// Whole training plans on the GPU against the CPU backend (label gpu). models/{mlp,cnn,gpt}
// compiled for the device's CUDA target with Adam in fp32, fp16 (dynamic loss scaling) and
// bf16 run 5 steps on the same real batches on both backends (the CPU backend runs the same
// plan, its kernels JIT-compiled for the host); every step's loss and, after the last step,
// every float state must agree within the precision's tolerance, and the loss scaler's state
// exactly. The 5 steps are submitted without waiting and collected once: 5 graph launches
// and 1 host synchronisation. The skip-step: an fp16 plan whose initial scale (1e30)
// overflows leaves every parameter and moment bit for bit unchanged on the device and backs
// the scale off. An out-of-range index or label sets its step's error flag: that run's
// collect reports it, the next run is clean. Training-mode Dropout draws the CPU backend's
// masks (the mlp with a Dropout layer, fp32 and bf16, also resumed mid-run), and random noise
// (RandomNormalLike, RandomUniformLike) the CPU backend's noise. ConvTranspose,
// DepthToSpace, SpaceToDepth and ConstantOfShape train as on the CPU. The generated kernels'
// exp, erf and sigmoid (kernels/shared/float_math.h, emitted for NVPTX as for the host) give the
// CPU backend's bits. Without a device these print "skipped: no CUDA device" and skip (an unusable
// CUDA, an old driver above all, fails instead); the load-time checks that need no device are
// tests/unit/cuda_host_test.cc. tests/gpu/run.sh runs each case in its own process with
// AMPC_CUDA_SYNC_DEBUG=1.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "driver/pipeline.h"
#include "ir/graph.h"
#include "passes/loss_scaling.h"
#include "runtime/cpu/executor.h"
#include "runtime/cuda/device.h"
#include "runtime/cuda/executor.h"
#include "runtime/cuda/op_builders.h"
#include "runtime/cuda/ptx_library.h"
#include "runtime/data/batcher.h"
#include "tests/gpu/require_device.h"
#include "tests/support/layout_ops_model.h"
#include "tests/support/mlp_variants.h"
#include "tests/support/temp_dir.h"

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

#define REQUIRE_CUDA_DEVICE() AMPC_REQUIRE_CUDA_DEVICE()

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

// The training plan of the model at `path` for this device, with Adam at kLr.
plan::Plan compile_file_for_device(const std::string& path, passes::Precision precision,
                                   double init_scale = 0) {
  compiler::CompileOptions o;
  o.train = true;
  o.optimizer.kind = "adam";
  o.optimizer.lr = kLr;
  o.autocast.precision = precision;
  if (init_scale > 0) o.loss_scale.init_scale = init_scale;
  o.lowering.target = device_target();
  return compiler::compile_file(path, o);
}

plan::Plan compile(const Case& c, double init_scale = 0) {
  return compile_file_for_device(source_dir() + "/models/" + c.model + ".onnx", c.precision,
                                 init_scale);
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

// A float state on the device (g) against the CPU backend's (w) after kSteps Adam steps: Adam
// moves a parameter by at most about lr per step, whatever the gradient's error, so within
// 2 kSteps lr plus `rel` of the state's largest magnitude.
void expect_state_close(const std::string& what, const rt::Tensor& w, const rt::Tensor& g,
                        double rel) {
  double scale = 0, worst = 0;
  for (int64_t i = 0; i < w.numel(); ++i) {
    scale = std::max(scale, std::abs(value(w, i)));
    worst = std::max(worst, std::abs(value(g, i) - value(w, i)));
  }
  EXPECT_LE(worst, 2 * kSteps * kLr + rel * scale) << what;
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
  const double rel = fp32 ? 1e-3 : 2e-2;
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
    expect_state_close("state '" + name + "'", w, g, rel);
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

// The mlp variant at `path` (random draws after its first layer), fp32 and bf16: with the same
// seed both backends draw the same values every step (the run's key written with each
// submitted run's inputs, 5 runs in flight at once), so the losses agree as without the draws;
// a GPU executor resumed at step 3 (set_random_state) with the CPU's state after 3 steps gives
// the CPU's last two losses.
void expect_random_mlp_trains_like_the_cpu(const std::string& path, uint64_t seed,
                                           const std::string& what) {
  for (auto precision : {passes::Precision::kFP32, passes::Precision::kBF16}) {
    const Case c{"mlp", "digits", precision};
    const plan::Plan p = compile_file_for_device(path, precision);
    const auto data = batches(c, p);
    rt::cpu::Executor cpu(p);
    cpu.set_random_state(seed, 0);
    std::vector<float> want;
    std::map<std::string, rt::Tensor> after3;
    for (const auto& batch : data) {
      want.push_back(cpu.run(batch).at("loss").data<float>()[0]);
      if (want.size() == 3) after3 = cpu.state();
    }
    rt::cuda::Executor gpu(p, {.device = 0, .pipeline_depth = kSteps});
    gpu.set_random_state(seed, 0);
    for (const auto& batch : data) gpu.submit(batch);
    const auto outputs = gpu.collect();
    const double tol = precision == passes::Precision::kFP32 ? 1e-4 : 2e-2;
    ASSERT_EQ(outputs.size(), static_cast<size_t>(kSteps));
    for (int s = 0; s < kSteps; ++s) {
      const float got = outputs[static_cast<size_t>(s)].at("loss").data<float>()[0];
      EXPECT_NEAR(got, want[static_cast<size_t>(s)], tol * std::abs(want[static_cast<size_t>(s)]))
          << name_of(c) << " with " << what << ", loss of step " << s;
    }
    rt::cuda::Executor resumed(p);
    resumed.load_state(after3);
    resumed.set_random_state(seed, 3);
    for (int s = 3; s < kSteps; ++s) {
      const float got = resumed.run(data[static_cast<size_t>(s)]).at("loss").data<float>()[0];
      EXPECT_NEAR(got, want[static_cast<size_t>(s)], tol * std::abs(want[static_cast<size_t>(s)]))
          << name_of(c) << " with " << what << ", resumed, loss of step " << s;
    }
  }
}

// Training-mode Dropout (the mlp with a Dropout after its first layer, as torch exports
// nn.Dropout): the same masks on both backends.
TEST(CudaDropout, TrainsLikeTheCpuBackendWithTheSameMasks) {
  REQUIRE_CUDA_DEVICE();
  test::TempDir dir;
  const std::string path = dir / "mlp_dropout.onnx";
  test::write_mlp_with_dropout(source_dir() + "/models/mlp.onnx", path, 0.25f);
  expect_random_mlp_trains_like_the_cpu(path, 5, "Dropout");
}

// Random noise after the mlp's first layer (RandomNormalLike and RandomUniformLike,
// tests/support/mlp_variants.h): the device draws the CPU backend's noise (the normal draws to
// the last place of the output type).
TEST(CudaRandomNoise, TrainsLikeTheCpuBackendWithTheSameNoise) {
  REQUIRE_CUDA_DEVICE();
  test::TempDir dir;
  const std::string path = dir / "mlp_noise.onnx";
  test::write_mlp_with_noise(source_dir() + "/models/mlp.onnx", path);
  expect_random_mlp_trains_like_the_cpu(path, 7, "noise");
}

// ConvTranspose (cuDNN's backward data pass, with bias, group 2 and output padding),
// DepthToSpace (CRD), SpaceToDepth and ConstantOfShape, and their gradients
// (tests/support/layout_ops_model.h), fp32 and bf16: the device's losses and parameters after
// kSteps Adam steps are the CPU backend's within the precision's tolerance.
TEST(CudaLayoutOps, TrainLikeTheCpuBackend) {
  REQUIRE_CUDA_DEVICE();
  test::TempDir dir;
  const std::string path = dir / "layout_ops.onnx";
  test::write_layout_ops_model(path);
  rt::Tensor x(DType::kFloat32, {2, 4, 5, 5});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::cos(0.37f * i);
  for (auto precision : {passes::Precision::kFP32, passes::Precision::kBF16}) {
    const plan::Plan p = compile_file_for_device(path, precision);
    rt::cpu::Executor cpu(p);
    rt::cuda::Executor gpu(p, {.device = 0, .pipeline_depth = kSteps});
    std::vector<float> want;
    for (int s = 0; s < kSteps; ++s) {
      want.push_back(cpu.run({{"x", x}}).at("loss").data<float>()[0]);
      gpu.submit({{"x", x}});
    }
    const auto outputs = gpu.collect();
    const bool fp32 = precision == passes::Precision::kFP32;
    const double tol = fp32 ? 1e-4 : 2e-2;
    const std::string name = std::string(passes::precision_name(precision));
    ASSERT_EQ(outputs.size(), static_cast<size_t>(kSteps));
    for (int s = 0; s < kSteps; ++s) {
      const float got = outputs[static_cast<size_t>(s)].at("loss").data<float>()[0];
      EXPECT_NEAR(got, want[static_cast<size_t>(s)], tol * std::abs(want[static_cast<size_t>(s)]))
          << name << ", loss of step " << s;
    }
    const auto cpu_state = cpu.state();
    const auto gpu_state = gpu.state();
    for (const auto& [state, w] : cpu_state) {
      const rt::Tensor& g = gpu_state.at(state);
      ASSERT_EQ(g.shape(), w.shape()) << state;
      if (is_float(w.dtype())) expect_state_close(name + " " + state, w, g, fp32 ? 1e-3 : 2e-2);
    }
  }
}

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

// Exp, Erf and Sigmoid in fp32 and (through a Cast) fp16 as generated kernels: the PTX runs
// float_math.h's operations, so every finite or infinite input gives the CPU backend's bits
// (a NaN stays a NaN; its payload may differ, the GPU's arithmetic making the canonical one).
TEST(CudaFusedKernels, ExpErfSigmoidGiveTheCpuBits) {
  REQUIRE_CUDA_DEVICE();
  constexpr int64_t kN = 1 << 16;
  ir::Model model;
  model.opsets.push_back({"", 17});
  model.graph->name = "transcendentals";
  ir::Graph& g = *model.graph;
  ir::Value* x = g.add_value("x", {DType::kFloat32, std::vector<int64_t>{kN}});
  g.inputs.push_back(x);
  ir::Value* x16 = g.add_value("x16", {DType::kFloat16, std::vector<int64_t>{kN}});
  g.add_node("Cast", {x}, {x16}, "to_f16")
      ->attributes.push_back(ir::Attribute::make_int("to", static_cast<int64_t>(DType::kFloat16)));
  for (const char* op : {"Exp", "Erf", "Sigmoid"}) {
    for (ir::Value* in : {x, x16}) {
      const std::string name = std::string(op) + (in == x ? "_f32" : "_f16");
      ir::Value* y = g.add_value(name, {in->type.dtype, std::vector<int64_t>{kN}});
      g.add_node(op, {in}, {y}, name);
      g.outputs.push_back(y);
    }
  }
  compiler::CompileOptions o;
  o.lowering.target = device_target();
  const plan::Plan p = compiler::compile_model(model, o, "transcendentals");

  rt::Tensor input(DType::kFloat32, {kN});
  float* v = input.data<float>();
  for (int64_t i = 0; i < kN; ++i) v[i] = -120.0f + 240.0f * static_cast<float>(i) / kN;
  const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, 1e-40f, -1e-40f, 88.72f, -103.9f};
  for (size_t i = 0; i < std::size(specials); ++i) v[i] = specials[i];
  v[kN - 1] = NAN;
  for (int64_t i = 1; i < 4096; ++i)
    v[kN - 1 - i] = std::ldexp(1.0f, static_cast<int>(i % 250) - 125);

  const auto want = rt::cpu::Executor(p).run({{"x", input}});
  const auto got = rt::cuda::Executor(p).run({{"x", input}});
  for (const auto& [name, w] : want) {
    const rt::Tensor& t = got.at(name);
    ASSERT_EQ(t.dtype(), w.dtype()) << name;
    int differ = 0;
    for (int64_t i = 0; i < kN; ++i) {
      const double a = value(w, i), b = value(t, i);
      if (std::isnan(a) || std::isnan(b)) {
        EXPECT_TRUE(std::isnan(a) && std::isnan(b)) << name << " at x = " << v[i];
        continue;
      }
      const size_t width = dtype_size(w.dtype());
      if (std::memcmp(static_cast<const char*>(w.raw()) + i * width,
                      static_cast<const char*>(t.raw()) + i * width, width) != 0 &&
          differ++ < 5) {
        ADD_FAILURE() << name << "(" << v[i] << "): cpu " << a << ", gpu " << b;
      }
    }
    EXPECT_EQ(differ, 0) << name << ": elements that differ in their bits";
  }
}

// The versions this process loaded (driver, runtime, cuBLASLt, cuDNN), for the log: run.sh
// runs this case first.
TEST(CudaDevice, Versions) {
  REQUIRE_CUDA_DEVICE();
  const rt::cuda::DeviceInfo d = rt::cuda::open_device(0);
  std::cout << "[cuda] " << d.name << " sm_" << d.arch() << ", " << d.sm_count << " SMs, "
            << (d.total_memory >> 30) << " GiB; " << rt::cuda::runtime_versions() << std::endl;
}

// An out-of-range index (Gather of a token id) or label (the loss's target) sets its step's
// flag: the run's collect says so, the executor has no run pending afterwards, and the next
// run, whose flags the memset node cleared, is clean.
TEST(CudaErrorFlags, OutOfRangeIsReportedOnceAndTheNextRunIsClean) {
  REQUIRE_CUDA_DEVICE();
  const Case c{"gpt", "seqtask", passes::Precision::kFP32};
  const plan::Plan p = compile(c);
  const auto data = batches(c, p);
  rt::cuda::Executor gpu(p);
  EXPECT_NO_THROW(gpu.run(data[0]));
  int corrupted = 0;
  for (const auto& [name, t] : data[0]) {
    if (t.dtype() != DType::kInt64 && t.dtype() != DType::kInt32) continue;
    auto bad = data[0];
    rt::Tensor& x = bad.at(name);
    if (x.dtype() == DType::kInt64) x.data<int64_t>()[0] = int64_t{1} << 40;
    if (x.dtype() == DType::kInt32) x.data<int32_t>()[0] = 1 << 30;
    ++corrupted;
    try {
      gpu.run(bad);
      ADD_FAILURE() << "an out-of-range value in input '" << name << "' was not reported";
    } catch (const Error& e) {
      std::cout << "[cuda] input '" << name << "' out of range: " << e.what() << "\n";
      EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(gpu.collect().empty()) << "runs left pending after the error";
    EXPECT_NO_THROW(gpu.run(data[1])) << "the flag of input '" << name << "' stayed set";
  }
  EXPECT_GT(corrupted, 0);
}

}  // namespace
}  // namespace ampc
