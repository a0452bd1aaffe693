// The first CPU executor of a process fixes glibc's malloc thresholds (runtime/cpu/heap_reuse.h):
// a freed temporary of some MiB stays in the heap for the next step, neither mapped on its own
// (and unmapped when freed) nor trimmed off the heap's top. glibc's defaults do both to a block
// this size in a fresh process, as this test's is (CTest runs each test in its own).
#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "driver/pipeline.h"
#include "runtime/cpu/executor.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/temp_dir.h"

namespace ampc::rt::cpu {
namespace {

TEST(HeapReuse, FreedTemporariesStayInTheHeapOnceAnExecutorExists) {
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") || std::getenv("MALLOC_TRIM_THRESHOLD_") ||
      std::getenv("GLIBC_TUNABLES")) {
    GTEST_SKIP() << "the environment sets malloc's thresholds, which the executor leaves";
  }
  namespace ob = test::onnx_build;
  onnx::ModelProto m = ob::model("relu");
  onnx::GraphProto* g = m.mutable_graph();
  ob::add_float_io(g, "x", {4});
  ob::add_node(g, "Relu", {"x"}, "y");
  ob::add_float_io(g, "y", {4}, /*output=*/true);
  test::TempDir dir;
  ob::write_model(m, dir / "m.onnx");
  compiler::CompileOptions o;
  o.lowering.target = "cpu";
  const Executor exec(compiler::compile_file(dir / "m.onnx", o));

  constexpr size_t kBytes = size_t(24) << 20;  // below glibc's largest mmap threshold
  const struct mallinfo2 before = mallinfo2();
  void* block = std::malloc(kBytes);
  ASSERT_NE(block, nullptr);
  std::memset(block, 1, kBytes);
  const struct mallinfo2 held = mallinfo2();
  EXPECT_EQ(held.hblks, before.hblks) << "the block was mapped on its own";
  std::free(block);
  const struct mallinfo2 after = mallinfo2();
  EXPECT_GE(after.arena, held.arena) << "the heap was trimmed";
}

}  // namespace
}  // namespace ampc::rt::cpu
