// The plan's generated kernels (Plan.kernels, PTX made by kernels/codegen) loaded for one
// device through cudart alone: cudaLibraryLoadData JIT-compiles the PTX of the best target
// the plan carries for the device (sm_90 code on sm_90, sm_80 code on sm_80 and later),
// cudaLibraryGetKernel finds the entry, cudaLaunchKernel launches the cudaKernel_t.
#pragma once

#include <cuda_runtime_api.h>

#include <map>
#include <string>
#include <vector>

#include "runtime/cuda/device.h"
#include "runtime/plan/plan.pb.h"

namespace ampc::rt::cuda {

// The code of `def` to load on a device of compute capability `arch` (90 for sm_90): the
// highest target not above it; null when there is none.
const kernels::TargetCode* pick_code(const kernels::KernelDef& def, int arch);

class PtxLibrary {
 public:
  // Loads every kernel of the plan. Throws ampc::Error naming the kernel when the plan has no
  // code for this device (with the targets it has) or when the driver refuses the PTX (with
  // the JIT's log).
  PtxLibrary(const plan::Plan& plan, const DeviceInfo& device);
  PtxLibrary(const PtxLibrary&) = delete;
  PtxLibrary& operator=(const PtxLibrary&) = delete;
  ~PtxLibrary();

  // The entry of kernel `name`; throws ampc::Error when the plan defines none.
  cudaKernel_t kernel(const std::string& name) const;

 private:
  std::vector<cudaLibrary_t> libraries_;
  std::map<std::string, cudaKernel_t> kernels_;
};

// Launches a generated kernel's grid-stride loop (kernels/codegen/README.md: one device
// pointer per operand, inputs then outputs, then the int64 element count) over `count`
// elements: 256 threads per block, at most 8 blocks per SM. Nothing for count 0.
void launch_generated(cudaKernel_t kernel, const std::vector<void*>& operands, int64_t count,
                      int sm_count, cudaStream_t stream);

}  // namespace ampc::rt::cuda
