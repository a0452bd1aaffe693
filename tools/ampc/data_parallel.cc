#include "tools/ampc/data_parallel.h"

#include <csignal>
#include <cstdio>
#include <iostream>

#include "base/error.h"
#include "runtime/dist/collectives.h"
#include "runtime/plan/plan_file.h"
#ifdef AMPC_HAVE_MPI
#include "runtime/dist/mpi_collectives.h"
#endif
#ifdef AMPC_HAVE_CUDA
#include "runtime/cuda/nccl_comm.h"
#endif

namespace ampc::cli {
namespace {

uint64_t fnv1a(const std::string& bytes, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

#ifdef AMPC_HAVE_MPI
class MpiRun final : public DataParallelRun {
 public:
  explicit MpiRun(const DataParallelArgs& a)
      : mpi_({.timeout_s = a.comm_timeout, .overlap = !a.no_overlap}),
        mpi_overlap_(!a.no_overlap) {}
  int rank() const override { return mpi_.rank(); }
  int world() const override { return mpi_.world(); }
  int local_rank() const override { return mpi_.local_rank(); }

  void check_same_plan(const plan::Plan& p, const std::string& run_key) override {
    const uint64_t mine = fnv1a(run_key, fnv1a(plan::serialize_plan(p)));
    const auto all = mpi_.all_gather(mine, "the start-up check of the plans");
    for (int r = 0; r < world(); ++r) {
      if (all[static_cast<size_t>(r)] == all[0]) continue;
      char buf[128];
      std::snprintf(
          buf, sizeof buf,
          "rank %d's plan or data options (checksum %016llx) differ from rank 0's (%016llx)", r,
          static_cast<unsigned long long>(all[static_cast<size_t>(r)]),
          static_cast<unsigned long long>(all[0]));
      throw Error(std::string(buf) +
                  ": every rank must train the same plan, compiled with the same options, on "
                  "the same data with the same --seed and --shuffle");
    }
  }
  int64_t check_same_state(const std::map<std::string, rt::Tensor>& state) override {
    for (const auto& [name, t] : state) {
      const auto bytes = std::string(static_cast<const char*>(t.raw()), t.nbytes());
      const auto all = mpi_.all_gather(fnv1a(bytes), "the replica check of '" + name + "'");
      for (int r = 1; r < world(); ++r) {
        if (all[static_cast<size_t>(r)] != all[0])
          throw Error("--check-replicas: state '" + name + "' differs between rank 0 and rank " +
                      std::to_string(r));
      }
    }
    return static_cast<int64_t>(state.size());
  }
  void sum(std::vector<double>& values, const std::string& what) override {
    mpi_.sum(values, what);
  }
  void set_phase(const std::string& phase) override { mpi_.set_phase(phase); }
  void start_gpu_communication() override {
#ifdef AMPC_HAVE_CUDA
    rt::cuda::init_nccl(mpi_);
#else
    throw Error("this ampc was built without the CUDA backend");
#endif
  }
  ~MpiRun() override {
#ifdef AMPC_HAVE_CUDA
    rt::cuda::finish_nccl();
#endif
  }
  std::string comm_summary(int64_t steps) const override {
    const rt::dist::CommStats s = mpi_.stats();
    if (s.buckets == 0 || steps < 1) return "";
    const double n = static_cast<double>(steps);
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "%d ranks, %.2f MB all-reduced per step in %lld buckets, %.2f ms in flight and "
                  "%.2f ms waited per step (%s)",
                  world(), static_cast<double>(s.bytes) / n / 1e6,
                  static_cast<long long>(static_cast<double>(s.buckets) / n + 0.5),
                  s.in_flight_s / n * 1e3, s.waited_s / n * 1e3,
                  mpi_overlap_ ? "overlapped with the backward" : "--no-comm-overlap");
    return buf;
  }
  [[noreturn]] void abort(int code) {
    mpi_.abort(code);
  }

 private:
  rt::dist::MpiCollectives mpi_;
  bool mpi_overlap_;
};
#endif

}  // namespace

void add_data_parallel_options(CLI::App* cmd, DataParallelArgs& a, bool train) {
  if (!train) {
    cmd->add_flag("--data-parallel", a.data_parallel,
                  "All-reduce the gradients over the ranks of `mpirun -np N ampc train` "
                  "(implied when `ampc train` itself runs under mpirun with N > 1)");
  }
  cmd->add_option("--reduce-dtype", a.reduce_dtype,
                  "Data parallel: the dtype gradients are all-reduced in: fp32 (default), fp16, "
                  "bf16")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}))
      ->each([&a](const std::string&) { a.compile_options_given.push_back("--reduce-dtype"); });
  cmd->add_option("--bucket-kib", a.bucket_kib,
                  "Data parallel: gradients per all-reduce bucket, in KiB (default 1024)")
      ->check(CLI::PositiveNumber)
      ->each([&a](const std::string&) { a.compile_options_given.push_back("--bucket-kib"); });
  cmd->add_flag("--sync-batchnorm", a.sync_batchnorm,
                "Data parallel: every training-mode BatchNormalization normalises with the "
                "statistics of the global batch (every rank's samples), as PyTorch's "
                "SyncBatchNorm: 2 blocking all-reduces per BatchNorm in the forward, 2 in the "
                "backward (on GPUs through NCCL)");
  if (train) {
    cmd->add_option("--comm-timeout", a.comm_timeout,
                    "Data parallel: seconds a collective may take before the run stops, naming "
                    "the rank that did not join it (default 300)")
        ->check(CLI::PositiveNumber);
    cmd->add_flag("--check-replicas", a.check_replicas,
                  "Data parallel: after training, check that every rank holds the same state, "
                  "bit for bit (per-rank BatchNorm statistics differ by design, unless "
                  "--sync-batchnorm)");
    cmd->add_flag("--no-comm-overlap", a.no_overlap,
                  "Data parallel: wait for each bucket's all-reduce as soon as it starts (to "
                  "measure what overlapping it with the backward hides)");
  }
}

