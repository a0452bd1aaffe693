// `ampc train` stopped by SIGINT / SIGTERM (tools/ampc/interrupt.h): the running process
// finishes its step, writes the checkpoint, says how to resume and exits with 130 / 143; the
// run resumed from that checkpoint continues at the next step.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/cli/cli_util.h"

namespace ampc::testing {
namespace {

namespace fs = std::filesystem;

// A started `ampc ARGS...` with stdout and stderr going to files of `dir`.
pid_t spawn_ampc(const std::vector<std::string>& args, const TempDir& dir) {
  std::vector<std::string> strings{AMPC_BINARY};
  strings.insert(strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  const std::string out = (dir / "stdout").string(), err = (dir / "stderr").string();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    const int in = ::open("/dev/null", O_RDONLY);
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (in < 0 || o < 0 || e < 0) ::_exit(126);
    ::dup2(in, 0);
    ::dup2(o, 1);
    ::dup2(e, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

size_t lines_in(const fs::path& file) {
  std::ifstream in(file);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

// Waits until `log` has at least `lines` lines (the run is training), at most a minute.
bool wait_for_lines(const fs::path& log, size_t lines) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (fs::exists(log) && lines_in(log) >= lines) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

int wait_exit(pid_t pid, int& term_signal) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  term_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int64_t checkpoint_step(const fs::path& checkpoint) {
  const onnx::ModelProto m = read_proto(checkpoint);
  for (const auto& p : m.metadata_props())
    if (p.key() == "ampc.checkpoint.step") return std::stoll(p.value());
  return -1;
}

std::vector<std::string> train_args(const TempDir& dir, const std::string& log) {
  return {"train",       source_path("models/mlp.onnx").string(),
          "--data",      source_path("models/data/digits.npz").string(),
          "--steps",     "1000000",
          "--optimizer", "sgd",
          "--lr",        "0.05",
          "--log",       (dir / log).string()};
}

// Interrupts a long run with `sig` once it has logged a few steps; checks the exit status,
// the message, and that the checkpoint holds the last logged step; then resumes.
void interrupt_and_resume(int sig, int expected_status, const std::string& name) {
  TempDir dir;
  const fs::path checkpoint = dir / "ckpt.onnx";
  auto args = train_args(dir, "log.jsonl");
  args.insert(args.end(), {"--checkpoint", checkpoint.string()});
  const pid_t pid = spawn_ampc(args, dir);
  ASSERT_TRUE(wait_for_lines(dir / "log.jsonl", 5)) << read_bytes(dir / "stderr");
  ASSERT_EQ(::kill(pid, sig), 0);
  int term = 0;
  const int status = wait_exit(pid, term);
  const std::string err = read_bytes(dir / "stderr");
  EXPECT_EQ(term, 0) << "killed by signal " << term << "; stderr: " << err;
  EXPECT_EQ(status, expected_status) << err;
  EXPECT_NE(err.find("ampc: " + name + ": stopped after step "), std::string::npos) << err;
  EXPECT_NE(err.find("checkpoint written to " + checkpoint.string()), std::string::npos) << err;
  EXPECT_NE(err.find("--resume " + checkpoint.string() + " --steps "), std::string::npos) << err;

  const auto log = read_log(dir / "log.jsonl");
  ASSERT_FALSE(log.empty());
  const int64_t last_logged = log.back()["step"].get<int64_t>();
  EXPECT_EQ(checkpoint_step(checkpoint), last_logged);
  EXPECT_NE(err.find("stopped after step " + std::to_string(last_logged) + " of 1000000"),
            std::string::npos)
      << err;
  // No temporary file of the atomic write is left beside the checkpoint.
  for (const auto& name_in_dir : list_dir(dir.path()))
    EXPECT_EQ(name_in_dir.find(".tmp"), std::string::npos) << name_in_dir;

  // Resuming continues at the next step.
  auto resume = train_args(dir, "resumed.jsonl");
  resume[5] = "3";  // the value of --steps
  resume.insert(resume.end(), {"--resume", checkpoint.string()});
  expect_success(resume);
  const auto resumed = read_log(dir / "resumed.jsonl");
  ASSERT_EQ(resumed.size(), 3u);
  EXPECT_EQ(resumed[0]["step"].get<int64_t>(), last_logged + 1);
  EXPECT_EQ(resumed[2]["step"].get<int64_t>(), last_logged + 3);
}

TEST(Interrupt, SigintWritesCheckpointAndExits130) {
  interrupt_and_resume(SIGINT, 130, "SIGINT");
}

TEST(Interrupt, SigtermWritesCheckpointAndExits143) {
  interrupt_and_resume(SIGTERM, 143, "SIGTERM");
}

TEST(Interrupt, WithoutCheckpointSaysNothingToResumeFrom) {
  TempDir dir;
  const pid_t pid = spawn_ampc(train_args(dir, "log.jsonl"), dir);
  ASSERT_TRUE(wait_for_lines(dir / "log.jsonl", 3)) << read_bytes(dir / "stderr");
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  int term = 0;
  EXPECT_EQ(wait_exit(pid, term), 130);
  const std::string err = read_bytes(dir / "stderr");
  EXPECT_NE(err.find("no checkpoint written (give --checkpoint FILE"), std::string::npos) << err;
}

}  // namespace
}  // namespace ampc::testing
