// The cuBLASLt entry points ampc calls, each resolved from libcublasLt on its first call (see
// cuda_libraries.h): the binary does not link the library, so commands that never touch a
// GPU never load it. A call to an entry point not listed here fails to link, by design.
#include <cublasLt.h>

#include "runtime/cuda/lazy_entry.h"

#define AMPC_CUBLASLT(ret, name, params, args) \
  AMPC_LAZY_ENTRY(kCublasLt, ret CUBLASWINAPI, name, params, args)

AMPC_CUBLASLT(cublasStatus_t, cublasLtCreate, (cublasLtHandle_t * handle), (handle))
AMPC_CUBLASLT(cublasStatus_t, cublasLtDestroy, (cublasLtHandle_t handle), (handle))
AMPC_CUBLASLT(size_t, cublasLtGetVersion, (void), ())
AMPC_CUBLASLT(size_t, cublasLtGetCudartVersion, (void), ())
AMPC_CUBLASLT(const char*, cublasLtGetStatusName, (cublasStatus_t status), (status))
AMPC_CUBLASLT(const char*, cublasLtGetStatusString, (cublasStatus_t status), (status))
AMPC_CUBLASLT(cublasStatus_t, cublasLtMatmul,
              (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* a,
               cublasLtMatrixLayout_t a_desc, const void* b, cublasLtMatrixLayout_t b_desc,
               const void* beta, const void* c, cublasLtMatrixLayout_t c_desc, void* d,
               cublasLtMatrixLayout_t d_desc, const cublasLtMatmulAlgo_t* algo, void* workspace,
               size_t workspace_bytes, cudaStream_t stream),
              (handle, desc, alpha, a, a_desc, b, b_desc, beta, c, c_desc, d, d_desc, algo,
               workspace, workspace_bytes, stream))
AMPC_CUBLASLT(cublasStatus_t, cublasLtMatmulAlgoGetHeuristic,
              (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a_desc,
               cublasLtMatrixLayout_t b_desc, cublasLtMatrixLayout_t c_desc,
               cublasLtMatrixLayout_t d_desc, cublasLtMatmulPreference_t preference, int requested,
               cublasLtMatmulHeuristicResult_t results[], int* returned),
              (handle, desc, a_desc, b_desc, c_desc, d_desc, preference, requested, results,
               returned))
AMPC_CUBLASLT(cublasStatus_t, cublasLtMatmulDescCreate,
              (cublasLtMatmulDesc_t * desc, cublasComputeType_t compute, cudaDataType_t scale),
              (desc, compute, scale))
AMPC_CUBLASLT(cublasStatus_t, cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t desc), (desc))
AMPC_CUBLASLT(cublasStatus_t, cublasLtMatmulDescSetAttribute,
              (cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const void* buf,
               size_t size),
              (desc, attr, buf, size))
AMPC_CUBLASLT(cublasStatus_t, cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t * pref),
              (pref))
AMPC_CUBLASLT(cublasStatus_t, cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t pref),
              (pref))
AMPC_CUBLASLT(cublasStatus_t, cublasLtMatmulPreferenceSetAttribute,
              (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
               const void* buf, size_t size),
              (pref, attr, buf, size))
AMPC_CUBLASLT(cublasStatus_t, cublasLtMatrixLayoutCreate,
              (cublasLtMatrixLayout_t * layout, cudaDataType type, uint64_t rows, uint64_t cols,
               int64_t ld),
              (layout, type, rows, cols, ld))
AMPC_CUBLASLT(cublasStatus_t, cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t layout),
              (layout))
AMPC_CUBLASLT(cublasStatus_t, cublasLtMatrixLayoutSetAttribute,
              (cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr, const void* buf,
               size_t size),
              (layout, attr, buf, size))
