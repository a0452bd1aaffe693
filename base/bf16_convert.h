// f32 <-> bf16 conversion loops on AVX-512: Cast's conversions for the bf16 training path
// (LayerNorm and Softmax outputs to bf16 for the next GEMM, bf16 gradients back to f32), and
// the bf16 stores of the CPU kernels and twins that compute in f32.
// Each element gets base/half.h's conversion exactly (round to nearest even, a NaN quieted
// with the top of its payload kept; widening is a shift), 16 lanes at a time. Call them only
// where convert_avx512_available() (AVX512F, BW and VL); elsewhere the caller runs the
// scalar loop. tests/unit/bf16_convert_test.cc compares them with base/half.h.
#pragma once

#include <cstdint>

namespace ampc {

bool convert_avx512_available();
void f32_to_bf16_avx512(const float* x, uint16_t* y, int64_t n);
void bf16_to_f32_avx512(const uint16_t* x, float* y, int64_t n);

}  // namespace ampc
