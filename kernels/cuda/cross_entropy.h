// SoftmaxCrossEntropyLoss forward on the GPU: scores [n, c, d] (d = the product of the
// dimensions after the class axis), labels [n, d]. CPU twin: kernels/twin/cross_entropy.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "base/dtype.h"
#include "kernels/shared/kernel_args.h"
#include "kernels/shared/workspace_bytes.h"

namespace ampc::kernels::cuda {

using shared::CeReduction;

// Device workspace that softmax_cross_entropy needs (0 for kNone).
using shared::softmax_cross_entropy_workspace_bytes;

// log_prob = log_softmax(scores) over c; loss[i, j] = -log_prob[i, label[i, j], j] *
// weight[label] (0 where has_ignore_index and label == ignore_index); kNone writes loss [n, d],
// kSum one value (the sum), kMean one value (the sum over the sum of the non-ignored weights).
// scores, loss and log_prob: `dtype` (f32, f16, bf16); labels: `label_dtype` (i32, i64);
// weight: null or c values of `weight_dtype` (f32, f16, bf16); log_prob: null when not wanted,
// never aliasing scores.
// A label outside [0, c) that is not ignored gives a NaN loss there (the CPU op throws; a
// device kernel cannot), so the sum and mean are NaN, and sets *bad_label (a device int32)
// to 1 when bad_label is not null, for the runtime to report. workspace: see
// *_workspace_bytes. out_dtype: the loss's and log_prob's type, `dtype` (kUndefined) or f32 for
// f16 or bf16 scores, which are then read widened (ampc.SoftmaxCrossEntropyLoss: the numbers of
// a Cast of the scores to f32 before the op).
void softmax_cross_entropy(DType dtype, const void* scores, DType label_dtype, const void* labels,
                           int64_t n, int64_t c, int64_t d, DType weight_dtype, const void* weight,
                           bool has_ignore_index, int64_t ignore_index, CeReduction reduction,
                           void* loss, void* log_prob, void* workspace, cudaStream_t stream,
                           int32_t* bad_label = nullptr, DType out_dtype = DType::kUndefined);

}  // namespace ampc::kernels::cuda
