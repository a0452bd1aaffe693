// Reductions over any set of axes, and arg-reductions over one axis. The CPU backend's Reduce
// ops on float data run kernels/twin/reduce.h (the CUDA kernels' twin); these serve integer
// data, ReduceLogSumExp (no CUDA kernel) and MeanVarianceNormalization's statistics.
#pragma once

#include <cstdint>
#include <vector>

namespace ampc::kernels::cpu {

enum class ReduceKind { kSum, kMean, kProd, kMax, kMin, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

// y = reduction of x (shape dims) over the axes flagged in `reduced`; y holds the kept
// dimensions in their order. Max/Min propagate NaN. Accumulates in T; integer types compute
// sqrt/log/exp in double. Instantiated for float, double, int8, uint8, int32, int64, uint32,
// uint64.
template <typename T>
void reduce(ReduceKind kind, const T* x, const std::vector<int64_t>& dims,
            const std::vector<bool>& reduced, T* y);

// The same over the middle axis of x viewed as [outer, n, inner]; y is [outer, inner].
template <typename T>
void reduce_axis(ReduceKind kind, const T* x, int64_t outer, int64_t n, int64_t inner, T* y);

// Index of the maximum (or minimum) along the middle axis of x [outer, n, inner] (n > 0):
// the first one, or with select_last the last one; a NaN counts as both (PyTorch's rule). y is
// [outer, inner]. Instantiated for float, double and every integer type.
template <typename T>
void arg_reduce(const T* x, int64_t outer, int64_t n, int64_t inner, bool is_max, bool select_last,
                int64_t* y);

// out = x with its axes permuted: out dims[i] = dims[perm[i]].
template <typename T>
void permute_copy(const T* x, const std::vector<int64_t>& dims, const std::vector<int>& perm,
                  T* out);

}  // namespace ampc::kernels::cpu
