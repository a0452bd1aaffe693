// What `ampc inspect PLAN` reports about a plan: the header (model, target, precision, step
// and kernel counts), the kernels in execution order (name, the ONNX nodes each computes, its
// outputs, its library epilogue) and the static memory plan (arena against its lower bound,
// the other regions, the workspace, the buffers live at the arena's peak), as text for people
// and as JSON for scripts; and one fused kernel (--kernel NAME).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "kernels/codegen/kernel.pb.h"
#include "runtime/plan/plan.pb.h"

namespace ampc::report {

// Keys: model, target, precision, steps, kernels (the count), kernel_list [{index, step,
// name, op, kernel, segments, nodes, outputs [{dtype, shape}], epilogue}], memory_planned,
// alignment, arena_bytes, arena_lower_bound_bytes, arena_ratio, activation_bytes (arena
// buffers' storage without reuse), state_bytes, constant_bytes, input_bytes,
// workspace_bytes, arena_peak {step, bytes, by_dtype, buffers [{name, dtype, shape, bytes}]},
// notes.
nlohmann::ordered_json plan_summary_json(const plan::Plan& plan);
std::string plan_summary_text(const plan::Plan& plan, const std::string& title);

// The fused kernel named `name`; an Error naming the plan's kernels when it has none such.
const kernels::KernelDef& find_kernel(const plan::Plan& plan, const std::string& name);

// The CUDA architecture of the plan's target ("cuda:sm_90" -> "sm_90"); "" for "cpu".
std::string target_sm(const plan::Plan& plan);

// The PTX stored in the plan for its target; an Error for a plan compiled for the CPU.
std::string kernel_ptx(const plan::Plan& plan, const kernels::KernelDef& kernel);

// A kernel's definition: iteration space, operands, instructions, outputs, the steps that
// run it.
std::string kernel_def_text(const plan::Plan& plan, const kernels::KernelDef& kernel);

}  // namespace ampc::report
