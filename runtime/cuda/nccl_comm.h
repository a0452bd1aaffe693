// The process's NCCL communicator, for data-parallel plans on GPUs (docs/data-parallel.md):
// one rank per GPU; MPI only bootstraps it (rank 0's ncclUniqueId broadcast over
// runtime/dist/collectives.h). The plan's ampc.AllReduceStart/Wait steps (ops_comm.cc) read it
// when the step graph is captured.
#pragma once

#include <nccl.h>

#include <string>

#include "runtime/dist/collectives.h"

namespace ampc::rt::cuda {

// Creates the communicator of every rank of `collectives` on the current device (cudaSetDevice
// first). Throws ampc::Error with NCCL's message.
void init_nccl(dist::Collectives& collectives);
// Null until init_nccl (a plan on one GPU without MPI: the steps are copies).
ncclComm_t nccl_communicator();
// Destroys it (at the end of training); ncclCommAbort when `abort` (after an error).
void finish_nccl(bool abort = false);
// Throws ampc::Error "NCCL: <what> failed: <NCCL's message>" unless `r` is ncclSuccess.
void check_nccl(ncclResult_t r, const std::string& what);

}  // namespace ampc::rt::cuda
