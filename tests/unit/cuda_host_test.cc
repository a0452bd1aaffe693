// The CUDA backend's load-time and host-side logic, run here without a device (label unit;
// built where nvcc is found). What needs a GPU is in tests/gpu (tests/gpu/run.sh).
//  - every step of every example plan (mlp, cnn, gpt x fp32, fp16, bf16) has a CUDA builder,
//    the memory plan fits the device layout, the builders of the hand-written kernels' ops
//    accept their steps, and the library steps (MatMul / Gemm epilogues, Conv / ampc.Conv /
//    ConvGrad) pass the checks their builders make before calling cuBLASLt or cuDNN;
//  - the GEMM epilogue rule: lower/gemm_epilogue.cc folds BGRADB only where the backend
//    accepts it (runtime/plan/gemm_rules.h);
//  - the device status: only "no GPU" or "no driver" skips, an old driver is an error;
//  - the error flags: cleared at the start of each run, the pending runs emptied before an
//    error is reported, exercised with the CPU twins of Gather and the cross-entropy kernel;
//  - cuDNN's algorithm choice (no TF32 for fp32), the cuDNN handle only for convolutions,
//    the sync-debug switch and the step names it reports;
//  - the PTX choice and the refusal of plans without a static memory plan;
//  - a training-mode Dropout, RandomNormalLike and RandomUniformLike: their steps build and
//    reserve the run's random key;
//  - ConvTranspose, DepthToSpace, SpaceToDepth and ConstantOfShape build, and a ConvTranspose
//    padding cuDNN cannot express is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "driver/pipeline.h"
#include "kernels/twin/cross_entropy.h"
#include "kernels/twin/gather_scatter.h"
#include "lower/gemm_epilogue.h"
#include "ops/op_info.h"
#include "passes/autodiff/grad_builder.h"
#include "runtime/cpu/executor.h"
#include "runtime/cuda/cudnn_algo.h"
#include "runtime/cuda/device.h"
#include "runtime/cuda/error_flags.h"
#include "runtime/cuda/executor.h"
#include "runtime/cuda/op_builders.h"
#include "runtime/cuda/ptx_library.h"
#include "runtime/plan/gemm_rules.h"
#include "tests/support/layout_ops_model.h"
#include "tests/support/mlp_variants.h"
#include "tests/support/temp_dir.h"

