// `ampc train`'s diagnoses of non-finite values (--find-nonfinite, the consecutive-skips
// guard): a step's batches run again with a check after every plan step, on the CPU backend,
// naming where the first NaN or infinity came from.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend.h"
#include "runtime/cpu/executor.h"
#include "runtime/plan/plan.pb.h"

namespace ampc::cli {

// One plan run of an optimizer step: its batch, and the state before it (--find-nonfinite).
struct MicroBatch {
  std::map<std::string, rt::Tensor> state_before, batch;
};

// The executor diagnoses run on, made when first asked for: an ONNX model's training step
// compiled without fusion, where every step is one ONNX node so that the origin names that
// node; a .plan keeps its own steps (a fused kernel is named by its nodes), run by the
// training executor itself when it is the CPU one.
class DiagnosisExecutor {
 public:
  // `compile_unfused`: the training plan without fusion (called at most once); null when the
  // plan's own steps are to be used.
  DiagnosisExecutor(rt::Backend& training, std::function<plan::Plan()> compile_unfused);
  rt::cpu::Executor& get();

 private:
  rt::Backend& training_;
  std::function<plan::Plan()> compile_unfused_;
  std::unique_ptr<rt::cpu::Executor> own_;
};

// find_origin over the micro-batches of optimizer step `step`, in order, each from its own
// state or from `state` when given; the first origin found, naming the micro-batch when
// there are several, or that none appears (a transient overflow).
std::string first_origin(rt::cpu::Executor& executor, const std::vector<MicroBatch>& runs,
                         const std::map<std::string, rt::Tensor>* state, uint64_t seed,
                         int64_t step);

// The training guard's message: too many skipped steps in a row means the model produces
// non-finite values that scaling cannot cure (a NaN in the forward, a diverged parameter...).
std::string consecutive_skips_message(const rt::Backend& executor, int64_t step, int64_t skips,
                                      float loss);

}  // namespace ampc::cli
