// Data-parallel training for `ampc train` under mpirun (docs/data-parallel.md): the run's
// ranks, the options, and what the training loop asks of them. A process not launched by an
// MPI launcher is a world of one rank and MPI is never initialised: `ampc train` alone
// behaves exactly as without this file.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "driver/pipeline.h"
#include "runtime/plan/plan.pb.h"
#include "runtime/tensor.h"

namespace ampc::cli {

struct DataParallelArgs {
  bool data_parallel =
      false;  // ampc compile --data-parallel (ampc train: implied by mpirun -np N>1)
  std::string reduce_dtype = "fp32";  // --reduce-dtype fp32|fp16|bf16
  int64_t bucket_kib = 1024;          // --bucket-kib
  double comm_timeout = 300;          // --comm-timeout S (train)
  bool no_overlap = false;            // --no-comm-overlap (train; a measurement aid)
  bool check_replicas = false;        // --check-replicas (train)
  bool sync_batchnorm = false;        // --sync-batchnorm (passes/sync_batch_norm.h)
  // The options given that shape the compiled step (a plan file cannot take them).
  std::vector<std::string> compile_options_given;
};

// --data-parallel (compile only), --reduce-dtype, --bucket-kib, --sync-batchnorm.
void add_data_parallel_options(CLI::App* cmd, DataParallelArgs& args, bool train);
// The compiler's options from the arguments; `world`: the run's ranks (train: > 1 implies
// data parallel).
void set_data_parallel_options(const DataParallelArgs& args, int world,
                               compiler::CompileOptions& options);
// Whether the plan all-reduces its gradients (it has ampc.AllReduceStart steps).
bool plan_reduces_gradients(const plan::Plan& plan);

class DataParallelRun {
 public:
  virtual ~DataParallelRun() = default;
  virtual int rank() const { return 0; }
  virtual int world() const { return 1; }
  virtual int local_rank() const { return 0; }
  // Refuses a run whose ranks train different plans or read data differently (a checksum of
  // the plan and of `run_key`, gathered from every rank).
  virtual void check_same_plan(const plan::Plan&, const std::string& /*run_key*/) {}
  // --check-replicas: throws ampc::Error naming the first state (by name) whose bytes differ
  // between this rank and another, and that rank; returns the number of states compared.
  virtual int64_t check_same_state(const std::map<std::string, rt::Tensor>& state) {
    return static_cast<int64_t>(state.size());
  }
  // Sums over the ranks, in place (identity alone).
  virtual void sum(std::vector<double>& /*values*/, const std::string& /*what*/) {}
  // A data-parallel plan on GPUs: creates the NCCL communicator of the ranks on the current
  // device (runtime/cuda/nccl_comm.h). Nothing alone.
  virtual void start_gpu_communication() {}
  // Names the step in a timeout's message.
  virtual void set_phase(const std::string&) {}
  // A line on the all-reduces of `steps` optimizer steps (time in flight, time waited),
  // empty alone.
  virtual std::string comm_summary(int64_t /*steps*/) const { return ""; }
};

// What every rank must agree on besides the plan (check_same_plan's run_key): the data and
// how it is read, the steps to run, the checkpoint resumed from.
std::string run_key(const std::string& data, const std::string& eval_data, double holdout,
                    bool shuffle, uint64_t seed, int64_t steps, const std::string& resume);

// After a step's runs, several ranks: `loss_sums` becomes the mean over the ranks; a rank
// that skipped the step while another did not is an error (found_inf reads reduced
// gradients, so this does not happen); returns `signal` (an interrupt this rank received
// before) or, when only another rank received one, SIGTERM's number, so every rank stops
// after the same step. One rank: returns `signal`.
int agree_on_step(DataParallelRun& dp, int64_t step, std::vector<double>& loss_sums, bool skipped,
                  int signal);

// Runs `body` with the run's ranks: MPI when launched by mpirun, else one rank. Under MPI an
// error on one rank prints "ampc: error: rank R: ..." and ends every rank (MPI_Abort), so no
// rank waits for one that has stopped.
void with_data_parallel_run(const DataParallelArgs& args,
                            const std::function<void(DataParallelRun&)>& body);

}  // namespace ampc::cli
