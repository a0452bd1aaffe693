// Replays every committed fuzz input (tests/fuzz/regressions/<target>/: inputs that once
// crashed a target, kept after the fix; tests/fuzz/seeds/<target>/: the seed corpus) through
// the same entry functions the fuzzers call, built with the normal compiler. A regression
// that comes back crashes or throws here; the sanitizer builds (scripts/sanitize.sh) catch
// memory errors that do not crash.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_targets.h"

namespace {

namespace fs = std::filesystem;

struct Target {
  const char* name;
  int (*entry)(const uint8_t*, size_t);
};

const Target kTargets[] = {
    {"onnx_import", ampc::fuzz::onnx_import}, {"external_data", ampc::fuzz::external_data},
    {"plan_load", ampc::fuzz::plan_load},     {"checkpoint_load", ampc::fuzz::checkpoint_load},
    {"npy_read", ampc::fuzz::npy_read},       {"npz_read", ampc::fuzz::npz_read},
    {"policy_json", ampc::fuzz::policy_json}, {"input_shape", ampc::fuzz::input_shape},
};

std::vector<fs::path> inputs_of(const std::string& target) {
  std::vector<fs::path> files;
  for (const char* kind : {"regressions", "seeds"}) {
    const fs::path dir = fs::path(AMPC_SOURCE_DIR) / "tests/fuzz" / kind / target;
    if (!fs::is_directory(dir)) continue;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      if (e.is_regular_file()) files.push_back(e.path());
    }
  }
  return files;
}

class FuzzRegression : public testing::TestWithParam<Target> {};

TEST_P(FuzzRegression, EveryCommittedInputIsRefusedOrAccepted) {
  const Target& t = GetParam();
  const auto files = inputs_of(t.name);
  ASSERT_FALSE(files.empty()) << "no seeds for fuzz target " << t.name;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    SCOPED_TRACE(f.string());
    EXPECT_NO_THROW(t.entry(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzRegression, testing::ValuesIn(kTargets),
                         [](const testing::TestParamInfo<Target>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
