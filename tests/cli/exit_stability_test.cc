// `ampc train` exits cleanly when it has one core, run after run and two at a time: every run's
// exit status is checked. A CPU run used to abort at exit in 10-20% of runs pinned to one core
// (heap corruption: the JIT's detached compile threads destroyed their last task after the
// JIT itself was gone). Fast models only; the count is in the test name.
#include <gtest/gtest.h>
#include <sched.h>

#include <string>
#include <thread>
#include <vector>

#include "tests/cli/cli_util.h"

namespace ampc::testing {
namespace {

// The first core this process may run on; pins the calling process (and so the ampc processes
// it starts, which inherit it) to that core alone.
void pin_to_one_core() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(::sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  int first = 0;
  while (first < CPU_SETSIZE && !CPU_ISSET(first, &allowed)) ++first;
  ASSERT_LT(first, CPU_SETSIZE);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(::sched_setaffinity(0, sizeof(one), &one), 0);
}

class ExitStability : public ::testing::Test {
 protected:
  void SetUp() override {
    // SGD with momentum, as the report that found the crash; fused, so the host JIT compiles
    // kernels on its threads at every load.
    expect_success({"compile", source_path("models/mlp.onnx").string(), "--train", "--optimizer",
                    "sgd", "--lr", "0.05", "--momentum", "0.9", "-o", plan_.string()});
    cpu_set_t saved;
    ASSERT_EQ(::sched_getaffinity(0, sizeof(saved), &saved), 0);
    saved_ = saved;
    pin_to_one_core();
  }
  void TearDown() override { ::sched_setaffinity(0, sizeof(saved_), &saved_); }

  std::vector<std::string> train_args() const {
    return {"train",   plan_.string(),
            "--data",  source_path("models/data/digits.npz").string(),
            "--steps", "6"};
  }
  // One run: trains to the end, says so, and exits by itself with status 0 (stderr carries
  // only the progress line then).
  static std::string failure_of(const RunResult& r) {
    if (r.term_signal != 0)
      return "killed by signal " + std::to_string(r.term_signal) + ": " + r.err;
    if (r.exit_code != 0) return "exit status " + std::to_string(r.exit_code) + ": " + r.err;
    if (r.out.find("trained 6 steps") == std::string::npos) return "no summary: " + r.out + r.err;
    if (r.err.find("step 6/6") == std::string::npos || r.err.find("rror") != std::string::npos)
      return "stderr: " + r.err;
    return "";
  }

  TempDir dir_;
  std::filesystem::path plan_ = dir_ / "mlp.plan";
  cpu_set_t saved_{};
};

TEST_F(ExitStability, FiftyRunsPinnedToOneCore) {
  int failed = 0;
  for (int run = 0; run < 50; ++run) {
    const std::string failure = failure_of(run_ampc(train_args()));
    if (!failure.empty()) {
      ++failed;
      ADD_FAILURE() << "run " << run << ": " << failure;
    }
  }
  EXPECT_EQ(failed, 0);
}

TEST_F(ExitStability, TenPairsSideBySideOnOneCore) {
  for (int pair = 0; pair < 10; ++pair) {
    RunResult a, b;
    std::thread second([&] { b = run_ampc(train_args()); });
    a = run_ampc(train_args());
    second.join();
    EXPECT_EQ(failure_of(a), "") << "pair " << pair << ", first run";
    EXPECT_EQ(failure_of(b), "") << "pair " << pair << ", second run";
  }
}

}  // namespace
}  // namespace ampc::testing
