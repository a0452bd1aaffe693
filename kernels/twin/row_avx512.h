// AVX-512 forms of row_host.h's f32 row steps (the emulated block's partition and tree, exp of
// the shifted row, the outputs): the same operations on the same values in the same order as
// the generic code, so the same bits, with the T accumulators of the emulated threads held as
// vector lanes (which of two NaN payloads an add keeps is the compiler's choice, as in the
// generic code). Each function returns false, having done nothing, where the CPU lacks
// AVX-512 or the plan is not one it handles (the caller then runs row_host.h's generic code).
// tests/unit/row_fold_test.cc compares them with rowwise_tree.h's row_reduce_host.
#pragma once

#include <cstdint>

#include "kernels/shared/rowwise_tree.h"

namespace ampc::kernels::twin {

// fold_row(plan, v, n, init, MaxOf()) (max) or fold_row(plan, v, n, init, SumOf()) (sum).
enum class RowFold { kMax, kSum };
bool fold_row_avx512(shared::RowPlan plan, const float* v, int64_t n, float init, RowFold kind,
                     float* out);

// row_softmax_stats for f32: *max, *sum and e[j] = exp_f32(x[j] - max).
bool softmax_stats_avx512(const float* x, int64_t n, float* e, float* max, float* sum);

// Softmax (or LogSoftmax) of `rows` contiguous f32 rows of n: each row's statistics as
// softmax_stats_avx512, then y = e * (1 / sum) (or (x - max) - log(sum)). e: scratch of
// softmax_rows_scratch(n) floats (short rows are computed a few side by side). y may alias x.
bool softmax_rows_avx512(const float* x, float* y, int64_t rows, int64_t n, bool log_softmax,
                         float* e);
int64_t softmax_rows_scratch(int64_t n);

// Column sums in row order: acc[j] += x[r * stride + j] for r = 0 .. rows - 1, each column's
// additions in that order (the CUDA column threads' order, reduce.cc's generic loop), j < cols.
// The accumulators of up to 256 columns stay in registers while the rows stream past.
bool column_sums_avx512(const float* x, int64_t stride, int64_t rows, int64_t cols, float* acc);
// The same over bf16 values (their bits), each widened to f32 exactly (a shift) before its add.
bool column_sums_bf16_avx512(const uint16_t* x, int64_t stride, int64_t rows, int64_t cols,
                             float* acc);

}  // namespace ampc::kernels::twin
