// Collective communication between the ranks of a data-parallel run, as the plan's
// communication ops (ampc.AllReduceStart / ampc.AllReduceWait, passes/data_parallel.h) and the
// trainer see it. This header does not depend on MPI: a process that was not launched by an
// MPI launcher has no Collectives installed (current() is null) and behaves as a world of one
// rank; runtime/dist/mpi_collectives.h is the implementation over MPI.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/dtype.h"

namespace ampc::rt::dist {

class Collectives {
 public:
  virtual ~Collectives() = default;

  virtual int rank() const = 0;
  virtual int world() const = 0;
  virtual int local_rank() const = 0;  // the rank among the processes of this node

  // Starts summing `count` elements of `dtype` (f32, f64, f16, bf16) at `data` over every rank,
  // in place, and returns at once; `data` must stay valid and untouched until wait(tag).
  // `tag` names the reduction until its wait (a gradient bucket); one in flight per tag.
  virtual void start_sum(int64_t tag, void* data, int64_t count, DType dtype) = 0;
  // Every start_sum of bucket `tag` has been made (a hook for measurement: see
  // MpiOptions::overlap).
  virtual void bucket_started(int64_t /*tag*/) {}
  // Waits for every start_sum of `tag`. Throws ampc::Error naming the rank that did not take
  // part when the wait exceeds the timeout.
  virtual void wait(int64_t tag) = 0;

  // Blocking sum of `count` elements of `dtype` at `data` over every rank, in place (the
  // forward statistics of a synchronised BatchNorm, passes/sync_batch_norm.h); `what` names
  // it in a timeout's message. Same communicator, order and timeout as start_sum.
  virtual void sum_now(void* data, int64_t count, DType dtype, const std::string& what) = 0;
  // Blocking sum of host values over every rank (losses, sample counts); `what` names the
  // reduction in a timeout's message.
  virtual void sum(std::vector<double>& values, const std::string& what) = 0;
  // Every rank's `value`, by rank (blocking).
  virtual std::vector<uint64_t> all_gather(uint64_t value, const std::string& what) = 0;
  // Root's bytes on every rank (blocking; every rank passes a buffer of the same size).
  virtual void broadcast(std::vector<char>& bytes, int root, const std::string& what) = 0;

  // What the run is doing (e.g. "step 12"), for the messages of a timeout.
  virtual void set_phase(const std::string& phase) = 0;
};

// The process's collectives: null when the process runs alone (not launched by mpirun).
Collectives* current();
void set_current(Collectives* collectives);

// While it lives, current() is null: the plan's communication ops act as on one rank (a rank
// re-running its own batch to diagnose it, while the others may not).
class RankLocal {
 public:
  RankLocal() : saved_(current()) { set_current(nullptr); }
  ~RankLocal() { set_current(saved_); }
  RankLocal(const RankLocal&) = delete;
  RankLocal& operator=(const RankLocal&) = delete;

 private:
  Collectives* saved_;
};

// rank/world of current(), 0/1 without one.
int rank();
int world();

}  // namespace ampc::rt::dist
