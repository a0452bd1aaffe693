// The cuDNN entry points ampc calls, each resolved from libcudnn on its first call (see
// cuda_libraries.h): only a plan with convolutions on a GPU loads cuDNN. A call to an entry
// point not listed here fails to link, by design.
#include <cudnn.h>

#include "runtime/cuda/lazy_entry.h"

#define AMPC_CUDNN(ret, name, params, args) \
  AMPC_LAZY_ENTRY(kCudnn, ret CUDNNWINAPI, name, params, args)

using Tensor = cudnnTensorDescriptor_t;
using Filter = cudnnFilterDescriptor_t;
using Conv = cudnnConvolutionDescriptor_t;

AMPC_CUDNN(cudnnStatus_t, cudnnCreate, (cudnnHandle_t * handle), (handle))
AMPC_CUDNN(cudnnStatus_t, cudnnDestroy, (cudnnHandle_t handle), (handle))
AMPC_CUDNN(cudnnStatus_t, cudnnSetStream, (cudnnHandle_t handle, cudaStream_t stream),
           (handle, stream))
AMPC_CUDNN(const char*, cudnnGetErrorString, (cudnnStatus_t status), (status))
AMPC_CUDNN(size_t, cudnnGetVersion, (void), ())
AMPC_CUDNN(size_t, cudnnGetCudartVersion, (void), ())
AMPC_CUDNN(cudnnStatus_t, cudnnCreateTensorDescriptor, (Tensor * desc), (desc))
AMPC_CUDNN(cudnnStatus_t, cudnnDestroyTensorDescriptor, (Tensor desc), (desc))
AMPC_CUDNN(cudnnStatus_t, cudnnSetTensorNdDescriptor,
           (Tensor desc, cudnnDataType_t type, int nd, const int dims[], const int strides[]),
           (desc, type, nd, dims, strides))
AMPC_CUDNN(cudnnStatus_t, cudnnCreateFilterDescriptor, (Filter * desc), (desc))
AMPC_CUDNN(cudnnStatus_t, cudnnDestroyFilterDescriptor, (Filter desc), (desc))
AMPC_CUDNN(cudnnStatus_t, cudnnSetFilterNdDescriptor,
           (Filter desc, cudnnDataType_t type, cudnnTensorFormat_t format, int nd,
            const int dims[]),
           (desc, type, format, nd, dims))
AMPC_CUDNN(cudnnStatus_t, cudnnCreateConvolutionDescriptor, (Conv * desc), (desc))
AMPC_CUDNN(cudnnStatus_t, cudnnDestroyConvolutionDescriptor, (Conv desc), (desc))
AMPC_CUDNN(cudnnStatus_t, cudnnSetConvolutionNdDescriptor,
           (Conv desc, int n, const int pads[], const int strides[], const int dilations[],
            cudnnConvolutionMode_t mode, cudnnDataType_t compute),
           (desc, n, pads, strides, dilations, mode, compute))
AMPC_CUDNN(cudnnStatus_t, cudnnSetConvolutionMathType, (Conv desc, cudnnMathType_t math),
           (desc, math))
AMPC_CUDNN(cudnnStatus_t, cudnnSetConvolutionGroupCount, (Conv desc, int groups), (desc, groups))
AMPC_CUDNN(cudnnStatus_t, cudnnGetConvolutionNdForwardOutputDim,
           (const Conv conv, const Tensor x, const Filter w, int nd, int dims[]),
           (conv, x, w, nd, dims))
AMPC_CUDNN(cudnnStatus_t, cudnnGetConvolutionForwardAlgorithm_v7,
           (cudnnHandle_t handle, const Tensor x, const Filter w, const Conv conv, const Tensor y,
            const int requested, int* returned, cudnnConvolutionFwdAlgoPerf_t* perf),
           (handle, x, w, conv, y, requested, returned, perf))
AMPC_CUDNN(cudnnStatus_t, cudnnGetConvolutionBackwardDataAlgorithm_v7,
           (cudnnHandle_t handle, const Filter w, const Tensor dy, const Conv conv, const Tensor dx,
            const int requested, int* returned, cudnnConvolutionBwdDataAlgoPerf_t* perf),
           (handle, w, dy, conv, dx, requested, returned, perf))
AMPC_CUDNN(cudnnStatus_t, cudnnGetConvolutionBackwardFilterAlgorithm_v7,
           (cudnnHandle_t handle, const Tensor x, const Tensor dy, const Conv conv, const Filter dw,
            const int requested, int* returned, cudnnConvolutionBwdFilterAlgoPerf_t* perf),
           (handle, x, dy, conv, dw, requested, returned, perf))
AMPC_CUDNN(cudnnStatus_t, cudnnGetConvolutionForwardWorkspaceSize,
           (cudnnHandle_t handle, const Tensor x, const Filter w, const Conv conv, const Tensor y,
            cudnnConvolutionFwdAlgo_t algo, size_t* bytes),
           (handle, x, w, conv, y, algo, bytes))
AMPC_CUDNN(cudnnStatus_t, cudnnGetConvolutionBackwardDataWorkspaceSize,
           (cudnnHandle_t handle, const Filter w, const Tensor dy, const Conv conv, const Tensor dx,
            cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes),
           (handle, w, dy, conv, dx, algo, bytes))
AMPC_CUDNN(cudnnStatus_t, cudnnGetConvolutionBackwardFilterWorkspaceSize,
           (cudnnHandle_t handle, const Tensor x, const Tensor dy, const Conv conv, const Filter dw,
            cudnnConvolutionBwdFilterAlgo_t algo, size_t* bytes),
           (handle, x, dy, conv, dw, algo, bytes))
AMPC_CUDNN(cudnnStatus_t, cudnnConvolutionForward,
           (cudnnHandle_t handle, const void* alpha, const Tensor x_desc, const void* x,
            const Filter w_desc, const void* w, const Conv conv, cudnnConvolutionFwdAlgo_t algo,
            void* workspace, size_t workspace_bytes, const void* beta, const Tensor y_desc,
            void* y),
           (handle, alpha, x_desc, x, w_desc, w, conv, algo, workspace, workspace_bytes, beta,
            y_desc, y))
AMPC_CUDNN(cudnnStatus_t, cudnnConvolutionBackwardData,
           (cudnnHandle_t handle, const void* alpha, const Filter w_desc, const void* w,
            const Tensor dy_desc, const void* dy, const Conv conv,
            cudnnConvolutionBwdDataAlgo_t algo, void* workspace, size_t workspace_bytes,
            const void* beta, const Tensor dx_desc, void* dx),
           (handle, alpha, w_desc, w, dy_desc, dy, conv, algo, workspace, workspace_bytes, beta,
            dx_desc, dx))
AMPC_CUDNN(cudnnStatus_t, cudnnConvolutionBackwardFilter,
           (cudnnHandle_t handle, const void* alpha, const Tensor x_desc, const void* x,
            const Tensor dy_desc, const void* dy, const Conv conv,
            cudnnConvolutionBwdFilterAlgo_t algo, void* workspace, size_t workspace_bytes,
            const void* beta, const Filter dw_desc, void* dw),
           (handle, alpha, x_desc, x, dy_desc, dy, conv, algo, workspace, workspace_bytes, beta,
            dw_desc, dw))
AMPC_CUDNN(cudnnStatus_t, cudnnAddTensor,
           (cudnnHandle_t handle, const void* alpha, const Tensor a_desc, const void* a,
            const void* beta, const Tensor c_desc, void* c),
           (handle, alpha, a_desc, a, beta, c_desc, c))
