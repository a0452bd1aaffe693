// The phase the compiler recorded for a step (plan.proto Step.source_phases), and its name as
// reports, the step view and the non-finite search print it.
#pragma once

#include "runtime/plan/plan.pb.h"

namespace ampc::plan {

// The phase of the step's first source node; FORWARD for a step without one.
inline StepPhase first_phase(const Step& s) {
  return s.source_phases_size() ? s.source_phases(0) : FORWARD;
}

// "forward", "backward", "loss scaling", "optimizer", "statistics"; an unspecified phase is
// the forward.
constexpr const char* phase_name(StepPhase phase) {
  switch (phase) {
    case BACKWARD:
      return "backward";
    case LOSS_SCALING:
      return "loss scaling";
    case OPTIMIZER:
      return "optimizer";
    case STATISTICS:
      return "statistics";
    default:
      return "forward";
  }
}

}  // namespace ampc::plan
