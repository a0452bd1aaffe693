#include "runtime/cuda/device_memory.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "base/error.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/state_copies.h"

namespace ampc::rt::cuda {
namespace {

constexpr int64_t kAlign = 256;

int64_t align_up(int64_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

int64_t data_bytes(const plan::Buffer& b) {
  int64_t n = static_cast<int64_t>(dtype_size(static_cast<DType>(b.dtype())));
  for (int64_t d : b.shape()) n *= d;
  return n;
}

}  // namespace

std::string describe_buffer(const plan::Buffer& b) {
  return std::string(dtype_name(static_cast<DType>(b.dtype()))) +
         (b.shape_known() ? shape_str({b.shape().begin(), b.shape().end()}) : "[*]") + " '" +
         b.name() + "'";
}

DeviceMemory::DeviceMemory(const plan::Plan& plan) : plan_(plan) {
  if (!plan.has_memory() || plan.memory().alignment() <= 0) {
    throw Error(
        "the plan has no static memory plan, which the CUDA backend needs; compile it again "
        "with this ampc");
  }
  // Every buffer a step, a binding or a state update touches needs a static place.
  std::set<int> used;
  for (const auto& s : plan.steps()) {
    for (int id : s.inputs()) used.insert(id);
    for (int id : s.outputs()) used.insert(id);
  }
  for (const auto& b : plan.inputs()) used.insert(b.buffer());
  for (const auto& b : plan.outputs()) used.insert(b.buffer());
  for (const auto& u : plan.state_updates()) {
    used.insert(u.state());
    used.insert(u.source());
  }
  used.erase(-1);
  for (int id : used) {
    if (id < 0 || id >= plan.buffers_size())
      throw Error("plan: bad buffer id " + std::to_string(id));
    const plan::Buffer& b = plan.buffers(id);
    const auto t = static_cast<DType>(b.dtype());
    if (!b.shape_known()) {
      throw Error("the CUDA backend needs static shapes, but buffer '" + b.name() +
                  "' has a data-dependent shape; run this plan with --device cpu");
    }
    if (!dtype_is_known(b.dtype()) || dtype_size(t) == 0) {
      throw Error("the CUDA backend cannot hold buffer " + describe_buffer(b) +
                  ": its element type has no fixed width");
    }
    if (b.region() == plan::REGION_NONE) {
      throw Error("buffer " + describe_buffer(b) +
                  " has no place in the plan's memory plan; compile the plan again");
    }
  }
  const plan::MemoryPlan& m = plan.memory();
  arena_bytes_ = m.arena_bytes();
  workspace_bytes_ = m.workspace_bytes();
  state_bytes_ = m.state_bytes();
  constant_bytes_ = m.constant_bytes();
  inputs_offset_ = align_up(constant_bytes_);
  input_bytes_ = m.input_bytes();
  outputs_offset_ = inputs_offset_ + align_up(input_bytes_);
  for (const auto& o : plan.outputs()) {
    output_offsets_.push_back(output_bytes_);
    output_bytes_ += align_up(data_bytes(plan.buffers(o.buffer())));
  }
  flags_offset_ = output_bytes_;
  io_bytes_ = outputs_offset_ + output_bytes_;
  // Every placed buffer must fit its region.
  for (int id : used) {
    const plan::Buffer& b = plan.buffers(id);
    const int64_t limit = region(b.region()).bytes;
    if (b.offset() < 0 || b.offset() + data_bytes(b) > limit) {
      throw Error("buffer " + describe_buffer(b) + " at offset " + std::to_string(b.offset()) +
                  " does not fit its region of " + std::to_string(limit) +
                  " bytes; the plan's memory plan is inconsistent");
    }
  }
}

DeviceMemory::RegionSpan DeviceMemory::region(plan::MemoryRegion r) const {
  switch (r) {
    case plan::REGION_ARENA:
      return {arena_, arena_bytes_};
    case plan::REGION_STATE:
      return {state_, state_bytes_};
    case plan::REGION_CONSTANTS:
      return {io_, constant_bytes_};
    case plan::REGION_INPUTS:
      return {io_ ? io_ + inputs_offset_ : nullptr, input_bytes_};
    default:
      return {};
  }
}

DeviceMemory::~DeviceMemory() {
  // Errors cannot be reported from a destructor; a failing free leaves nothing to undo.
  for (char* p : {arena_, state_, io_}) {
    if (p) (void)cudaFree(p);
  }
}

void DeviceMemory::reserve_workspace(int64_t bytes) {
  if (arena_) throw Error("internal: workspace reserved after the device memory was allocated");
  workspace_bytes_ = std::max(workspace_bytes_, align_up(bytes));
}

int DeviceMemory::reserve_flag(const std::string& label, const std::string& what) {
  if (io_) throw Error("internal: a flag reserved after the device memory was allocated");
  const int k = flags_.reserve(label, what);
  output_bytes_ = flags_offset_ + flags_.bytes();
  io_bytes_ = outputs_offset_ + output_bytes_;
  return k;
}

void DeviceMemory::reserve_run_key() {
  if (io_) throw Error("internal: the run key reserved after the device memory was allocated");
  if (run_key_offset_ < 0) {
    run_key_offset_ = (input_bytes_ + 7) / 8 * 8;
    input_bytes_ = run_key_offset_ + 8;
    outputs_offset_ = inputs_offset_ + align_up(input_bytes_);
    io_bytes_ = outputs_offset_ + output_bytes_;
  }
}

std::vector<std::string> DeviceMemory::flags_set(const char* block) const {
  return flags_.set_in(block + flags_offset_);
}

void DeviceMemory::allocate() {
  auto alloc = [](char** p, int64_t bytes, const char* what) {
    if (bytes <= 0) return;
    check(cudaMalloc(reinterpret_cast<void**>(p), static_cast<size_t>(bytes)),
          std::string("cudaMalloc of the ") + what + " (" + std::to_string(bytes) + " bytes)");
  };
  const int64_t arena = align_up(arena_bytes_);
  alloc(&arena_, arena + workspace_bytes_, "arena and workspace");
  workspace_ = workspace_bytes_ > 0 ? arena_ + arena : nullptr;
  alloc(&state_, state_bytes_, "state");
  alloc(&io_, io_bytes_, "constants, inputs and outputs");
  // Zeroed: an output a step never writes (an optional one) reads as zeros, not garbage.
  if (arena_) check(cudaMemset(arena_, 0, static_cast<size_t>(arena)), "cudaMemset of the arena");
  if (io_) check(cudaMemset(io_, 0, static_cast<size_t>(io_bytes_)), "cudaMemset of the inputs");
  for (const auto& b : plan_.buffers()) {
    if ((b.role() != plan::CONSTANT && b.role() != plan::STATE) || b.alias_of() != 0) continue;
    if (b.region() == plan::REGION_NONE) continue;
    upload(b.id(), initial_value(plan_, b));
  }
  // cudaMemcpy from pageable memory may return before the data lands; the executor's
  // stream does not wait for the legacy stream, so wait here.
  check(cudaDeviceSynchronize(), "uploading constants and state");
}

int64_t DeviceMemory::bytes(int id) const {
  return data_bytes(plan_.buffers(id));
}

void* DeviceMemory::address(int id) const {
  if (id < 0) return nullptr;
  const plan::Buffer& b = plan_.buffers(id);
  char* const base = region(b.region()).base;
  if (!base && bytes(id) > 0) {
    throw Error("internal: buffer " + describe_buffer(b) + " has no device storage");
  }
  return base ? base + b.offset() : nullptr;
}

Tensor DeviceMemory::download(int id) const {
  const plan::Buffer& b = plan_.buffers(id);
  Tensor t(static_cast<DType>(b.dtype()), {b.shape().begin(), b.shape().end()});
  if (t.nbytes() > 0) {
    check(cudaMemcpy(t.raw(), address(id), t.nbytes(), cudaMemcpyDeviceToHost),
          "copying '" + b.name() + "' from the device");
  }
  return t;
}

void DeviceMemory::upload(int id, const Tensor& value) {
  const plan::Buffer& b = plan_.buffers(id);
  const std::vector<int64_t> shape(b.shape().begin(), b.shape().end());
  if (value.dtype() != static_cast<DType>(b.dtype()) || value.shape() != shape) {
    throw Error("buffer '" + b.name() + "' must be " + describe_buffer(b) + ", got " +
                value.type_str());
  }
  if (value.nbytes() == 0) return;
  check(cudaMemcpy(address(id), value.raw(), value.nbytes(), cudaMemcpyHostToDevice),
        "copying '" + b.name() + "' to the device");
}

}  // namespace ampc::rt::cuda
