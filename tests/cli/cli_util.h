// Running the built `ampc` binary from tests, and the scratch files those tests need.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>
#include <nlohmann/json.hpp>

namespace ampc::testing {

struct RunResult {
  int exit_code = -1;   // -1 when the process did not exit normally
  int term_signal = 0;  // the signal that killed it (a crash), else 0
  std::string out;      // stdout
  std::string err;      // stderr
};

// Runs AMPC_BINARY with `args` (no shell), stdin from /dev/null, capturing both streams.
RunResult run_ampc(const std::vector<std::string>& args);

// Runs ampc expecting success (no crash, exit 0); returns stdout.
std::string expect_success(const std::vector<std::string>& args);
// Runs ampc expecting a user error: exit 1 and exactly one stderr line "ampc: error: ...";
// returns stderr.
std::string expect_user_error(const std::vector<std::string>& args);

// A fresh directory under the system temp folder, removed with everything in it.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// A file of the source tree, e.g. source_path("models/mlp.onnx").
std::filesystem::path source_path(const std::string& relative);

std::string read_bytes(const std::filesystem::path& path);
void write_bytes(const std::filesystem::path& path, const std::string& bytes);
onnx::ModelProto read_proto(const std::filesystem::path& path);
void write_proto(const onnx::ModelProto& proto, const std::filesystem::path& path);

// The objects of a JSON-lines file (`ampc train --log`), one per line.
std::vector<nlohmann::json> read_log(const std::filesystem::path& path);

// The bytes of a tensor (anything with raw() and nbytes()), to compare values bit for bit.
template <typename T>
std::string bytes_of(const T& t) {
  return std::string(static_cast<const char*>(t.raw()), t.nbytes());
}

// Names of the entries of a directory, sorted.
std::vector<std::string> list_dir(const std::filesystem::path& dir);

}  // namespace ampc::testing
