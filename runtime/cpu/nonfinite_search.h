// Finding where a non-finite value first appears in a step (`ampc train --find-nonfinite`,
// and the diagnosis when too many steps were skipped): the step is run again with a check
// after every step of the plan, and the first plan step that *produces* a NaN from inputs
// without NaN, or an infinity from finite inputs, is reported with its ONNX node, op,
// dtype and the magnitude of its inputs. Steps that only pass on what they were given (a
// Where choosing a -inf mask constant, an Add of an infinity) are not origins; a graph
// input or a piece of state that already holds non-finite values is reported as such.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/cpu/executor.h"

namespace ampc::rt::cpu {

struct TensorMagnitude {
  std::string name;    // the plan buffer
  std::string type;    // "f16[32,64]"
  double max_abs = 0;  // over the finite elements
  int64_t nan = 0;     // NaN elements
  int64_t inf = 0;     // infinite elements
};

struct NonFiniteOrigin {
  // Where: a plan step (step >= 0), or a graph input / state buffer (step == -1).
  int step = -1;
  // The ONNX node the step computes ("" for an input or state); a fused kernel's nodes,
  // comma-separated (the search names steps: an unfused plan names the very node).
  std::string node;
  std::string op;         // "Mul", "ampc.ConvGrad"
  std::string phase;      // "forward", "backward", "optimizer", "input", "state"
  TensorMagnitude value;  // the first non-finite output (or the input / state itself)
  std::vector<TensorMagnitude> inputs;
};

// Runs one step of `exec` on `inputs` with the check; returns the origin, or nullopt when
// the step computes only finite values. The run stops at the origin: no state update of
// that run is applied (an uninterrupted run applies them as usual).
std::optional<NonFiniteOrigin> find_nonfinite_origin(Executor& exec,
                                                     const std::map<std::string, Tensor>& inputs);

// Several lines: where, what, and the inputs' magnitudes.
std::string describe(const NonFiniteOrigin& origin);

}  // namespace ampc::rt::cpu
