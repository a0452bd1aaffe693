// PyTorch oracles that drive the built `ampc` as a user does and compare with PyTorch
// (Debian's /usr/bin/python3 with torch), one script run per test case:
// - OptimizerUpdate.*: the update p - p0 after 3 steps of every optimizer option (SGD plain,
//   momentum, Nesterov, weight decay; Adam with L2 decay; AdamW; --betas, --eps) against
//   torch.optim, relative to the update (tests/oracle/optimizer_update_oracle.py);
// - SixteenBitOracle.*: one fp16 / bf16 step of mlp and gpt (loss, every gradient, the
//   update) against PyTorch references made outside ampc (sixteen_bit_oracle.py,
//   amp_reference.py);
// - ClipUnderScaling.*: --clip-grad-norm with dynamic loss scaling against GradScaler's
//   unscale_ + clip_grad_norm_ recipe (scaler_parity.py --only clip-scaled-*);
// - LinearRounding.*: torch.nn.Linear on inputs of rank 2, 3 and 4 in bf16 (against PyTorch's
//   CPU autocast; and a Linear + ReLU, which CPU plans fold) and fp16 (float64 rounded as CUDA
//   autocast rounds), bit for bit, plans for a CUDA and a CPU target (linear_rounding_oracle.py);
// - GeluRounding.*: torch's GELU (exported as five ops) in bf16 (against PyTorch's CPU
//   autocast) and fp16 (PyTorch's fp32 gelu rounded once, as CUDA's), forward and backward,
//   bit for bit (gelu_rounding_oracle.py);
// - ScalarPowers.*: Pow by 1, 2, 3, -1, -2, 0.5, -0.5 computes PyTorch's products, reciprocals
//   and square roots, forward and backward, bit for bit (pow_scalar_oracle.py);
// - SixteenBitSkipResume.*: an fp16 overflow inside the backward skips the step keeping every
//   bit, and resume across skipped steps is bit-exact (scaler_parity.py --only
//   backward-overflow).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include "tests/support/temp_dir.h"

namespace ampc {
namespace {

// Runs tests/oracle/SCRIPT with --ampc, --models-dir, --out and `args`; fails unless it exits 0.
// The script prints its comparisons; on failure, its last line says what differs.
void run_script(const std::string& script, const std::string& args) {
  test::TempDir dir;
  const std::string src = AMPC_SOURCE_DIR;
  const std::string cmd = "/usr/bin/python3 '" + src + "/tests/oracle/" + script + "' --ampc '" +
                          AMPC_BINARY + "' --models-dir '" + src + "/models' --out '" +
                          dir.path().string() + "' " + args;
  const int status = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << script << ' ' << args << " failed (its output above says where)";
}

void optimizer_case(const std::string& name) {
  run_script("optimizer_update_oracle.py", name);
}

TEST(OptimizerUpdate, Sgd) {
  optimizer_case("sgd");
}
TEST(OptimizerUpdate, SgdMomentum) {
  optimizer_case("sgd-momentum");
}
TEST(OptimizerUpdate, SgdWeightDecay) {
  optimizer_case("sgd-weight-decay");
}
TEST(OptimizerUpdate, SgdNesterovWeightDecay) {
  optimizer_case("sgd-nesterov-weight-decay");
}
TEST(OptimizerUpdate, AdamL2Decay) {
  optimizer_case("adam-l2");
}
TEST(OptimizerUpdate, AdamW) {
  optimizer_case("adamw");
}
TEST(OptimizerUpdate, AdamBetasEps) {
  optimizer_case("adam-betas-eps");
}
TEST(OptimizerUpdate, AdamWBetasEps) {
  optimizer_case("adamw-betas-eps");
}

TEST(SixteenBitOracle, MlpFp16) {
  run_script("sixteen_bit_oracle.py", "mlp-fp16");
}
TEST(SixteenBitOracle, GptFp16) {
  run_script("sixteen_bit_oracle.py", "gpt-fp16");
}
TEST(SixteenBitOracle, MlpBf16) {
  run_script("sixteen_bit_oracle.py", "mlp-bf16");
}
TEST(SixteenBitOracle, GptBf16) {
  run_script("sixteen_bit_oracle.py", "gpt-bf16");
}

TEST(LinearRounding, Bf16) {
  run_script("linear_rounding_oracle.py", "bf16");
}
TEST(LinearRounding, Fp16) {
  run_script("linear_rounding_oracle.py", "fp16");
}

TEST(GeluRounding, Bf16) {
  run_script("gelu_rounding_oracle.py", "bf16");
}
TEST(GeluRounding, Fp16) {
  run_script("gelu_rounding_oracle.py", "fp16");
}

TEST(ScalarPowers, Fp32ForwardAndBackwardArePyTorchsBits) {
  run_script("pow_scalar_oracle.py", "fp32");
}

TEST(ClipUnderScaling, Fp32DynamicScale) {
  run_script("scaler_parity.py", "--only clip-scaled-fp32");
}
TEST(ClipUnderScaling, Fp16DynamicScale) {
  run_script("scaler_parity.py", "--only clip-scaled-fp16");
}

TEST(SixteenBitSkipResume, BackwardOverflowKeepsBitsAndResumesExactly) {
  run_script("scaler_parity.py", "--only backward-overflow");
}

}  // namespace
}  // namespace ampc
