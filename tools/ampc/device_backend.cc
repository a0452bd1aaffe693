#include "tools/ampc/device_backend.h"

#include "base/error.h"
#include "runtime/cpu/executor.h"
#include "tools/ampc/memory_check.h"
#ifdef AMPC_HAVE_CUDA
#include "runtime/cuda/device.h"
#include "runtime/cuda/executor.h"
#endif

namespace ampc::cli {
namespace {

[[noreturn]] void no_cuda_backend() {
  throw Error("this ampc was built without the CUDA backend; use --device cpu");
}

}  // namespace

Device parse_device(const std::string& spec) {
  Device d;
  d.spec = spec;
  if (spec == "cpu") return d;
  d.cuda = true;
#ifdef AMPC_HAVE_CUDA
  d.index = rt::cuda::parse_device(spec);
#else
  if (spec != "cuda" && spec.rfind("cuda:", 0) != 0)
    throw Error("--device '" + spec + "': expected cpu, cuda or cuda:N");
  no_cuda_backend();
#endif
  return d;
}

std::string compile_target(const Device& device) {
  if (!device.cuda) return "cpu";
#ifdef AMPC_HAVE_CUDA
  const rt::cuda::DeviceInfo info = rt::cuda::open_device(device.index);
  return info.arch() >= 90 ? "cuda:sm_90" : "cuda:sm_80";
#else
  no_cuda_backend();
#endif
}

std::unique_ptr<rt::Backend> make_backend(plan::Plan plan, const Device& device,
                                          int64_t pipeline_depth, const std::string& model) {
  check_plan_fits(plan, device, model);
  if (!device.cuda) return std::make_unique<rt::cpu::Executor>(std::move(plan));
#ifdef AMPC_HAVE_CUDA
  rt::cuda::ExecutorOptions options;
  options.device = device.index;
  options.pipeline_depth = pipeline_depth;
  return std::make_unique<rt::cuda::Executor>(std::move(plan), options);
#else
  (void)pipeline_depth;
  no_cuda_backend();
#endif
}

std::string device_summary(const rt::Backend& backend) {
#ifdef AMPC_HAVE_CUDA
  if (const auto* e = dynamic_cast<const rt::cuda::Executor*>(&backend)) {
    const rt::cuda::Counters& c = e->counters();
    return "cuda:" + std::to_string(e->device().index) + " (" + e->device().name +
           "): " + std::to_string(c.steps) + " steps, " + std::to_string(c.graph_launches) +
           " graph launches, " + std::to_string(c.host_syncs) + " host synchronisations, " +
           std::to_string(e->device_bytes() >> 20) + " MiB of device memory";
  }
#else
  (void)backend;
#endif
  return "";
}

}  // namespace ampc::cli
