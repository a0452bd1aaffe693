// Loss-scaler parity with PyTorch (tests/oracle/scaler_parity.py, Debian's /usr/bin/python3
// with torch): `ampc train`'s scale / skipped / growth-tracker sequence with non-finite
// gradients injected at chosen steps equals torch's _amp_update_scale_ rule, skipped steps
// leave every parameter and optimizer state bit-identical, resume is bit-exact with the
// scaler's state in the checkpoint, and --clip-grad-norm matches clip_grad_norm_ (1e-5).
// The script's other sections (clipping under loss scaling, fp16 backward overflows) are
// script_oracles_test's.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include "tests/support/temp_dir.h"

namespace ampc {
namespace {

TEST(ScalerParity, MatchesTorchsGradScalerRuleAndClipGradNorm) {
  test::TempDir dir;
  const std::string src = AMPC_SOURCE_DIR;
  const std::string cmd = "/usr/bin/python3 '" + src + "/tests/oracle/scaler_parity.py' --ampc '" +
                          AMPC_BINARY + "' --models-dir '" + src + "/models' --out '" +
                          dir.path().string() + "' --only dynamic --only bounded --only clip";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "scaler_parity.py failed (its output above says where)";
}

}  // namespace
}  // namespace ampc
