#include "tools/ampc/omp_wait_policy.h"

#include <stdlib.h>
#include <unistd.h>

#include <string_view>

namespace ampc::cli {

void ensure_passive_omp_wait(int argc, char** argv) {
  if (::getenv("OMP_WAIT_POLICY") != nullptr) return;  // the user's choice, or done already
  const std::string_view command = argc > 1 ? argv[1] : "";
  if (command != "train" && command != "run" && command != "bench") return;
  if (::setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
  ::execv("/proc/self/exe", argv);
}

}  // namespace ampc::cli
