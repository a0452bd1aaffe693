// Data-parallel training (docs/data-parallel.md): the mean of every parameter gradient over
// the ranks, added to the training step by the compiler, as PyTorch's DDP does it: gradients
// grouped in buckets in the order the backward produces them; a bucket's all-reduce starts
// (ampc.AllReduceStart, ops/schemas/comm_schemas.h) right after the backward has produced its last
// gradient, so it overlaps the rest of the backward, and is waited for (ampc.AllReduceWait)
// after the whole backward, before unscale and the non-finite check. found_inf, the clip norm,
// the skip-step and the scale update then read the same reduced gradients on every rank, so
// they agree by construction.
//
// Order in the pipeline: differentiate, accumulate_gradients, reduce_gradients,
// unscale_and_check (passes/loss_scaling.h). With gradient accumulation the accumulated sum
// is reduced (on every micro-batch; the optimizer uses the last one's).
#pragma once

#include <cstdint>
#include <vector>

#include "base/dtype.h"
#include "ir/graph.h"
#include "passes/autodiff/autodiff.h"

namespace ampc::passes {

struct DataParallelOptions {
  bool enabled = false;
  // The dtype gradients travel in: kUndefined for their own (fp32, the masters'), or kFloat16 /
  // kBFloat16 (DDP's fp16_compress_hook / bf16_compress_hook).
  DType reduce_dtype = DType::kUndefined;
  // A bucket closes once it holds this many bytes of gradients (in the reduce dtype).
  int64_t bucket_bytes = 1 << 20;
  // --sync-batchnorm: BatchNorm statistics over every rank's samples
  // (passes/sync_batch_norm.h); needs `enabled`.
  bool sync_batchnorm = false;
};

// Replaces every gradient by its mean over the ranks. Returns the number of buckets.
int reduce_gradients(ir::Model& model, std::vector<ParameterGradient>& gradients,
                     const DataParallelOptions& options);

}  // namespace ampc::passes
