#include "tools/ampc/omp_wait_policy.h"

#include <stdlib.h>
#include <unistd.h>

namespace ampc::cli {

void ensure_passive_omp_wait(char** argv) {
  if (::getenv("OMP_WAIT_POLICY") != nullptr) return;  // the user's choice, or done already
  if (::setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
  ::execv("/proc/self/exe", argv);
}

}  // namespace ampc::cli
