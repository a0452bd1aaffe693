#include "tests/cli/cli_util.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace ampc::testing {
namespace fs = std::filesystem;

RunResult run_ampc(const std::vector<std::string>& args) {
  TempDir capture;
  const std::string out_path = (capture / "stdout").string();
  const std::string err_path = (capture / "stderr").string();
  std::vector<std::string> argv_strings{AMPC_BINARY};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    const int in = ::open("/dev/null", O_RDONLY);
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (in < 0 || out < 0 || err < 0) ::_exit(126);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  RunResult r;
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.term_signal = WTERMSIG(status);
  r.out = read_bytes(out_path);
  r.err = read_bytes(err_path);
  return r;
}

TempDir::TempDir() {
  std::string pattern = (fs::temp_directory_path() / "ampc_test_XXXXXX").string();
  if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

fs::path source_path(const std::string& relative) {
  return fs::path(AMPC_SOURCE_DIR) / relative;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

onnx::ModelProto read_proto(const fs::path& path) {
  onnx::ModelProto proto;
  if (!proto.ParseFromString(read_bytes(path)))
    throw std::runtime_error("not a model: " + path.string());
  return proto;
}

void write_proto(const onnx::ModelProto& proto, const fs::path& path) {
  std::string bytes;
  if (!proto.SerializeToString(&bytes)) throw std::runtime_error("cannot serialise");
  write_bytes(path, bytes);
}

std::vector<std::string> list_dir(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string expect_success(const std::vector<std::string>& args) {
  const RunResult r = run_ampc(args);
  EXPECT_EQ(r.term_signal, 0) << "crashed";
  EXPECT_EQ(r.exit_code, 0) << "stderr:\n" << r.err;
  return r.out;
}

std::string expect_user_error(const std::vector<std::string>& args) {
  const RunResult r = run_ampc(args);
  EXPECT_EQ(r.term_signal, 0) << "crashed";
  EXPECT_EQ(r.exit_code, 1) << "stdout:\n" << r.out << "stderr:\n" << r.err;
  EXPECT_THAT(r.err, ::testing::StartsWith("ampc: error: "));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "stderr:\n" << r.err;
  return r.err;
}

std::vector<nlohmann::json> read_log(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

}  // namespace ampc::testing
