// The code generator's threads: parallel_compile joins every worker before it returns (also when
// a task throws), host kernels compiled on those threads give the same results as one compiled
// alone, and compiled entries may be called from many threads at once. Built normally in the
// suite and, to find data races, under ThreadSanitizer: TARGETS=codegen_threads_test
// scripts/sanitize.sh thread -R CodegenThreads (a worker that outlived its work, as the JIT's
// detached compile threads once did, shows up there and in `ampc` runs pinned to one core:
// tests/cli/exit_stability_test.cc).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "kernels/codegen/codegen.h"
#include "kernels/codegen/parallel_compile.h"
#include "tests/unit/codegen_test_kernels.h"

namespace ampc::kernels::codegen {
namespace {

using namespace cgtest;  // NOLINT: the kernel builders

TEST(CodegenThreadsPool, RunsEveryTaskOnceAndJoins) {
  constexpr size_t kTasks = 100;
  std::vector<std::atomic<int>> runs(kTasks);
  parallel_compile(kTasks, [&](size_t, size_t task) { ++runs[task]; });
  for (size_t i = 0; i < kTasks; ++i) EXPECT_EQ(runs[i].load(), 1) << i;
}

TEST(CodegenThreadsPool, RethrowsAfterJoiningAndStopsTakingTasks) {
  std::atomic<int> started{0};
  std::atomic<int> finished{0};
  std::atomic<bool> thrown{false};
  // The tasks after 3 (taken after it: the pool hands tasks out in order) wait for its throw
  // and then take a millisecond each, so that the others cannot drain all 1000 tasks in the
  // moment between the throw and the pool's stop, however the threads are scheduled.
  EXPECT_THROW(parallel_compile(1000,
                                [&](size_t, size_t task) {
                                  ++started;
                                  if (task == 3) {
                                    thrown = true;
                                    throw std::runtime_error("task 3");
                                  }
                                  if (task > 3) {
                                    while (!thrown) std::this_thread::yield();
                                    std::this_thread::sleep_for(std::chrono::milliseconds(1));
                                  }
                                  ++finished;
                                }),
               std::runtime_error);
  // Every worker was joined: nothing runs after the throw reached us.
  const int seen = finished.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(finished.load(), seen);
  EXPECT_LT(started.load(), 1000);  // the others stopped taking tasks
}

// y = x * k + k for a constant k that differs per kernel, so a mixed-up entry is caught.
KernelDef scaled_kernel(int k) {
  KernelBuilder b("scale_" + std::to_string(k));
  const int x = b.input(kF32);
  const int c = b.constant(kF32, k);
  b.output(b.op("add", kF32, {b.op("mul", kF32, {x, c}), c}));
  return b.def();
}

// Threads of this process now (Linux: one entry per thread in /proc/self/task).
size_t thread_count() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/task"))
    ++n;
  return n;
}

TEST(CodegenThreadsHost, LeavesNoThreadBehind) {
  std::vector<KernelDef> defs;
  for (int k = 0; k < 16; ++k) defs.push_back(scaled_kernel(k));
  std::vector<const KernelDef*> pointers;
  for (const auto& d : defs) pointers.push_back(&d);
  // A sanitizer's runtime starts a helper thread of its own with the first thread the process
  // creates: start one first, so that only threads of the compile can make a difference.
  std::thread([] {}).join();
  const size_t before = thread_count();
  HostKernels host(pointers);  // compiled on several threads
  // A joined thread can still be listed for a moment: join returns when the thread has
  // finished, and the kernel drops its /proc entry a little after. A thread that outlived the
  // compilation is still listed when the wait (at most 5 s) ends.
  for (int i = 0; i < 500 && thread_count() != before; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(thread_count(), before) << "a compile thread outlived the compilation";
  EXPECT_NE(host.find("scale_15"), nullptr);
}

TEST(CodegenThreadsHost, CompiledOnWorkerThreadsAndCalledFromMany) {
  constexpr int kKernels = 24;
  std::vector<KernelDef> defs;
  for (int k = 0; k < kKernels; ++k) defs.push_back(scaled_kernel(k));
  std::vector<const KernelDef*> pointers;
  for (const auto& d : defs) pointers.push_back(&d);
  for (int round = 0; round < 3; ++round) {  // the JIT made and destroyed again
    HostKernels host(pointers);
    std::vector<std::thread> callers;
    std::atomic<int> wrong{0};
    for (int t = 0; t < 4; ++t) {
      callers.emplace_back([&, t] {
        std::vector<float> x(257), y(257);
        for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.5f - t;
        for (int k = 0; k < kKernels; ++k) {
          const HostKernelFn fn = host.find("scale_" + std::to_string(k));
          if (fn == nullptr) {
            ++wrong;
            continue;
          }
          void* operands[] = {x.data(), y.data()};
          fn(operands, 0, static_cast<int64_t>(x.size()));
          for (size_t i = 0; i < x.size(); ++i) {
            if (y[i] != x[i] * static_cast<float>(k) + static_cast<float>(k)) ++wrong;
          }
        }
      });
    }
    for (auto& c : callers) c.join();
    EXPECT_EQ(wrong.load(), 0);
  }
}

TEST(CodegenThreadsPtx, EmittedOnWorkerThreads) {
  std::vector<KernelDef> defs;
  for (int k = 0; k < 8; ++k) defs.push_back(scaled_kernel(k));
  std::vector<const KernelDef*> pointers;
  for (const auto& d : defs) pointers.push_back(&d);
  const auto codes = emit_ptx_all(pointers, "sm_90");
  ASSERT_EQ(codes.size(), defs.size());
  for (const auto& code : codes) EXPECT_NE(code.ptx().find(".entry"), std::string::npos);
}

}  // namespace
}  // namespace ampc::kernels::codegen
