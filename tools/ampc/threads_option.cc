#include "tools/ampc/threads_option.h"

#include <omp.h>

namespace ampc::cli {

void add_threads_option(CLI::App& app) {
  app.fallthrough();
  app.add_option_function<int>(
         "--threads", [](int n) { omp_set_num_threads(n); },
         "threads of the CPU backend's one OpenMP pool (oneDNN, generated kernels, operators); "
         "default: OMP_NUM_THREADS, else the cores available")
      ->check(CLI::Range(1, 4096));
}

}  // namespace ampc::cli
