// The resource check before `ampc train` and `ampc run` start: the plan's memory against what
// the device it runs on has available (runtime/memory_fit.h). On the CPU that is what the
// OS reports (MemAvailable, a cgroup limit), or AMPC_AVAILABLE_MEMORY=SIZE ("6GiB", "512MiB",
// bytes) when set: to leave memory to other processes, and for tests. On a GPU it is
// cudaMemGetInfo's free memory.
#pragma once

#include <string>

#include "runtime/plan/plan.pb.h"
#include "tools/ampc/device_backend.h"

namespace ampc::cli {

// Throws ampc::Error with the sizes and the `ampc inspect MODEL --memory` command that
// finds a batch that fits, when the plan does not fit.
void check_plan_fits(const plan::Plan& plan, const Device& device, const std::string& model);

}  // namespace ampc::cli