namespace ampc {
namespace {

std::string source_dir() {
  const char* env = std::getenv("AMPC_SOURCE_DIR");
  return env && *env ? env : AMPC_SOURCE_DIR;
}

struct Case {
  std::string model;
  passes::Precision precision;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return info.param.model + "_" + std::string(passes::precision_name(info.param.precision));
}

// The Adam training plan of the model at `path`.
plan::Plan compile_path(const std::string& path, passes::Precision precision,
                        const std::string& target = "cuda:sm_90") {
  compiler::CompileOptions o;
  o.train = true;
  o.optimizer.kind = "adam";
  o.autocast.precision = precision;
  o.lowering.target = target;
  return compiler::compile_file(path, o);
}

plan::Plan compile_for(const Case& c, const std::string& target = "cuda:sm_90") {
  return compile_path(source_dir() + "/models/" + c.model + ".onnx", c.precision, target);
}

// ------------------------------------------------------------------ every plan's steps

class CudaPlanLoad : public ::testing::TestWithParam<Case> {};

TEST_P(CudaPlanLoad, EveryStepHasABuilderThatAcceptsIt) {
  const plan::Plan p = compile_for(GetParam());
  const std::vector<std::string> missing = rt::cuda::missing_cuda_ops(p);
  EXPECT_TRUE(missing.empty()) << "no CUDA builder for " << missing.size()
                               << " step(s), first: " << (missing.empty() ? "" : missing[0]);
  rt::cuda::DeviceMemory memory(p);  // checks the layout, allocates nothing
  const rt::cuda::Handles handles;
  const rt::cuda::DeviceInfo device;
  int built = 0, library = 0;
  for (int i = 0; i < p.steps_size(); ++i) {
    const auto& s = p.steps(i);
    rt::cuda::StepContext ctx(p, i, memory, handles, device);
    if (rt::cuda::is_library_step(s)) {
      // cuBLASLt / cuDNN are not called; what their builders check first is.
      EXPECT_NO_THROW(rt::cuda::check_library_step(ctx)) << rt::cuda::describe_step(p, i);
      ++library;
      continue;
    }
    if (s.op() == "FusedElementwise") continue;  // needs the loaded PTX
    const rt::cuda::Builder b = rt::cuda::find_builder(s.domain(), s.op());
    if (!b) continue;  // reported as missing above
    EXPECT_NO_THROW(b(ctx)) << rt::cuda::describe_step(p, i);
    ++built;
  }
  EXPECT_GT(built, 0);
  EXPECT_GT(library, 0);
  // The builders read typed parameters only (legalize): no step they build keeps an ONNX
  // attribute, but the views, whose shapes are their buffers'.
  for (int i = 0; i < p.steps_size(); ++i) {
    const auto& s = p.steps(i);
    if (ops::op_info(s.domain(), s.op()).is_view()) continue;
    EXPECT_EQ(s.attributes_size(), 0) << rt::cuda::describe_step(p, i);
  }
  for (const auto& k : p.kernels()) EXPECT_NE(rt::cuda::pick_code(k, 90), nullptr) << k.name();
  // autocast writes a bf16 Conv as ampc.Conv, which must be among the steps built above.
  int ampc_conv = 0;
  for (const auto& s : p.steps()) ampc_conv += s.domain() == "ampc" && s.op() == "Conv";
  const Case& c = GetParam();
  EXPECT_EQ(ampc_conv > 0, c.model == "cnn" && c.precision == passes::Precision::kBF16);
  // The cuDNN handle only for plans with convolutions.
  EXPECT_EQ(rt::cuda::plan_needs_cudnn(p), GetParam().model == "cnn");
}

INSTANTIATE_TEST_SUITE_P(
    Models, CudaPlanLoad,
    ::testing::Values(Case{"mlp", passes::Precision::kFP32}, Case{"mlp", passes::Precision::kFP16},
                      Case{"mlp", passes::Precision::kBF16}, Case{"cnn", passes::Precision::kFP32},
                      Case{"cnn", passes::Precision::kFP16}, Case{"cnn", passes::Precision::kBF16},
                      Case{"gpt", passes::Precision::kFP32}, Case{"gpt", passes::Precision::kFP16},
                      Case{"gpt", passes::Precision::kBF16}),
    case_name);

// A plan with random draws (Dropout, random noise) on the CPU backend, the device tests'
// reference: it trains with new draws each step, and resumed at step 2 with the state after two
// steps it gives the uninterrupted run's third loss bit for bit.
void expect_cpu_draws_per_run_and_resumes(const plan::Plan& p, const std::string& draws) {
  rt::Tensor x(DType::kFloat32, {32, 64}), y(DType::kInt64, {32});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::sin(0.1f * i);
  for (int64_t i = 0; i < 32; ++i) y.data<int64_t>()[i] = i % 10;
  rt::cpu::Executor cpu(p);
  cpu.set_random_state(5, 0);
  std::vector<float> losses;
  std::map<std::string, rt::Tensor> after2;
  for (int s = 0; s < 3; ++s) {
    losses.push_back(cpu.run({{"x", x}, {"y", y}}).at("loss").data<float>()[0]);
    if (s == 1) after2 = cpu.state();
  }
  EXPECT_TRUE(std::isfinite(losses[2]));
  rt::cpu::Executor resumed(p);
  resumed.load_state(after2);
  resumed.set_random_state(5, 2);
  EXPECT_EQ(resumed.run({{"x", x}, {"y", y}}).at("loss").data<float>()[0], losses[2]);
  rt::cpu::Executor unresumed(p);
  unresumed.load_state(after2);
  EXPECT_NE(unresumed.run({{"x", x}, {"y", y}}).at("loss").data<float>()[0], losses[2])
      << draws << " did not depend on the run";
}

// Training-mode Dropout (the mlp with a Dropout after its first layer, as torch exports
// nn.Dropout): every step has a builder, the Dropout step (typed parameters, no attributes)
// builds, and it reserves the run's key, one 8-byte word after the plan's inputs, which the
// executor writes with every run's inputs.
TEST(CudaDropoutLoad, TrainingDropoutBuildsAndReadsTheRunKey) {
  test::TempDir dir;
  const std::string path = dir / "mlp_dropout.onnx";
  test::write_mlp_with_dropout(source_dir() + "/models/mlp.onnx", path, 0.25f);
  for (auto precision : {passes::Precision::kFP32, passes::Precision::kBF16}) {
    const plan::Plan p = compile_path(path, precision);
    EXPECT_TRUE(rt::cuda::missing_cuda_ops(p).empty());
    rt::cuda::DeviceMemory memory(p);
    const int64_t inputs = memory.input_bytes();
    EXPECT_FALSE(memory.has_run_key());
    const rt::cuda::Handles handles;
    const rt::cuda::DeviceInfo device;
    int dropouts = 0;
    for (int i = 0; i < p.steps_size(); ++i) {
      const auto& s = p.steps(i);
      if (s.op() != "Dropout") continue;
      EXPECT_TRUE(s.has_dropout());
      EXPECT_EQ(s.attributes_size(), 0);
      rt::cuda::StepContext ctx(p, i, memory, handles, device);
      EXPECT_NO_THROW(rt::cuda::find_builder(s.domain(), s.op())(ctx))
          << rt::cuda::describe_step(p, i);
      ++dropouts;
    }
    EXPECT_EQ(dropouts, 1);
    ASSERT_TRUE(memory.has_run_key());
    EXPECT_EQ(memory.run_key_offset(), (inputs + 7) / 8 * 8);
    EXPECT_EQ(memory.input_bytes(), memory.run_key_offset() + 8);
    // The CPU side of tests/gpu/cuda_plan_test.cc's CudaDropout.
    expect_cpu_draws_per_run_and_resumes(p, "the mask");
  }
}

// Random noise (the mlp with h + RandomNormalLike(h) * RandomUniformLike(h) after its first
// layer, tests/support/mlp_variants.h): nothing is refused for the device, both random steps
// build and reserve the run's key (one word, shared with any Dropout), and the CPU backend,
// the device test's reference, draws new noise each run and resumes bit for bit.
TEST(CudaRandomLoad, NoiseOpsBuildAndReadTheRunKey) {
  test::TempDir dir;
  const std::string path = dir / "mlp_noise.onnx";
  test::write_mlp_with_noise(source_dir() + "/models/mlp.onnx", path);
  for (auto precision : {passes::Precision::kFP32, passes::Precision::kBF16}) {
    const plan::Plan p = compile_path(path, precision);
    EXPECT_TRUE(rt::cuda::missing_cuda_ops(p).empty());
    rt::cuda::DeviceMemory memory(p);
    const int64_t inputs = memory.input_bytes();
    const rt::cuda::Handles handles;
    const rt::cuda::DeviceInfo device;
    std::vector<std::string> built;
    for (int i = 0; i < p.steps_size(); ++i) {
      const auto& s = p.steps(i);
      if (s.op().rfind("Random", 0) != 0) continue;
      rt::cuda::StepContext ctx(p, i, memory, handles, device);
      EXPECT_NO_THROW(rt::cuda::find_builder(s.domain(), s.op())(ctx))
          << rt::cuda::describe_step(p, i);
      built.push_back(s.op());
    }
    std::sort(built.begin(), built.end());
    EXPECT_EQ(built, (std::vector<std::string>{"RandomNormalLike", "RandomUniformLike"}));
    ASSERT_TRUE(memory.has_run_key());
    EXPECT_EQ(memory.input_bytes(), (inputs + 7) / 8 * 8 + 8);
    expect_cpu_draws_per_run_and_resumes(p, "the noise");
  }
}

// ConvTranspose (cuDNN's backward data pass; in bf16 its ampc form), DepthToSpace, SpaceToDepth
// and ConstantOfShape (tests/support/layout_ops_model.h), fp32 and bf16: every step builds or
// passes its library check, with typed parameters and no attributes, and nothing would be
// refused at load (the gradient's convolution has an end pad no window reaches, which
// symmetric padding stands for).
// A ConvTranspose padding that cuDNN's symmetric padding cannot express is refused, naming it.
TEST(CudaLayoutOpsLoad, ConvTransposeBlockMovesAndFillBuild) {
  test::TempDir dir;
  const std::string path = dir / "layout_ops.onnx";
  test::write_layout_ops_model(path);
  for (auto precision : {passes::Precision::kFP32, passes::Precision::kBF16}) {
    const plan::Plan p = compile_path(path, precision);
    EXPECT_TRUE(rt::cuda::missing_cuda_ops(p).empty());
    const auto refusals = rt::cuda::cuda_load_refusals(p);
    EXPECT_TRUE(refusals.empty()) << refusals.front();
    EXPECT_TRUE(rt::cuda::plan_needs_cudnn(p));
    rt::cuda::DeviceMemory memory(p);
    const rt::cuda::Handles handles;
    const rt::cuda::DeviceInfo device;
    std::map<std::string, int> seen;
    for (int i = 0; i < p.steps_size(); ++i) {
      const auto& s = p.steps(i);
      if (s.op() != "ConvTranspose" && s.op() != "DepthToSpace" && s.op() != "SpaceToDepth" &&
          s.op() != "ConstantOfShape")
        continue;
      ++seen[s.op()];
      EXPECT_EQ(s.attributes_size(), 0) << rt::cuda::describe_step(p, i);
      // A bf16 plan's ConvTranspose is ampc.ConvTranspose (ONNX's has no bf16).
      const bool ampc_form = s.op() == "ConvTranspose" && precision == passes::Precision::kBF16;
      EXPECT_EQ(s.domain(), ampc_form ? "ampc" : "") << rt::cuda::describe_step(p, i);
      rt::cuda::StepContext ctx(p, i, memory, handles, device);
      if (rt::cuda::is_library_step(s)) {
        EXPECT_NO_THROW(rt::cuda::check_library_step(ctx)) << rt::cuda::describe_step(p, i);
      } else {
        EXPECT_NO_THROW(rt::cuda::find_builder(s.domain(), s.op())(ctx))
            << rt::cuda::describe_step(p, i);
      }
    }
    EXPECT_EQ(seen, (std::map<std::string, int>{{"ConstantOfShape", 1},
                                                {"ConvTranspose", 1},
                                                {"DepthToSpace", 1},
                                                {"SpaceToDepth", 1}}));
  }
  const std::string asymmetric = dir / "layout_ops_asymmetric.onnx";
  test::write_layout_ops_model(asymmetric, true);
  const auto refusals =
      rt::cuda::cuda_load_refusals(compile_path(asymmetric, passes::Precision::kFP32));
  // The forward step, and the gradient's convolution with the same padding.
  ASSERT_EQ(refusals.size(), 2u);
  EXPECT_NE(refusals[0].find("ConvTranspose"), std::string::npos) << refusals[0];
  EXPECT_NE(refusals[0].find("not the symmetric padding cuDNN"), std::string::npos) << refusals[0];
}

// A plan the device cannot hold statically is refused with the reason.
TEST(CudaPlanLoadErrors, RefusesPlansWithoutAStaticMemoryPlan) {
  const Case c{"mlp", passes::Precision::kFP32};
  plan::Plan no_memory = compile_for(c);
  no_memory.clear_memory();
  try {
    rt::cuda::DeviceMemory memory(no_memory);
    FAIL() << "a plan without a memory plan was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no static memory plan"), std::string::npos) << e.what();
  }
  plan::Plan dynamic = compile_for(c);
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

// ------------------------------------------------------------------ GEMM epilogues

// fp16 graphs (a bias Add is not folded in 16 bits, so the GEMM stays plain) with a sum of a
// GEMM's B operand over its rows: folded as BGRADB on a MatMul, not next to a Gemm's C (which
// the backend could not run with it).
TEST(CudaGemmEpilogue, PassFoldsBiasGradOnlyWhereTheBackendAcceptsIt) {
  using Dims = std::vector<int64_t>;
  for (bool with_c : {false, true}) {
    ir::Model m;
    m.opsets = {{"", 17}};
    ir::Graph& g = *m.graph;
    const ir::TensorType a_t{DType::kFloat16, Dims{4, 3}}, b_t{DType::kFloat16, Dims{3, 5}};
    ir::Value* a = g.add_value("a", a_t);
    ir::Value* b = g.add_value("b", b_t);
    ir::Value* c = g.add_value("c", {DType::kFloat16, Dims{5}});
    g.inputs = {a, b, c};
    passes::autodiff::GradBuilder gb(g, "t");
    ir::Value* y = with_c ? gb.op("Gemm", {a, b, c}, {DType::kFloat16, Dims{4, 5}})
                          : gb.op("MatMul", {a, b}, {DType::kFloat16, Dims{4, 5}});
    ir::Value* axes = gb.ints({0});
    ir::Value* db = gb.op("ReduceSum", {b, axes}, {DType::kFloat16, Dims{5}},
                          passes::autodiff::attrs(ir::Attribute::make_int("keepdims", 0)));
    g.outputs = {y, db};
    const auto folds = lower::find_gemm_folds(m);
    const bool bgradb = !folds.empty() && folds[0].epilogue == plan::GemmParams::BGRADB;
    EXPECT_EQ(bgradb, !with_c) << (with_c ? "Gemm with C" : "MatMul");
  }
  // The rule itself: B's own type, a matrix, not transposed, no C.
  EXPECT_TRUE(plan::bias_grad_b_foldable(DType::kFloat16, DType::kFloat16, 2, false, false));
  EXPECT_FALSE(plan::bias_grad_b_foldable(DType::kFloat16, DType::kFloat32, 2, false, false));
  EXPECT_FALSE(plan::bias_grad_b_foldable(DType::kBFloat16, DType::kFloat32, 2, false, false));
  EXPECT_FALSE(plan::bias_grad_b_foldable(DType::kFloat32, DType::kFloat32, 3, false, false));
  EXPECT_FALSE(plan::bias_grad_b_foldable(DType::kFloat32, DType::kFloat32, 2, true, false));
  EXPECT_FALSE(plan::bias_grad_b_foldable(DType::kFloat32, DType::kFloat32, 2, false, true));
}

// ------------------------------------------------------------------ device status

TEST(CudaDevice, OnlyNoGpuOrNoDriverMeansNoDevice) {
  using rt::cuda::classify_device_count;
  using rt::cuda::DeviceStatus;
  EXPECT_EQ(classify_device_count(cudaSuccess, 1, 13010), DeviceStatus::kUsable);
  EXPECT_EQ(classify_device_count(cudaSuccess, 0, 13010), DeviceStatus::kNoDevice);
  EXPECT_EQ(classify_device_count(cudaErrorNoDevice, 0, 13010), DeviceStatus::kNoDevice);
  // No driver at all (no libcuda): cudart says "insufficient driver" with driver version 0.
  EXPECT_EQ(classify_device_count(cudaErrorInsufficientDriver, 0, 0), DeviceStatus::kNoDevice);
  // A driver older than the runtime: an error, never a skip.
  EXPECT_EQ(classify_device_count(cudaErrorInsufficientDriver, 0, 12080), DeviceStatus::kUnusable);
  EXPECT_EQ(classify_device_count(cudaErrorInitializationError, 0, 13010), DeviceStatus::kUnusable);
  EXPECT_EQ(classify_device_count(cudaErrorCompatNotSupportedOnDevice, 0, 13010),
            DeviceStatus::kUnusable);
  EXPECT_EQ(rt::cuda::cuda_version_string(13010), "13.1");
  EXPECT_EQ(rt::cuda::cuda_version_string(12080), "12.8");
}

// Without a GPU (or driver) the executor refuses cleanly; on a machine whose CUDA is there
// but unusable, with the versions.
TEST(CudaDevice, NoDeviceIsACleanError) {
  const rt::cuda::DeviceStatus status = rt::cuda::query_device_status();
  if (status == rt::cuda::DeviceStatus::kUsable) GTEST_SKIP() << "this machine has a CUDA device";
  try {
    rt::cuda::open_device(0);
    FAIL() << "open_device succeeded without a usable device";
  } catch (const Error& e) {
    const std::string what = e.what();
    if (status == rt::cuda::DeviceStatus::kNoDevice) {
      EXPECT_NE(what.find("no CUDA device"), std::string::npos) << what;
      EXPECT_NE(what.find("use --device cpu"), std::string::npos) << what;
    } else {
      EXPECT_NE(what.find("CUDA is not usable here"), std::string::npos) << what;
      EXPECT_EQ(what.find("no CUDA device"), std::string::npos) << what;
    }
  }
  // The versions line needs no device either.
  EXPECT_NE(rt::cuda::runtime_versions().find("cuDNN"), std::string::npos);
}

// ------------------------------------------------------------------ error flags

// Three runs in flight (pipeline depth 3), the executor's protocol played on the host with the
// kernels' CPU twins: each run clears the flags (the memset node), then its Gather and its
// cross-entropy may set theirs; a collect reads every pending run, empties the queue, and
// reports the first run's flags; the next run starts clean.
TEST(CudaErrorFlags, ClearedPerRunAndReportedOnce) {
  rt::cuda::ErrorFlags flags;
  const int gather_flag = flags.reserve("node 'emb' (Gather)", "an index is out of range");
  const int ce_flag = flags.reserve("node 'loss' (SoftmaxCrossEntropyLoss)",
                                    "a label is out of range of the classes");
  ASSERT_EQ(flags.bytes(), 256);
  const int64_t depth = 3;
  std::vector<std::vector<char>> slots(depth,
                                       std::vector<char>(static_cast<size_t>(flags.bytes())));
  auto flag_of = [&](int64_t slot, int k) {
    return reinterpret_cast<int32_t*>(slots[static_cast<size_t>(slot)].data() +
                                      rt::cuda::ErrorFlags::offset(k));
  };
  // The device's flags live in one place; each run's copy goes to its slot.
  std::vector<char> device(static_cast<size_t>(flags.bytes()), 0);
  const std::vector<float> table = {1, 2, 3, 4, 5, 6};       // [3, 2]
  const std::vector<float> scores = {0.5f, -1, 2, 0, 1, 1};  // [2, 3]
  auto run = [&](int64_t slot, int64_t index, int64_t label) {
    std::memset(device.data(), 0, device.size());  // the memset node at the start of a run
    const std::vector<int64_t> idx = {0, index};
    std::vector<float> out(4);
    kernels::twin::gather(
        DType::kFloat32, table.data(), 1, 3, 2, DType::kInt64, idx.data(), 2, out.data(),
        reinterpret_cast<int32_t*>(device.data() + rt::cuda::ErrorFlags::offset(gather_flag)));
    const std::vector<int64_t> labels = {1, label};
    float loss = 0;
    std::vector<float> ws(kernels::twin::softmax_cross_entropy_workspace_bytes(
                              2, 3, 1, kernels::shared::CeReduction::kMean) /
                          4);
    kernels::twin::softmax_cross_entropy(
        DType::kFloat32, scores.data(), DType::kInt64, labels.data(), 2, 3, 1, DType::kFloat32,
        nullptr, false, 0, kernels::shared::CeReduction::kMean, &loss, nullptr, ws.data(),
        reinterpret_cast<int32_t*>(device.data() + rt::cuda::ErrorFlags::offset(ce_flag)));
    slots[static_cast<size_t>(slot)] = device;  // the run's device-to-host copy
  };
  rt::cuda::PendingRuns pending(depth);
  auto read = [&](int64_t slot) {
    const auto set = flags.set_in(slots[static_cast<size_t>(slot)].data());
    if (!set.empty()) throw Error(set[0] + (set.size() > 1 ? "; " + set[1] : std::string()));
    return slot;
  };
  // Run 0 fine, run 1 with a bad index and a bad label, run 2 fine.
  for (auto [index, label] : {std::pair<int64_t, int64_t>{1, 2}, {7, 3}, {2, 0}}) {
    ASSERT_FALSE(pending.full());
    run(pending.next_slot(), index, label);
    pending.add();
  }
  EXPECT_EQ(*flag_of(0, gather_flag), 0);
  EXPECT_EQ(*flag_of(1, gather_flag), 1);
  EXPECT_EQ(*flag_of(1, ce_flag), 1);
  EXPECT_EQ(*flag_of(2, gather_flag), 0) << "run 2 saw run 1's flag: not cleared per run";
  EXPECT_EQ(*flag_of(2, ce_flag), 0);
  try {
    (void)pending.drain(read);
    FAIL() << "the bad run was not reported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node 'emb' (Gather): an index is out of range"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("SoftmaxCrossEntropyLoss): a label is out of range"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(pending.count(), 0) << "runs left pending after an error";
  // The next run is clean and collected without an error.
  run(pending.next_slot(), 0, 1);
  pending.add();
  EXPECT_EQ(pending.drain(read).size(), 1u);
  EXPECT_EQ(flags.set_in(slots[0].data()).size(), 0u);
}

// ------------------------------------------------------------------ cuDNN

template <typename Perf>
Perf perf(int algo, cudnnMathType_t math, bool deterministic, size_t memory = 0) {
  Perf p{};
  p.algo = static_cast<decltype(p.algo)>(algo);
  p.status = CUDNN_STATUS_SUCCESS;
  p.mathType = math;
  p.determinism = deterministic ? CUDNN_DETERMINISTIC : CUDNN_NON_DETERMINISTIC;
  p.memory = memory;
  return p;
}

TEST(CudaCudnnChoice, Fp32NeverTakesTensorCoreMathAndDeterministicComesFirst) {
  using P = cudnnConvolutionFwdAlgoPerf_t;
  const P answers[] = {perf<P>(1, CUDNN_TENSOR_OP_MATH, true), perf<P>(2, CUDNN_FMA_MATH, false),
                       perf<P>(3, CUDNN_FMA_MATH, true, rt::cuda::kMaxConvWorkspace + 1),
                       perf<P>(4, CUDNN_DEFAULT_MATH, true),
                       perf<P>(5, CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, true)};
  const P* fp32 = rt::cuda::choose_algo(answers, 5, true);
  ASSERT_NE(fp32, nullptr);
  EXPECT_EQ(fp32->algo, 4);  // deterministic, FMA-or-default, within the cap
  EXPECT_EQ(rt::cuda::math_for_pass(fp32->mathType, true), CUDNN_FMA_MATH);
  const P* half = rt::cuda::choose_algo(answers, 5, false);
  ASSERT_NE(half, nullptr);
  EXPECT_EQ(half->algo, 1);
  EXPECT_EQ(rt::cuda::math_for_pass(half->mathType, false), CUDNN_TENSOR_OP_MATH);
  // Nothing deterministic: the first allowed one.
  const P only[] = {perf<P>(6, CUDNN_TENSOR_OP_MATH, false), perf<P>(7, CUDNN_FMA_MATH, false)};
  EXPECT_EQ(rt::cuda::choose_algo(only, 2, true)->algo, 7);
  EXPECT_EQ(rt::cuda::choose_algo(only, 1, true), nullptr);
}

// ------------------------------------------------------------------ sync debug, step names

TEST(CudaSyncDebug, SwitchAndStepNames) {
  ::unsetenv("AMPC_CUDA_SYNC_DEBUG");
  EXPECT_FALSE(rt::cuda::sync_debug_from_env());
  EXPECT_FALSE(rt::cuda::ExecutorOptions{}.sync_debug);
  ::setenv("AMPC_CUDA_SYNC_DEBUG", "0", 1);
  EXPECT_FALSE(rt::cuda::sync_debug_from_env());
  ::setenv("AMPC_CUDA_SYNC_DEBUG", "1", 1);
  EXPECT_TRUE(rt::cuda::sync_debug_from_env());
  EXPECT_TRUE(rt::cuda::ExecutorOptions{}.sync_debug);
  ::unsetenv("AMPC_CUDA_SYNC_DEBUG");

  const plan::Plan p = compile_for({"mlp", passes::Precision::kFP16});
  bool kernel = false, gemm = false;
  for (int i = 0; i < p.steps_size(); ++i) {
    const auto& s = p.steps(i);
    const std::string d = rt::cuda::describe_step(p, i);
    EXPECT_NE(d.find("step " + std::to_string(i) + " "), std::string::npos) << d;
    if (s.source_nodes_size()) {
      EXPECT_NE(d.find("ONNX node '" + s.source_nodes(0) + "'"), std::string::npos) << d;
    }
    EXPECT_NE(d.find("op " + (s.domain().empty() ? "" : s.domain() + ".") + s.op()),
              std::string::npos)
        << d;
    if (!s.kernel().empty()) {
      kernel = true;
      EXPECT_NE(d.find("kernel " + s.kernel()), std::string::npos) << d;
    }
    gemm |= s.op() == "MatMul" || s.op() == "Gemm";
  }
  EXPECT_TRUE(kernel);
  EXPECT_TRUE(gemm);
}

// ------------------------------------------------------------------ PTX

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

}  // namespace
}  // namespace ampc
