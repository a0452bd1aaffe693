#include "runtime/cuda/ptx_library.h"

#include <algorithm>

#include "base/error.h"
#include "runtime/cuda/cuda_check.h"

namespace ampc::rt::cuda {
namespace {

// "sm_90" -> 90; -1 for anything else.
int target_arch(const std::string& target) {
  if (target.size() < 4 || target.compare(0, 3, "sm_") != 0) return -1;
  int arch = 0;
  for (size_t i = 3; i < target.size(); ++i) {
    if (target[i] < '0' || target[i] > '9') return -1;
    arch = arch * 10 + (target[i] - '0');
  }
  return arch;
}

}  // namespace

const kernels::TargetCode* pick_code(const kernels::KernelDef& def, int arch) {
  const kernels::TargetCode* best = nullptr;
  int best_arch = -1;
  for (const auto& code : def.code()) {
    const int a = target_arch(code.target());
    if (a < 0 || a > arch || a <= best_arch || code.ptx().empty()) continue;
    best = &code;
    best_arch = a;
  }
  return best;
}

PtxLibrary::PtxLibrary(const plan::Plan& plan, const DeviceInfo& device) {
  const std::string sm = "sm_" + std::to_string(device.arch());
  for (const auto& def : plan.kernels()) {
    const kernels::TargetCode* code = pick_code(def, device.arch());
    if (!code) {
      std::string have;
      for (const auto& c : def.code()) have += (have.empty() ? "" : ", ") + c.target();
      throw Error("kernel '" + def.name() + "' has no code for device " +
                  std::to_string(device.index) + " (" + device.name + ", " + sm +
                  "): the plan (target '" + plan.target() + "') carries " +
                  (have.empty() ? std::string("no PTX") : "PTX for " + have) +
                  "; compile it with --target cuda:" +
                  (device.arch() >= 90 ? std::string("sm_90") : std::string("sm_80")));
    }
    char log[4096] = {0};
    cudaJitOption options[] = {cudaJitErrorLogBuffer, cudaJitErrorLogBufferSizeBytes};
    void* values[] = {log, reinterpret_cast<void*>(static_cast<uintptr_t>(sizeof log - 1))};
    cudaLibrary_t library = nullptr;
    const cudaError_t status =
        cudaLibraryLoadData(&library, code->ptx().c_str(), options, values, 2, nullptr, nullptr, 0);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      throw Error("kernel '" + def.name() + "': loading its " + code->target() + " PTX on " + sm +
                  " failed: " + cudaGetErrorString(status) +
                  (log[0] ? std::string("; JIT log: ") + log : std::string()));
    }
    libraries_.push_back(library);
    cudaKernel_t kernel = nullptr;
    check(cudaLibraryGetKernel(&kernel, library, code->entry().c_str()),
          "kernel '" + def.name() + "': entry '" + code->entry() + "'");
    kernels_[def.name()] = kernel;
  }
}

PtxLibrary::~PtxLibrary() {
  for (cudaLibrary_t library : libraries_) (void)cudaLibraryUnload(library);
}

cudaKernel_t PtxLibrary::kernel(const std::string& name) const {
  auto it = kernels_.find(name);
  if (it == kernels_.end()) throw Error("the plan defines no kernel '" + name + "'");
  return it->second;
}

void launch_generated(cudaKernel_t kernel, const std::vector<void*>& operands, int64_t count,
                      int sm_count, cudaStream_t stream) {
  if (count <= 0) return;
  constexpr int64_t kThreads = 256;
  const int64_t blocks =
      std::clamp<int64_t>((count + kThreads - 1) / kThreads, 1, std::max(1, sm_count) * 8);
  std::vector<void*> pointers = operands;  // cudaLaunchKernel reads the values behind args
  std::vector<void*> args;
  args.reserve(pointers.size() + 1);
  for (void*& p : pointers) args.push_back(&p);
  int64_t n = count;
  args.push_back(&n);
  check(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(static_cast<unsigned>(blocks)),
                         dim3(kThreads), args.data(), 0, stream),
        "launching a generated kernel");
}

}  // namespace ampc::rt::cuda
