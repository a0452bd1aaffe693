// The checks every backend makes of what a caller hands it, before it changes anything: a
// step's inputs (`Backend::run`, `submit`) and a plan's state (`Backend::load_state`).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runtime/plan/plan.pb.h"
#include "runtime/tensor.h"

namespace ampc::rt {

// A buffer's static type as messages print it: "float32[2,3]"; "[*]" for a shape known only
// when the step runs.
std::string buffer_type(const plan::Buffer& b);

// The value for each input binding of `plan`, as (buffer id, value) pairs in binding order;
// throws ampc::Error naming an unknown name, a missing input or a mistyped one.
std::vector<std::pair<int, const Tensor*>> checked_inputs(
    const plan::Plan& plan, const std::map<std::string, Tensor>& inputs);

// The value for each STATE buffer of `plan` but its rounded copies (state_copies.h), as
// (buffer id, value) pairs in buffer order;
// throws ampc::Error naming the first missing or mistyped one, so that a backend changes
// nothing unless every value fits.
std::vector<std::pair<int, const Tensor*>> checked_state_values(
    const plan::Plan& plan, const std::map<std::string, Tensor>& values);

}  // namespace ampc::rt
