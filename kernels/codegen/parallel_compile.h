// Code generation on several threads that are all joined before the call returns: no thread
// of the code generator outlives the work it was started for (no detached workers that could
// still run, or free memory, while the process exits).
#pragma once

#include <cstddef>
#include <functional>

namespace ampc::kernels::codegen {

// How many threads compile at once: the machine's, at most 16 and at most `tasks`.
size_t compile_threads(size_t tasks);

// Runs `work(worker, task)` for every task in [0, tasks) on compile_threads(tasks) threads (the
// calling one among them, as worker 0). Each worker takes the next task until none is left.
// Rethrows the first exception a task threw, after every thread has been joined.
void parallel_compile(size_t tasks, const std::function<void(size_t worker, size_t task)>& work);

}  // namespace ampc::kernels::codegen
