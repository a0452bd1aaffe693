#include "kernels/codegen/parallel_compile.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>
#include <vector>

namespace ampc::kernels::codegen {

size_t compile_threads(size_t tasks) {
  return std::min<size_t>(tasks, std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 16));
}

void parallel_compile(size_t tasks, const std::function<void(size_t worker, size_t task)>& work) {
  if (tasks == 0) return;
  const size_t threads = compile_threads(tasks);
  std::atomic<size_t> next{0};
  std::vector<std::exception_ptr> errors(threads);
  auto run = [&](size_t worker) {
    try {
      for (size_t task = next++; task < tasks; task = next++) work(worker, task);
    } catch (...) {
      errors[worker] = std::current_exception();
      next = tasks;  // the others stop after their current task
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (size_t worker = 1; worker < threads; ++worker) pool.emplace_back(run, worker);
  run(0);
  for (auto& thread : pool) thread.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace ampc::kernels::codegen
