// Dropout's element loop (kernels/shared/dropout_math.h's DropoutElement) compiled for AVX-512
// with DQ: SplitMix64's 64-bit multiplies and the draws' conversion to double become vector
// instructions (vpmullq, vcvtuqq2pd), eight draws at a time, where the portable build (plain
// x86-64, no 64-bit vector multiply) computes one draw at a time. The same operations on the
// same values, so the same masks and outputs bit for bit (tests/unit/twin_dropout_test.cc runs
// both).
#pragma once

#include <cstdint>

#include "kernels/shared/dropout_math.h"

namespace ampc::kernels::twin {

// f(i) for i in [begin, end) in training mode. Returns false, having done nothing, outside
// training mode (a copy) or where the CPU lacks AVX512F, DQ, BW or VL (or AMPC_NO_AVX512 is
// set: base/cpu_features.h).
template <typename T>
bool dropout_range_avx512(const shared::DropoutElement<T>& f, int64_t begin, int64_t end);

}  // namespace ampc::kernels::twin
