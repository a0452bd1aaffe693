// Helpers of the CPU elementwise and tensor-op tests: attributes on a plan step, and one
// operator run through the registry.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/plan/plan.pb.h"
#include "runtime/tensor.h"

namespace ampc::rt::cpu::testing {

using AttrFn = std::function<void(plan::Step&)>;
void set_int(plan::Step& s, const std::string& name, int64_t v);
void set_float(plan::Step& s, const std::string& name, float v);
void set_ints(plan::Step& s, const std::string& name, const std::vector<int64_t>& v);
void set_string(plan::Step& s, const std::string& name, const std::string& v);
// Runs `op` on a step with these inputs and attributes; returns its outputs.
std::vector<Tensor> run_op(const std::string& op, const std::vector<const Tensor*>& inputs,
                           int num_outputs = 1, const AttrFn& attrs = {}, int64_t opset = 17);

}  // namespace ampc::rt::cpu::testing
