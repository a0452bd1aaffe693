// Every PTX kernel of the example models' training plans (mlp, cnn, gpt in fp16 and bf16,
// compiled for cuda:sm_80 and cuda:sm_90) assembles with the CUDA toolkit's ptxas. Skipped,
// visibly, where the toolkit is absent.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <ostream>
#include <set>
#include <string>

#include "driver/pipeline.h"

namespace ampc {
namespace {

#ifdef AMPC_PTXAS
constexpr const char* kPtxas = AMPC_PTXAS;
#else
constexpr const char* kPtxas = nullptr;
#endif

struct Case {
  std::string model;
  passes::Precision precision;
  std::string target;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string t = info.param.target.substr(5);  // "sm_90"
  return info.param.model + "_" + std::string(passes::precision_name(info.param.precision)) + "_" +
         t;
}

// How gtest prints a case (ctest lists it): "gpt fp16 cuda:sm_90".
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.model << ' ' << passes::precision_name(c.precision) << ' ' << c.target;
}

class PlanPtx : public ::testing::TestWithParam<Case> {};

TEST_P(PlanPtx, EveryKernelAssemblesWithPtxas) {
  if (!kPtxas) GTEST_SKIP() << "skipped: no CUDA toolkit (ptxas)";
  const Case& c = GetParam();
  compiler::CompileOptions o;
  o.train = true;
  o.optimizer.kind = "adam";
  o.autocast.precision = c.precision;
  o.lowering.target = c.target;
  const plan::Plan p =
      compiler::compile_file(std::string(AMPC_SOURCE_DIR) + "/models/" + c.model + ".onnx", o);
  ASSERT_EQ(p.target(), c.target);
  ASSERT_GT(p.kernels_size(), 0);
  const std::string sm = c.target.substr(5);
  const auto dir = std::filesystem::temp_directory_path() /
                   ("ampc_plan_ptx_test_" + std::to_string(getpid()) + "_" + case_name({c, 0}));
  std::filesystem::create_directories(dir);
  for (const auto& k : p.kernels()) {
    ASSERT_EQ(k.code_size(), 1) << k.name();
    EXPECT_EQ(k.code(0).target(), sm) << k.name();
    const auto src = dir / (k.name() + ".ptx");
    const auto log = dir / (k.name() + ".log");
    std::ofstream(src) << k.code(0).ptx();
    const std::string cmd = std::string(kPtxas) + " -arch=" + sm + " " + src.string() + " -o " +
                            (dir / (k.name() + ".cubin")).string() + " > " + log.string() + " 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      std::ifstream in(log);
      ADD_FAILURE() << k.name() << ": ptxas failed:\n"
                    << std::string(std::istreambuf_iterator<char>(in), {});
    }
  }
  std::printf("%s: %d kernels assembled for %s\n", case_name({c, 0}).c_str(), p.kernels_size(),
              sm.c_str());
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char* m : {"mlp", "cnn", "gpt"}) {
    for (auto p : {passes::Precision::kFP16, passes::Precision::kBF16}) {
      for (const char* t : {"cuda:sm_80", "cuda:sm_90"}) out.push_back({m, p, t});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Models, PlanPtx, ::testing::ValuesIn(cases()), case_name);

}  // namespace
}  // namespace ampc
