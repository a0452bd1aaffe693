// What the CUDA backend's op builders see of one plan step at load: its buffers (types,
// shapes, constant values), its attributes (through the CPU backend's OpContext, so both
// backends read them alike), the device, the library handles, and a way to ask for
// workspace. A builder returns the step's Launch: a closure that enqueues the step's work
// on a stream, with everything resolved at load; it runs once, while the step graph is
// captured, so it may not allocate, synchronise or read device memory on the host.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <functional>
#include <string>
#include <vector>

#include "runtime/cpu/op_context.h"
#include "runtime/cuda/device.h"
#include "runtime/cuda/device_memory.h"
#include "runtime/plan/plan.pb.h"

namespace ampc::rt::cuda {

using Launch = std::function<void(cudaStream_t)>;

class PtxLibrary;

// Library handles shared by the steps of one executor.
struct Handles {
  cublasLtHandle_t lt = nullptr;
  cudnnHandle_t dnn = nullptr;
  const PtxLibrary* ptx = nullptr;  // the plan's generated kernels
};

// A buffer's device address, known once the memory is allocated (after every step is built).
struct DevPtr {
  const DeviceMemory* memory = nullptr;
  int id = -1;
  void* get() const { return memory && id >= 0 ? memory->address(id) : nullptr; }
};

// A step's error flag (DeviceMemory::reserve_flag), likewise.
struct FlagPtr {
  const DeviceMemory* memory = nullptr;
  int index = -1;
  int32_t* get() const { return static_cast<int32_t*>(memory->flag(index)); }
};

// The workspace, likewise.
struct WorkspacePtr {
  const DeviceMemory* memory = nullptr;
  void* get() const { return memory->workspace(); }
};

// The run's random key (DeviceMemory::run_key), likewise.
struct RunKeyPtr {
  const DeviceMemory* memory = nullptr;
  const uint64_t* get() const { return memory->run_key(); }
};

class StepContext {
 public:
  StepContext(const plan::Plan& plan, int index, DeviceMemory& memory, const Handles& handles,
              const DeviceInfo& device)
      : plan_(plan),
        step_(plan.steps(index)),
        index_(index),
        memory_(memory),
        handles_(handles),
        device_(device),
        attrs_(step_, {}, {}) {}

  const plan::Plan& plan() const { return plan_; }
  const plan::Step& step() const { return step_; }
  int index() const { return index_; }
  const Handles& handles() const { return handles_; }
  const DeviceInfo& device() const { return device_; }
  // Attributes, label() and fail() as the CPU backend's operators have them.
  const cpu::OpContext& attrs() const { return attrs_; }
  std::string label() const { return attrs_.label(); }
  [[noreturn]] void fail(const std::string& what) const { attrs_.fail(what); }

  int num_inputs() const { return step_.inputs_size(); }
  int num_outputs() const { return step_.outputs_size(); }
  bool has_input(int k) const { return k < num_inputs() && step_.inputs(k) >= 0; }
  bool has_output(int k) const { return k < num_outputs() && step_.outputs(k) >= 0; }
  // The buffer of input / output k; fails naming the step when it is omitted.
  const plan::Buffer& input(int k) const;
  const plan::Buffer& output(int k) const;
  DType in_dtype(int k) const { return static_cast<DType>(input(k).dtype()); }
  DType out_dtype(int k) const { return static_cast<DType>(output(k).dtype()); }
  std::vector<int64_t> in_shape(int k) const;
  std::vector<int64_t> out_shape(int k) const;
  int64_t in_numel(int k) const;
  int64_t out_numel(int k) const;
  DevPtr in(int k) const { return {&memory_, has_input(k) ? step_.inputs(k) : -1}; }
  DevPtr out(int k) const { return {&memory_, has_output(k) ? step_.outputs(k) : -1}; }
  // The value of input k, which must be a constant of the plan.
  Tensor constant(int k, const std::string& what) const;
  // The same as integers (axes, pads, starts...): int32 or int64.
  std::vector<int64_t> constant_ints(int k, const std::string& what) const;
  // Fails unless input k has one of `dtypes`.
  void require_dtype(int k, std::initializer_list<DType> dtypes, bool output = false) const;

  // Workspace of at least `bytes` for this step's launch (shared by all steps).
  WorkspacePtr workspace(int64_t bytes) const;
  // The run's random key, which the executor writes before each run (reserves it).
  RunKeyPtr run_key() const {
    memory_.reserve_run_key();
    return {&memory_};
  }
  // An error flag a kernel of this step sets when `what` happens (an index out of range); the
  // executor reports "<step>: <what>" when it collects the run (error_flags.h).
  FlagPtr error_flag(const std::string& what) const {
    return {&memory_, memory_.reserve_flag(label(), what)};
  }

 private:
  const plan::Plan& plan_;
  const plan::Step& step_;
  int index_;
  DeviceMemory& memory_;
  const Handles& handles_;
  const DeviceInfo& device_;
  cpu::OpContext attrs_;
};

}  // namespace ampc::rt::cuda
