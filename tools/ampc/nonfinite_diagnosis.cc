#include "tools/ampc/nonfinite_diagnosis.h"

#include <cmath>
#include <cstdio>
#include <optional>

#include "runtime/cpu/nonfinite_search.h"
#include "runtime/dist/collectives.h"
#include "tools/ampc/step_outputs.h"

namespace ampc::cli {
namespace {

constexpr const char* kTransient =
    "no non-finite value when the step runs again (a transient overflow)";

// Runs `batch` again from `state` (with the random stream of run `run`, counted from 0) with
// a check after every plan step and says where the first non-finite value came from, or
// nothing when none appears; leaves the executor as it found it (state, and the random
// stream set to `runs_done`).
std::optional<std::string> find_origin(rt::cpu::Executor& executor,
                                       const std::map<std::string, rt::Tensor>& state,
                                       const std::map<std::string, rt::Tensor>& batch,
                                       uint64_t seed, int64_t run, int64_t runs_done) {
  const auto now = executor.state();
  const rt::dist::RankLocal local;  // data parallel: this rank's batch alone
  executor.load_state(state);
  executor.set_random_state(seed, run);
  const auto origin = rt::cpu::find_nonfinite_origin(executor, batch);
  executor.load_state(now);
  executor.set_random_state(seed, runs_done);
  if (!origin) return std::nullopt;
  return rt::cpu::describe(*origin);
}

}  // namespace

DiagnosisExecutor::DiagnosisExecutor(rt::Backend& training,
                                     std::function<plan::Plan()> compile_unfused)
    : training_(training), compile_unfused_(std::move(compile_unfused)) {}

rt::cpu::Executor& DiagnosisExecutor::get() {
  if (!compile_unfused_) {
    if (auto* cpu = dynamic_cast<rt::cpu::Executor*>(&training_)) return *cpu;
    if (!own_) own_ = std::make_unique<rt::cpu::Executor>(training_.plan());
    return *own_;
  }
  if (!own_) own_ = std::make_unique<rt::cpu::Executor>(compile_unfused_());
  return *own_;
}

std::string first_origin(rt::cpu::Executor& executor, const std::vector<MicroBatch>& runs,
                         const std::map<std::string, rt::Tensor>* state, uint64_t seed,
                         int64_t step) {
  const auto n = static_cast<int64_t>(runs.size());
  for (int64_t k = 0; k < n; ++k) {
    const MicroBatch& r = runs[static_cast<size_t>(k)];
    const auto origin = find_origin(executor, state ? *state : r.state_before, r.batch, seed,
                                    (step - 1) * n + k, step * n);
    if (!origin) continue;
    if (n == 1) return *origin;
    return "micro-batch " + std::to_string(k + 1) + " of " + std::to_string(n) + ": " + *origin;
  }
  return kTransient;
}

std::string consecutive_skips_message(const rt::Backend& executor, int64_t step, int64_t skips,
                                      float loss) {
  char buf[64];
  std::string m = std::to_string(skips) + " consecutive steps skipped (steps " +
                  std::to_string(step - skips + 1) + " to " + std::to_string(step) +
                  "): their gradients were not finite";
  if (const auto s = current_scale(executor)) {
    std::snprintf(buf, sizeof buf, "%g", *s);
    m += "; the loss scale is now " + std::string(buf);
  }
  if (!std::isfinite(loss)) {
    const char* what = std::isnan(loss) ? "nan" : (loss > 0 ? "inf" : "-inf");
    m += std::string("; the loss itself is ") + what +
         ", so the forward pass already produces non-finite values (check the data and the "
         "learning rate)";
  }
  return m +
         ". Stopping instead of training on; raise --max-consecutive-skips (0: no limit) "
         "to go on regardless";
}

}  // namespace ampc::cli
