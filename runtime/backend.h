// What the training loop and `ampc run` need of an executor, whichever device runs the plan:
// the CPU executor (runtime/cpu/executor.h) and the CUDA one (runtime/cuda/executor.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/plan/plan.pb.h"
#include "runtime/tensor.h"

namespace ampc::rt {

class Backend {
 public:
  virtual ~Backend() = default;

  // The plan it runs, for its steps, buffers and signature. The CPU backend drops the initial
  // bytes of the STATE buffers once loaded (state() has the values), so a plan to save or to
  // run elsewhere comes from the compiler or the file, not from here.
  virtual const plan::Plan& plan() const = 0;
  // Binds inputs by name (all of them, with the plan's types), runs every step, returns the
  // outputs by name (waits for them).
  virtual std::map<std::string, Tensor> run(const std::map<std::string, Tensor>& inputs) = 0;
  // The current value of every STATE buffer, by name.
  virtual std::map<std::string, Tensor> state() const = 0;
  // Sets every STATE buffer to values[its name]; throws ampc::Error naming a missing or
  // mistyped one (then nothing changed).
  virtual void load_state(const std::map<std::string, Tensor>& values) = 0;
  // Randomness of ops without a seed (see the CPU executor).
  virtual void set_random_state(uint64_t seed, int64_t runs_done) = 0;

  // Pipelined runs, for backends that compute asynchronously: submit() starts a run without
  // waiting for it; collect() waits for every run submitted since the last collect() and
  // returns their outputs in order. At most max_pending() runs should be in flight (more
  // make submit() wait). The default runs at once and queues the outputs.
  virtual int64_t max_pending() const { return 1; }
  virtual void submit(const std::map<std::string, Tensor>& inputs) { done_.push_back(run(inputs)); }
  virtual std::vector<std::map<std::string, Tensor>> collect() {
    std::vector<std::map<std::string, Tensor>> out;
    out.swap(done_);
    return out;
  }

 private:
  std::vector<std::map<std::string, Tensor>> done_;
};

}  // namespace ampc::rt
