// The NVPTX back end of kernels/codegen: PTX for sm_80 and sm_90 of kernels covering every
// instruction and dtype, assembled by the CUDA toolkit's ptxas; the calling convention, no
// fma contraction, libdevice inlined. Skipped without the toolkit (ptxas and libdevice).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include <unistd.h>

#include "base/error.h"
#include "kernels/codegen/codegen.h"
#include "tests/unit/codegen_test_kernels.h"

namespace ampc::kernels::codegen {
namespace {

using namespace cgtest;  // NOLINT: the kernel builders
using ::testing::HasSubstr;
using ::testing::Not;

#ifdef AMPC_PTXAS
constexpr const char* kPtxas = AMPC_PTXAS;
#else
constexpr const char* kPtxas = nullptr;
#endif

#define REQUIRE_TOOLKIT() \
  if (!kPtxas) GTEST_SKIP() << "skipped: no CUDA toolkit (ptxas)"

// A scratch directory of this process (test processes run in parallel), removed at exit.
const std::filesystem::path& scratch() {
  struct Dir {
    std::filesystem::path path = std::filesystem::temp_directory_path() /
                                 ("ampc_codegen_ptx_test_" + std::to_string(getpid()));
    Dir() { std::filesystem::create_directories(path); }
    ~Dir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Dir dir;
  return dir.path;
}

// Assembles `ptx` for `sm` with ptxas; "" on success, else ptxas's messages.
std::string assemble(const std::string& ptx, const std::string& sm, const std::string& name) {
  const auto& dir = scratch();
  const auto src = dir / (name + "_" + sm + ".ptx");
  const auto log = dir / (name + "_" + sm + ".log");
  std::ofstream(src) << ptx;
  const std::string cmd = std::string(kPtxas) + " -arch=" + sm + " " + src.string() + " -o " +
                          (dir / (name + "_" + sm + ".cubin")).string() + " > " + log.string() +
                          " 2>&1";
  if (std::system(cmd.c_str()) == 0) return "";
  std::ifstream in(log);
  return std::string(std::istreambuf_iterator<char>(in), {}) + "\n" + ptx;
}

TEST(CodegenPtx, EveryInstructionAndDtypeAssembles) {
  REQUIRE_TOOLKIT();
  const auto kernels = coverage_kernels();
  double emit_s = 0;
  int emitted = 0;
  for (const std::string sm : {"sm_80", "sm_90"}) {
    for (const auto& k : kernels) {
      const auto t0 = std::chrono::steady_clock::now();
      const TargetCode code = emit_ptx(k, sm);
      emit_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ++emitted;
      EXPECT_EQ(code.target(), sm);
      EXPECT_EQ(code.entry(), k.name());
      EXPECT_THAT(code.ptx(), HasSubstr(".entry " + k.name()));
      EXPECT_THAT(code.ptx(), Not(HasSubstr("__nv_"))) << "libdevice not inlined";
      const std::string err = assemble(code.ptx(), sm, k.name());
      EXPECT_EQ(err, "") << k.name() << " " << sm;
    }
  }
  std::printf("emit_ptx: %d kernels in %.2f s (%.1f ms per kernel)\n", emitted, emit_s,
              1000 * emit_s / emitted);
}

// The chain of the host test, broadcast strides and a guard: one pointer per operand, then
// the element count; mul and add stay separately rounded (no fma contraction).
TEST(CodegenPtx, FusedBroadcastGuardedKernel) {
  REQUIRE_TOOLKIT();
  KernelBuilder b("fused.chain", {64, 48});
  const int x = b.input(kF16), w = b.input(kF32, false, {0, 1}), s = b.input(kF32, true);
  b.input(kBool, true);
  const int a = b.op("add", kF32, {b.op("mul", kF32, {b.op("cast", kF32, {x}), w}), s});
  b.output(b.op("cast", kF16, {b.op("tanh", kF32, {a})})).output(a).guard(3);
  for (const std::string sm : {"sm_80", "sm_90"}) {
    const TargetCode code = emit_ptx(b.def(), sm);
    EXPECT_EQ(code.entry(), "fused_chain");
    EXPECT_THAT(code.ptx(), HasSubstr(".target " + sm));
    EXPECT_THAT(code.ptx(), HasSubstr("mul.rn.f32"));
    EXPECT_THAT(code.ptx(), HasSubstr("add.rn.f32"));
    // Six parameters: four inputs, two outputs, then the count.
    EXPECT_THAT(code.ptx(), HasSubstr("fused_chain_param_6"));
    EXPECT_THAT(code.ptx(), Not(HasSubstr("fused_chain_param_7")));
    EXPECT_EQ(assemble(code.ptx(), sm, "fused_chain"), "");
    EXPECT_THAT(llvm_ir_text(b.def(), sm), HasSubstr("nvptx64-nvidia-cuda"));
  }
}

TEST(CodegenPtx, UnknownArchitectureThrows) {
  EXPECT_THROW(emit_ptx(unary_kernel("exp", kF32), "sm_61"), Error);
}

}  // namespace
}  // namespace ampc::kernels::codegen
