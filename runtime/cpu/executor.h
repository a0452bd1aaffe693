// Runs a plan's steps in order on the CPU. Constant and state buffers are loaded once.
// Activations and outputs live where the plan's static memory plan puts them: one arena,
// allocated at construction, each buffer a view at its planned offset (views and in-place
// writes share storage as the plan says), so every CPU run rehearses the memory layout the
// GPU uses. Buffers the plan does not place (no memory plan, data-dependent shapes) get
// storage of their own, freed after their last reader. Fused kernels (Plan.kernels) are
// compiled for this machine at construction (kernel_step.h); a kernel output that aliases
// the STATE buffer it updates (Buffer.alias_of) is computed in place into that state.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend.h"
#include "runtime/cpu/kernel_step.h"
#include "runtime/cpu/library_step.h"
#include "runtime/cpu/op_registry.h"
#include "runtime/plan/plan.pb.h"
#include "runtime/tensor.h"

namespace ampc::rt::cpu {

class Executor : public Backend {
 public:
  // Refuses (ampc::Error) a plan with a step the CPU backend cannot run, naming the op and node.
  explicit Executor(plan::Plan plan);
  // Steps keep pointers into the plan: an executor stays where it was built.
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;
  ~Executor() override;

  // Binds inputs by name (all of them, with the plan's types), runs every step, returns
  // the outputs by name.
  std::map<std::string, Tensor> run(const std::map<std::string, Tensor>& inputs) override;

  const plan::Plan& plan() const override { return plan_; }
  // The current value of every STATE buffer (parameters, optimizer state), by name.
  std::map<std::string, Tensor> state() const override;
  // Sets every STATE buffer to values[its name] (resuming from a checkpoint); other names are
  // ignored. Throws ampc::Error, naming the buffer, when a value is missing or has another
  // element type or shape; then no state has changed.
  void load_state(const std::map<std::string, Tensor>& values) override;

  // Randomness of ops without a seed attribute (training-mode Dropout): a function of `seed`,
  // the number of runs done (the training step; 0 at construction) and the plan step, so the
  // same seed gives the same masks, and a resumed run (runs_done = steps done) the same masks
  // as an uninterrupted one.
  void set_random_state(uint64_t seed, int64_t runs_done) override {
    seed_ = seed;
    runs_done_ = runs_done;
  }

  // Profiling: when set, run() times every step and reports its index and wall-clock
  // seconds to the hook. Unset (the default), steps are not timed.
  using StepHook = std::function<void(int step, double seconds)>;
  void set_step_hook(StepHook hook) { step_hook_ = std::move(hook); }

  // Diagnosis: when set, run() shows every step's input and output tensors (null where
  // omitted) to the observer after the step ran; the observer may throw to stop the run
  // (then no state update of that run is applied).
  using StepObserver = std::function<void(int step, const std::vector<const Tensor*>& inputs,
                                          const std::vector<const Tensor*>& outputs)>;
  void set_step_observer(StepObserver observer) { step_observer_ = std::move(observer); }

 private:
  void run_step(size_t index);
  void run_kernel(size_t index, const std::vector<const Tensor*>& inputs);
  void place_in_state(size_t index);
  // Every rounded copy (Buffer.copy_of) set to its master's value, rounded.
  void round_copies();
  void drop_initial_state_bytes();
  void place_in_arena();
  void prepare_library_steps();
  // Views of the arena for the outputs of step `index` that the memory plan places.
  void bind_placed_outputs(size_t index);
  void copy_outputs_of(size_t index);
  // Copies of the inputs of step `index` whose memory its outputs share (undefined tensors
  // for the others).
  std::vector<Tensor> inputs_overwritten_by(size_t index,
                                            const std::vector<const Tensor*>& ins) const;
  // Where buffer `id` lives: its own slot, or the state it is computed into in place.
  int slot(int id) const { return slot_[id]; }

  plan::Plan plan_;
  std::vector<const CpuOp*> ops_;  // per step (null for kernel steps)
  std::unique_ptr<KernelSteps> kernels_;
  std::vector<KernelCall> calls_;                    // per step (kernel steps only)
  std::vector<std::unique_ptr<FoldedGemm>> folded_;  // per step (GEMMs with folded work)
  std::vector<int> slot_;                            // per buffer
  std::vector<std::vector<int>> free_after_;  // per step: activation buffers read for the last time
  std::vector<Tensor> values_;                // per buffer
  struct FreeBytes {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, FreeBytes> arena_;  // the memory plan's arena (null: none)
  std::vector<uint8_t*> placed_;               // per buffer: its planned place, or null
  // Outputs are copied out as soon as their step has written them: a buffer made an output
  // after memory planning (the loss scale, found_inf) may share arena storage with later ones.
  std::vector<std::vector<int>> output_copies_;  // per step: indices into plan.outputs
  std::vector<int> end_copies_;                  // outputs no step writes
  std::vector<Tensor> output_values_;            // per plan output, during a run
  StepHook step_hook_;
  StepObserver step_observer_;
  uint64_t seed_ = 0;
  int64_t runs_done_ = 0;
};

// Every op the plan needs that the CPU backend lacks, as "Op (node 'n')" strings.
std::vector<std::string> missing_cpu_ops(const plan::Plan& plan);

}  // namespace ampc::rt::cpu
