// Device memory of a plan, as its static memory plan (Buffer.region / offset / alias_of,
// Plan.memory) lays it out: three cudaMalloc calls at load and none afterwards,
//   - the arena (ACTIVATION and OUTPUT buffers) followed by the workspace of library calls
//     (the plan's cuBLASLt workspace, or more when a cuDNN algorithm or a hand-written kernel
//     asks for it at load),
//   - the state (parameters, optimizer moments, scaler state),
//   - constants, then inputs, then the output block: every plan output copied together at the
//     end of a step, so that one device-to-host copy fetches them.
// Every buffer's address is its region's base plus its offset, so views and in-place writes
// (alias_of) share storage exactly as the plan says.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/cuda/error_flags.h"
#include "runtime/plan/plan.pb.h"
#include "runtime/tensor.h"

namespace ampc::rt::cuda {

class DeviceMemory {
 public:
  // Checks that the plan can run from static memory (a memory plan, static shapes, fixed-width
  // element types for every buffer a step touches) and computes the layout; allocates nothing.
  explicit DeviceMemory(const plan::Plan& plan);
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory();

  // Asks for at least `bytes` of workspace (before allocate()).
  void reserve_workspace(int64_t bytes);
  // A device int32 error flag (0 until a kernel sets it) that the step `label` sets when
  // `what` happens, kept after the outputs in the output block so that every run's copy
  // brings it back (error_flags.h); returns its index (before allocate()).
  int reserve_flag(const std::string& label, const std::string& what);
  void* flag(int k) const { return io_ + outputs_offset_ + flags_offset_ + ErrorFlags::offset(k); }
  // Every flag, for the memset node that clears them at the start of a run.
  void* flags() const { return io_ + outputs_offset_ + flags_offset_; }
  int64_t flag_bytes() const { return flags_.bytes(); }
  // "<step>: <what>" for the flags set in a host copy of the output block.
  std::vector<std::string> flags_set(const char* block) const;
  // The three allocations, then constants and state uploaded (waits for the copies).
  void allocate();

  // Device address of buffer `id` (valid after allocate()); nullptr for -1.
  void* address(int id) const;
  void* workspace() const { return workspace_; }
  int64_t workspace_bytes() const { return workspace_bytes_; }

  // The run's random key (kernels/shared/dropout_math.h's run_key): a uint64 after the plan's
  // inputs, which the executor writes with each run's inputs, so that a step graph captured
  // once draws new masks every run. Reserved by the first random step (before allocate()).
  void reserve_run_key();
  bool has_run_key() const { return run_key_offset_ >= 0; }
  // Its offset in the inputs region (and in a host staging copy of it).
  int64_t run_key_offset() const { return run_key_offset_; }
  const uint64_t* run_key() const {
    return reinterpret_cast<const uint64_t*>(io_ + inputs_offset_ + run_key_offset_);
  }

  // The inputs region (every INPUT buffer at its offset, then the run key if reserved) and
  // the output block.
  void* inputs() const { return io_ + inputs_offset_; }
  int64_t input_bytes() const { return input_bytes_; }
  void* output_block() const { return io_ + outputs_offset_; }
  int64_t output_block_bytes() const { return output_bytes_; }
  // Offset in the output block of plan output `k` (Plan.outputs order).
  int64_t output_offset(int k) const { return output_offsets_.at(static_cast<size_t>(k)); }

  // Bytes of buffer `id`'s data.
  int64_t bytes(int id) const;
  // Synchronous copies of one buffer (state upload and download, tests).
  Tensor download(int id) const;
  void upload(int id, const Tensor& value);

  // Bytes allocated on the device (arena + workspace, state, constants + inputs + outputs).
  int64_t device_bytes() const {
    return arena_bytes_ + workspace_bytes_ + state_bytes_ + io_bytes_;
  }

 private:
  // A region of the memory plan on the device: its base (null until allocate()) and its size.
  struct RegionSpan {
    char* base = nullptr;
    int64_t bytes = 0;
  };
  // {nullptr, 0} for REGION_NONE (no device storage).
  RegionSpan region(plan::MemoryRegion r) const;

  const plan::Plan& plan_;
  int64_t arena_bytes_ = 0, workspace_bytes_ = 0, state_bytes_ = 0;
  int64_t constant_bytes_ = 0, inputs_offset_ = 0, input_bytes_ = 0;
  int64_t outputs_offset_ = 0, output_bytes_ = 0, io_bytes_ = 0;
  std::vector<int64_t> output_offsets_;
  int64_t flags_offset_ = 0;     // in the output block
  int64_t run_key_offset_ = -1;  // in the inputs region; -1: none
  ErrorFlags flags_;
  char* arena_ = nullptr;
  char* workspace_ = nullptr;
  char* state_ = nullptr;
  char* io_ = nullptr;
};

// Where buffer `b` lives, for messages: "f16[64,128] 'name'".
std::string describe_buffer(const plan::Buffer& b);

}  // namespace ampc::rt::cuda
