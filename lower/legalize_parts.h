// What the legalize stage's files share (lower/legalize.cc, legalize_movement.cc): how an op's
// attributes are read and how its parameters are filled. Internal to lower/.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "lower/legalize.h"
#include "runtime/cpu/op_context.h"

namespace ampc::lower::detail {

// Attributes are read through the CPU op context, so defaults, kinds and messages are the
// ones every op uses ("node 'x' (Softmax): attribute 'axis' is not an int").
using Attrs = rt::cpu::OpContext;

// Fills one op's parameters from its attributes and operands; by op key (ops/op_key.h).
using Filler = std::function<void(const Attrs&, plan::Step&, const StepOperands&)>;
using Fillers = std::map<std::string, Filler>;

// The rank of input `input` when it is given and known at compile time.
std::optional<int64_t> known_rank(const StepOperands& in, int input);

// Whether input `input` is given (in the step, or as an operand of a step run on tensors).
bool has_input(const plan::Step& step, const StepOperands& in, int input);

// Transpose, Concat, Split, Gather, Cast, Slice, Pad, ampc.AllReduceStart / Wait.
void add_data_movement_fillers(Fillers& t);

}  // namespace ampc::lower::detail
