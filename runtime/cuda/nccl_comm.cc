#include "runtime/cuda/nccl_comm.h"

#include <vector>

#include "base/error.h"

namespace ampc::rt::cuda {
namespace {
ncclComm_t g_comm = nullptr;
}  // namespace

void check_nccl(ncclResult_t r, const std::string& what) {
  if (r != ncclSuccess)
    throw Error("NCCL: " + what + " failed: " + std::string(ncclGetErrorString(r)));
}

void init_nccl(dist::Collectives& c) {
  if (g_comm) return;
  ncclUniqueId id{};
  if (c.rank() == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  std::vector<char> bytes(reinterpret_cast<char*>(&id), reinterpret_cast<char*>(&id) + sizeof id);
  c.broadcast(bytes, 0, "the NCCL unique id");
  std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(&id));
  check_nccl(ncclCommInitRank(&g_comm, c.world(), id, c.rank()), "ncclCommInitRank");
}

ncclComm_t nccl_communicator() {
  return g_comm;
}

void finish_nccl(bool abort) {
  if (!g_comm) return;
  if (abort)
    ncclCommAbort(g_comm);
  else
    ncclCommDestroy(g_comm);
  g_comm = nullptr;
}

}  // namespace ampc::rt::cuda
