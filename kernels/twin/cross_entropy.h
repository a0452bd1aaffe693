// CPU twin of kernels/cuda/cross_entropy.h (same arguments minus the stream, host pointers;
// the workspace is host memory of softmax_cross_entropy_workspace_bytes), in the kernels'
// partition and reduction order. It is the CPU backend's SoftmaxCrossEntropyLoss too; for the
// CPU op's f64 (scores and weights f64, computed in double, no device counterpart) the
// workspace is not used. out_dtype, the loss's and log_prob's type: the scores' (kUndefined), or
// float for bf16 or f16 scores, which are then read widened (ampc.SoftmaxCrossEntropyLoss: the
// same numbers as a Cast of the scores to float before the op).
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/dtype.h"
#include "kernels/shared/kernel_args.h"
#include "kernels/shared/workspace_bytes.h"

namespace ampc::kernels::twin {

using shared::CeReduction;

using shared::softmax_cross_entropy_workspace_bytes;

void softmax_cross_entropy(DType dtype, const void* scores, DType label_dtype, const void* labels,
                           int64_t n, int64_t c, int64_t d, DType weight_dtype, const void* weight,
                           bool has_ignore_index, int64_t ignore_index, CeReduction reduction,
                           void* loss, void* log_prob, void* workspace,
                           int32_t* bad_label = nullptr, DType out_dtype = DType::kUndefined);

}  // namespace ampc::kernels::twin
