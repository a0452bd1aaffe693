// Matrix products through oneDNN's matmul primitive, in fp32 or bf16 (fp32 accumulation,
// the output rounded once): C = alpha * op(A) * op(B) + beta * C, row-major, over a batch.
#pragma once

#include <cstdint>
#include <vector>

#include "base/dtype.h"

namespace ampc::kernels::cpu {

struct DnnlMatmul {
  DType a_type = DType::kFloat32, b_type = DType::kFloat32, c_type = DType::kFloat32;
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  // Batch entries: A and B either have `batch` matrices `stride_*` elements apart or one
  // matrix shared by all (stride 0); C has `batch` matrices m * ldc apart.
  int64_t batch = 1, stride_a = 0, stride_b = 0;
  float alpha = 1.0f;
  float beta = 0.0f;  // C = ... + beta * C when nonzero (C read before it is written)
  // Epilogue, applied to the fp32 accumulator before the one rounding of C: + bias[n] (a row
  // of n elements of bias_type, the same for every row and batch entry), then max(0, .).
  bool bias = false;
  DType bias_type = DType::kFloat32;
  bool relu = false;
};

// The same product over operands of any layout: each of A [..., m, k], B [..., k, n] and
// C [..., m, n] given by its dimensions and its strides in elements (one rank for all three;
// a batch dimension of 1 in A or B broadcasts), e.g. an operand read through a transpose.
// + bias[n] (bias_type) and max(0, .) as in DnnlMatmul.
struct DnnlStridedMatmul {
  DType type = DType::kFloat32;  // of A, B and C
  struct Layout {
    std::vector<int64_t> dims, strides;
  };
  Layout a, b, c;
  bool bias = false;
  DType bias_type = DType::kFloat32;
  bool relu = false;
};

// Whether this CPU multiplies bf16 natively (AVX512-BF16 or AMX, as oneDNN sees it): only
// then do bf16 GEMMs and convolutions run in bf16; elsewhere they stay widened to fp32,
// which is faster than oneDNN's bf16 emulation.
bool dnnl_bf16_native();

// False when oneDNN cannot serve the problem (element types other than f32 / bf16, sizes
// beyond its limits, a configuration it does not implement); then nothing was written.
bool dnnl_matmul(const DnnlMatmul& p, const void* a, const void* b, void* c);
// With the bias operand (p.bias).
bool dnnl_matmul(const DnnlMatmul& p, const void* a, const void* b, const void* bias, void* c);
// Creates (and caches) the primitive for p now, e.g. when a plan is loaded; false when
// oneDNN cannot serve p.
bool dnnl_matmul_prepare(const DnnlMatmul& p);

// False, having written nothing, where oneDNN cannot serve p or would serve it only with its
// reference (unvectorised) implementation; bias null unless p.bias.
bool dnnl_strided_matmul(const DnnlStridedMatmul& p, const void* a, const void* b, const void* bias,
                         void* c);
bool dnnl_strided_matmul_prepare(const DnnlStridedMatmul& p);

}  // namespace ampc::kernels::cpu
