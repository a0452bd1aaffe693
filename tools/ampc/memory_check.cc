#include "tools/ampc/memory_check.h"

#include <cstdlib>

#include "base/error.h"
#include "driver/memory_budget.h"
#include "runtime/memory_fit.h"
#ifdef AMPC_HAVE_CUDA
#include "runtime/cuda/memory_info.h"
#endif

namespace ampc::cli {

void check_plan_fits(const plan::Plan& plan, const Device& device, const std::string& model) {
  const rt::MemoryNeed need = rt::memory_need(plan);
  const std::string shown = model.empty() ? "MODEL.onnx" : model;
  if (device.cuda) {
#ifdef AMPC_HAVE_CUDA
    rt::check_memory_fits(need, rt::cuda::free_device_memory(device.index),
                          "cuda:" + std::to_string(device.index), shown);
#endif
    return;
  }
  std::optional<rt::AvailableMemory> available;
  if (const char* env = std::getenv("AMPC_AVAILABLE_MEMORY"); env && *env) {
    try {
      available = rt::AvailableMemory{compiler::parse_bytes(env), "AMPC_AVAILABLE_MEMORY"};
    } catch (const Error&) {
      throw Error(std::string("AMPC_AVAILABLE_MEMORY='") + env +
                  "': expected a size such as 6GiB, 512MiB or a number of bytes");
    }
  } else {
    available = rt::available_host_memory();
  }
  if (available) rt::check_memory_fits(need, *available, "the CPU", shown);
}

}  // namespace ampc::cli