void set_data_parallel_options(const DataParallelArgs& a, int world, compiler::CompileOptions& o) {
  auto& dp = o.data_parallel;
  // Under mpirun (even -np 1) --sync-batchnorm implies data parallel, as N > 1 ranks do.
  dp.enabled = a.data_parallel || world > 1 || (a.sync_batchnorm && rt::dist::current());
  dp.sync_batchnorm = a.sync_batchnorm;
  dp.reduce_dtype = a.reduce_dtype == "fp16"   ? DType::kFloat16
                    : a.reduce_dtype == "bf16" ? DType::kBFloat16
                                               : DType::kUndefined;
  dp.bucket_bytes = a.bucket_kib * 1024;
}

bool plan_reduces_gradients(const plan::Plan& p) {
  for (const auto& s : p.steps()) {
    if (s.op() == "AllReduceStart") return true;
  }
  return false;
}

std::string run_key(const std::string& data, const std::string& eval_data, double holdout,
                    bool shuffle, uint64_t seed, int64_t steps, const std::string& resume) {
  return data + '\n' + eval_data + '\n' + std::to_string(holdout) + '\n' + std::to_string(shuffle) +
         '\n' + std::to_string(seed) + '\n' + std::to_string(steps) + '\n' + resume;
}

int agree_on_step(DataParallelRun& dp, int64_t step, std::vector<double>& loss_sums, bool skipped,
                  int signal) {
  if (dp.world() == 1) return signal;
  std::vector<double> v = loss_sums;
  v.push_back(skipped ? 1.0 : 0.0);
  v.push_back(signal != 0 ? 1.0 : 0.0);
  dp.sum(v, "the loss average of step " + std::to_string(step));
  const double n = dp.world();
  for (size_t i = 0; i < loss_sums.size(); ++i) loss_sums[i] = v[i] / n;
  const double skips = v[loss_sums.size()];
  if (skips != 0 && skips != n) {
    throw Error("step " + std::to_string(step) + ": " + std::to_string(static_cast<int>(skips)) +
                " of " + std::to_string(dp.world()) +
                " ranks skipped it (non-finite gradients): the ranks have diverged");
  }
  if (signal == 0 && v.back() > 0) return SIGTERM;
  return signal;
}

void with_data_parallel_run(const DataParallelArgs& args,
                            const std::function<void(DataParallelRun&)>& body) {
#ifdef AMPC_HAVE_MPI
  if (rt::dist::launched_by_mpi()) {
    std::unique_ptr<MpiRun> run;
    try {
      run = std::make_unique<MpiRun>(args);
      body(*run);
    } catch (const std::exception& e) {
      if (!run) throw;  // MPI did not start: main prints it
      const bool user = dynamic_cast<const Error*>(&e) != nullptr;
      // One write, so that the lines of several ranks do not interleave.
      const std::string line = std::string(user ? "ampc: error: " : "ampc: internal error: ") +
                               "rank " + std::to_string(run->rank()) + ": " + e.what() + "\n";
      std::fwrite(line.data(), 1, line.size(), stderr);
      std::fflush(stderr);
      run->abort(1);
    }
    return;
  }
#endif
  (void)args;
  DataParallelRun alone;
  body(alone);
}

}  // namespace ampc::cli
