// cuBLASLt and cuDNN are opened only when a plan runs on a GPU (runtime/cuda/cuda_libraries.h):
// a CPU training run of `ampc` loads neither (the dynamic loader's own trace, LD_DEBUG=files,
// is the witness), and the lazily resolved entry points reach the real libraries of the
// toolkit (their version calls answer with the versions the headers name). No GPU needed.
#include <cublasLt.h>
#include <cudnn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include "base/error.h"
#include "runtime/cuda/cuda_libraries.h"
#include "tests/cli/cli_util.h"

namespace ampc::rt::cuda {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(CudaLibraries, CpuTrainingLoadsNeither) {
  testing::TempDir dir;
  const auto plan = (dir / "mlp.plan").string();
  testing::expect_success(
      {"compile", testing::source_path("models/mlp.onnx").string(), "--train", "-o", plan});
  ::setenv("LD_DEBUG", "files", 1);  // the child's loader lists every object it opens
  const testing::RunResult r =
      testing::run_ampc({"train", plan, "--data",
                         testing::source_path("models/data/digits.npz").string(), "--steps", "2"});
  ::unsetenv("LD_DEBUG");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_THAT(r.err, HasSubstr("libLLVM"));  // the trace is there
  EXPECT_THAT(r.err, Not(HasSubstr("libcublas")));
  EXPECT_THAT(r.err, Not(HasSubstr("libcudnn")));
}

TEST(CudaLibraries, OpenedOnFirstUseWithTheHeadersMajorVersion) {
  EXPECT_EQ(loaded_library_versions(), "no CUDA library loaded");
  EXPECT_FALSE(library_loaded(CudaLibrary::kCublasLt));
  EXPECT_EQ(cublasLtGetVersion() / 10000, CUBLAS_VER_MAJOR);  // opens libcublasLt
  EXPECT_TRUE(library_loaded(CudaLibrary::kCublasLt));
  EXPECT_FALSE(library_loaded(CudaLibrary::kCudnn));
  EXPECT_EQ(cudnnGetVersion() / 10000, CUDNN_MAJOR);
  EXPECT_THAT(loaded_library_versions(), HasSubstr("cuBLASLt 13"));
  EXPECT_THAT(loaded_library_versions(), HasSubstr("cuDNN 9"));
}

TEST(CudaLibraries, MissingSymbolNamesLibraryAndSymbol) {
  try {
    library_symbol(CudaLibrary::kCudnn, "cudnnNoSuchEntryPoint");
    FAIL() << "no error";
  } catch (const ampc::Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("libcudnn.so.9"));
    EXPECT_THAT(e.what(), HasSubstr("cudnnNoSuchEntryPoint"));
  }
}

}  // namespace
}  // namespace ampc::rt::cuda
