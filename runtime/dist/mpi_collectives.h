// Collectives (collectives.h) over MPI: MPI_Iallreduce on a duplicate of MPI_COMM_WORLD,
// progressed by a thread of its own so that a bucket's sum advances while the backward
// computes (Open MPI progresses non-blocking collectives only inside MPI calls), waited with a
// timeout. A heartbeat names the rank that stalls a collective: every rank sends the count of
// collectives it has joined to every other rank (small non-blocking messages on a second
// duplicate communicator); the rank whose wait times out names the ranks whose count is behind
// its own (dead or hung) in its error.
#pragma once

#include <memory>

#include "runtime/dist/collectives.h"

namespace ampc::rt::dist {

// Whether this process was started by an MPI launcher (mpirun/mpiexec of Open MPI or MPICH,
// srun with PMIx): the variables they set. Only then is MPI initialised, so a plain `ampc
// train` never loads MPI.
bool launched_by_mpi();

struct MpiOptions {
  double timeout_s = 300;  // a collective not complete after this long is an error
  // Overlap: false waits for each bucket's sum as soon as it is started (the same
  // communication without overlap, to measure what overlap hides).
  bool overlap = true;
};

// Communication time per run of the plan, for the report of the overlap.
struct CommStats {
  int64_t runs = 0;        // runs that all-reduced gradients
  double in_flight_s = 0;  // sum over runs: first start to last completion
  double waited_s = 0;     // sum over runs: time the plan blocked in AllReduceWait
  int64_t buckets = 0;     // bucket waits
  int64_t bytes = 0;       // bytes all-reduced
};

class MpiCollectivesImpl;

// Initialises MPI (MPI_THREAD_MULTIPLE), installs itself as current(); the destructor
// finalises MPI after every rank got there. Throws ampc::Error when MPI fails.
class MpiCollectives final : public Collectives {
 public:
  explicit MpiCollectives(const MpiOptions& options);
  ~MpiCollectives() override;

  int rank() const override;
  int world() const override;
  int local_rank() const override;
  void start_sum(int64_t tag, void* data, int64_t count, DType dtype) override;
  void bucket_started(int64_t tag) override;
  void wait(int64_t tag) override;
  void sum_now(void* data, int64_t count, DType dtype, const std::string& what) override;
  void sum(std::vector<double>& values, const std::string& what) override;
  std::vector<uint64_t> all_gather(uint64_t value, const std::string& what) override;
  void broadcast(std::vector<char>& bytes, int root, const std::string& what) override;
  void set_phase(const std::string& phase) override;

  CommStats stats() const;
  // Ends every rank of the job (MPI_Abort): after an error on this rank, the others would
  // otherwise wait for it until their timeout.
  [[noreturn]] void abort(int code);

 private:
  std::unique_ptr<MpiCollectivesImpl> impl_;
};

}  // namespace ampc::rt::dist
