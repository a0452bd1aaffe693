// Batches for the training loop: fixed-size batches of a Dataset's samples, one tensor per
// graph input (named after it), checked against what the plan expects before the first step.
//
// Order. With n samples and batch size B there are E = floor(n / B) batches per epoch; the
// n - E*B samples at the end of an epoch's order (the tail) are never used in that epoch.
// Batch k (k = 0, 1, ...) is batch j = k mod E of epoch e = k / E and holds the samples
// order_e[j*B .. (j+1)*B), where
//   - without shuffle, order_e is 0, 1, ..., n-1 (file order, the same every epoch);
//   - with shuffle, order_e is the permutation that this Fisher-Yates pass makes:
//       std::mt19937_64 rng(seed + e * 0x9E3779B97F4A7C15);   // unsigned 64-bit arithmetic
//       order = 0, 1, ..., n-1
//       for i = n-1 down to 1: swap(order[i], order[rng() % (i + 1)])
//     (raw engine output, no std::shuffle or distribution, so every standard library and
//     any reimplementation gives the same order).
//
// Shards (data parallel, as PyTorch's DistributedSampler): with S shards, batch k is the
// global batch of S*B samples order_e[j*S*B .. (j+1)*S*B) (E = floor(n / (S*B))), and shard s
// takes its part [s*B, (s+1)*B). Every rank computes the same order (same seed), so the
// shards are disjoint and together are the batch one process with batch S*B reads.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/data/dataset.h"
#include "runtime/tensor.h"

namespace ampc::rt::data {

// What the plan expects of one input: its element type and the shape of one sample (the
// plan input's shape without its first axis, which is the batch size).
struct InputSpec {
  DType dtype = DType::kUndefined;
  std::vector<int64_t> sample_shape;
};

struct BatchOptions {
  int64_t batch_size = 1;
  bool shuffle = false;
  uint64_t seed = 0;
  int64_t shard = 0, shards = 1;  // this rank's share of each global batch (see above)
};

class Batcher {
 public:
  // fp32 arrays feed fp16 / bf16 inputs (a plan compiled with --half-inputs): batches are
  // rounded to nearest even when they are prepared.
  // Throws ampc::Error, naming the input, for: no array of that name, another dtype,
  // another per-sample shape, fewer samples than the batch size. Arrays that no input
  // names are ignored.
  Batcher(Dataset data, std::map<std::string, InputSpec> inputs, BatchOptions options);

  int64_t batches_per_epoch() const { return per_epoch_; }
  // The sample indices of batch k (see the order above).
  std::vector<int64_t> indices(int64_t k);
  // Batch k, as tensors [B, sample_shape...] keyed by input name.
  std::map<std::string, Tensor> batch(int64_t k);
  // Batch position(), then advances; set_position(k) makes batch k the next one (resume).
  std::map<std::string, Tensor> next() { return batch(position_++); }
  int64_t position() const { return position_; }
  void set_position(int64_t k) { position_ = k; }

 private:
  const std::vector<int64_t>& order(int64_t epoch);

  Dataset data_;
  std::map<std::string, InputSpec> inputs_;
  BatchOptions options_;
  int64_t per_epoch_ = 0;
  int64_t position_ = 0;
  int64_t order_epoch_ = -1;  // the epoch whose permutation order_ holds
  std::vector<int64_t> order_;
};

// The permutation of 0..n-1 that shuffling uses for `epoch` (the rule above).
std::vector<int64_t> shuffled_order(int64_t n, uint64_t seed, int64_t epoch);

}  // namespace ampc::rt::data
