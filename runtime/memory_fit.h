// Whether a plan's memory fits the machine, checked before any work starts: what the plan
// needs (its memory plan: arena, state, constants, inputs, library workspace) against what
// the host reports as available (MemAvailable, or the cgroup's limit when lower). The CUDA
// side's free device memory is runtime/cuda/memory_info.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "runtime/plan/plan.pb.h"

namespace ampc::rt {

struct MemoryNeed {
  int64_t arena = 0, state = 0, constants = 0, inputs = 0, workspace = 0;
  int64_t total() const;  // checked sum
};

MemoryNeed memory_need(const plan::Plan& plan);

struct AvailableMemory {
  int64_t bytes = 0;
  std::string source;  // "MemAvailable", "cgroup memory.max", ...
};

// The memory this process can still use: the smaller of /proc/meminfo's MemAvailable and
// the room left under the cgroup's limit (v2 memory.max - memory.current, v1
// memory.limit_in_bytes - memory.usage_in_bytes); nothing when neither can be read.
std::optional<AvailableMemory> available_host_memory();

// "1.50 GiB", "512.00 MiB", "4096 B".
std::string format_bytes(int64_t bytes);

// Throws ampc::Error when need.total() > available.bytes: "the plan needs X (arena A, state
// S, ...) but only Y is available on <where> (<source>); `ampc inspect MODEL --memory
// --device-memory Y` finds the largest batch that fits". `model` names the ONNX model in
// that command (or a placeholder).
void check_memory_fits(const MemoryNeed& need, const AvailableMemory& available,
                       const std::string& where, const std::string& model);

}  // namespace ampc::rt
