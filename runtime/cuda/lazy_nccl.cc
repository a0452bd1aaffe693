// The NCCL entry points ampc calls, each resolved from libnccl on its first call (see
// cuda_libraries.h): only a data-parallel plan on GPUs loads NCCL. A call to an entry point not
// listed here fails to link, by design.
#include <nccl.h>

#include "runtime/cuda/lazy_entry.h"

#define AMPC_NCCL(ret, name, params, args) AMPC_LAZY_ENTRY(kNccl, ret, name, params, args)

AMPC_NCCL(ncclResult_t, ncclGetVersion, (int* version), (version))
AMPC_NCCL(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * id), (id))
AMPC_NCCL(ncclResult_t, ncclCommInitRank,
          (ncclComm_t * comm, int nranks, ncclUniqueId id, int rank), (comm, nranks, id, rank))
AMPC_NCCL(ncclResult_t, ncclCommDestroy, (ncclComm_t comm), (comm))
AMPC_NCCL(ncclResult_t, ncclCommAbort, (ncclComm_t comm), (comm))
AMPC_NCCL(const char*, ncclGetErrorString, (ncclResult_t result), (result))
AMPC_NCCL(ncclResult_t, ncclGroupStart, (), ())
AMPC_NCCL(ncclResult_t, ncclGroupEnd, (), ())
AMPC_NCCL(ncclResult_t, ncclAllReduce,
          (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream),
          (sendbuff, recvbuff, count, datatype, op, comm, stream))
