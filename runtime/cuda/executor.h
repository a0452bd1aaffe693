// Runs a plan on one NVIDIA GPU. At load: the device is opened (a clean "no CUDA device"
// error without one), the generated kernels are loaded from the plan's PTX, every step
// becomes a launch closure (cuBLASLt, cuDNN, hand-written kernels, generated kernels), the
// device memory is allocated once from the plan's memory plan, the step runs once eagerly
// (state restored afterwards) and is then captured as one CUDA Graph. Per step: the inputs
// go from pinned host staging to their fixed device buffers (one cudaMemcpyAsync), one
// cudaGraphLaunch runs every step, copies the outputs into one block and applies the state
// updates, and one cudaMemcpyAsync brings the output block to pinned memory. The host waits
// only in collect(), state(), load_state() and run(). Each run starts by clearing the error
// flags (a memset node), so a run reports only the out-of-range indices and labels it met.
// See docs/cuda-backend.md.
#pragma once

#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend.h"
#include "runtime/cuda/device.h"
#include "runtime/cuda/device_memory.h"
#include "runtime/cuda/error_flags.h"
#include "runtime/cuda/step_context.h"
#include "runtime/cuda/step_graph.h"
#include "runtime/plan/plan.pb.h"

namespace ampc::rt::cuda {

class PtxLibrary;

// What the host did since the executor was built (load not included).
struct Counters {
  int64_t steps = 0;           // runs submitted
  int64_t graph_launches = 0;  // cudaGraphLaunch calls
  int64_t host_syncs = 0;      // waits of the host for the device (stream syncs, blocking copies)
  int64_t async_copies = 0;    // cudaMemcpyAsync calls outside the graph
};

// AMPC_CUDA_SYNC_DEBUG set to anything but "" or "0": ExecutorOptions::sync_debug's default.
bool sync_debug_from_env();

struct ExecutorOptions {
  int device = 0;              // cuda:N
  int64_t pipeline_depth = 1;  // runs in flight before submit() waits (pinned staging slots)
  // The eager first run synchronises after each step's launches and names the step whose
  // work failed on the device (describe_step: ONNX node, op, kernel). Off, a fault is seen
  // only at the end of the eager run, without its step.
  bool sync_debug = sync_debug_from_env();
};

class Executor : public Backend {
 public:
  // Throws ampc::Error for a machine without a usable GPU, a plan without a memory plan or
  // with data-dependent shapes, kernels without code for this device, and (all at once) the
  // steps whose ops have no CUDA implementation.
  explicit Executor(plan::Plan plan, ExecutorOptions options = {});
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;
  ~Executor() override;

  const plan::Plan& plan() const override { return plan_; }
  // submit() + collect(): this run's outputs (those of earlier uncollected runs are dropped).
  std::map<std::string, Tensor> run(const std::map<std::string, Tensor>& inputs) override;
  std::map<std::string, Tensor> state() const override;
  void load_state(const std::map<std::string, Tensor>& values) override;
  // Randomness of ops without a seed attribute (training-mode Dropout), as the CPU executor's:
  // each submit() writes the run's key (kernels/shared/dropout_math.h's run_key of `seed` and
  // the runs submitted so far, counting from runs_done) with the run's inputs, so the masks
  // are the CPU backend's for the same seed and run.
  void set_random_state(uint64_t seed, int64_t runs_done) override {
    seed_ = seed;
    runs_done_ = runs_done;
  }

  int64_t max_pending() const override { return depth_; }
  void submit(const std::map<std::string, Tensor>& inputs) override;
  std::vector<std::map<std::string, Tensor>> collect() override;

  const Counters& counters() const { return counters_; }
  const DeviceInfo& device() const { return device_; }
  // Device bytes this executor allocated (arena + workspace, state, constants + I/O).
  int64_t device_bytes() const { return memory_->device_bytes(); }
  // Steps that launch work (views and in-place views launch nothing), graph nodes.
  int64_t launching_steps() const { return launching_steps_; }
  size_t graph_nodes() const { return graph_.nodes(); }

 private:
  void build_steps();
  void check_state_updates() const;
  // The whole step on `stream`; `eager` (the first run, outside the capture) checks each
  // step's launches and, with sync_debug, waits for each step's work.
  void enqueue_step(cudaStream_t stream, bool eager) const;
  void check_eager_step(int i, cudaStream_t stream) const;
  void copy_output(int k, cudaStream_t stream) const;
  void sync() const;
  std::map<std::string, Tensor> outputs_of(int64_t slot) const;

  // The stream, library handles and pinned staging, released last.
  struct Resources {
    cudaStream_t stream = nullptr;
    Handles handles;
    char* pinned = nullptr;  // depth_ slots of (inputs region image, output block)
    ~Resources();
  };

  plan::Plan plan_;
  DeviceInfo device_;
  int64_t depth_ = 1;
  bool sync_debug_ = false;
  Resources res_;
  std::unique_ptr<PtxLibrary> ptx_;
  std::unique_ptr<DeviceMemory> memory_;
  std::vector<Launch> launches_;  // per step; empty for steps that launch nothing
  // Plan outputs (indices into Plan.outputs) copied into the output block right after the
  // step that writes them (per step), or at the end of the step (inputs, state, constants).
  std::vector<std::vector<int>> output_copies_;
  std::vector<int> end_copies_;
  int64_t launching_steps_ = 0;
  uint64_t seed_ = 0;      // set_random_state
  int64_t runs_done_ = 0;  // runs submitted, from set_random_state's count
  StepGraph graph_;
  int64_t slot_bytes_ = 0, slot_outputs_ = 0;  // a slot's size, its output block's offset
  PendingRuns pending_{1};                     // runs submitted and not yet collected
  std::vector<std::map<std::string, Tensor>> ready_;
  mutable Counters counters_;
};

}  // namespace ampc::rt::cuda
