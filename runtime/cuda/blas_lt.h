// One GEMM of a plan step through cuBLASLt, prepared at load: row-major operands (the
// column-major transpose trick: D^T = op(B)^T op(A)^T), fp16 / bf16 / fp32 operands with fp32
// compute and scale, strided batches (stride 0 broadcasts an operand), alpha / beta with a
// full C, and the epilogues ReLU, bias (+ReLU) and the bias gradient of B. The algorithm
// comes from cublasLtMatmulAlgoGetHeuristic once, for the plan's workspace.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>

#include "base/dtype.h"

namespace ampc::rt::cuda {

enum class GemmEpilogue { kNone, kRelu, kBias, kReluBias, kBiasGradB };

// D[b] (m x n, row-major) = alpha * op(A[b]) op(B[b]) + beta * C[b] (+ epilogue), where op(A) is
// A (m x k, stored row-major) or, with trans_a, A^T (A stored k x m); likewise B (k x n or,
// with trans_b, stored n x k). Strides count elements between batch items; 0 broadcasts.
struct GemmShape {
  DType dtype = DType::kFloat32;  // A, B, C and D
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0, stride_d = 0;
  float alpha = 1, beta = 0;
  bool has_c = false;  // C: m x n row-major, like D
  GemmEpilogue epilogue = GemmEpilogue::kNone;
  DType bias_dtype = DType::kFloat32;  // kBias, kReluBias: the n values added to every row;
                                       // kBiasGradB: the n column sums of B (trans_b false)
};

class LtMatmul {
 public:
  // Builds the descriptors and queries the heuristic for at most `workspace_bytes` of
  // workspace. When the heuristic has no algorithm: with `required` throws ampc::Error naming
  // `label`, else leaves ok() false (the caller then runs the work another way).
  LtMatmul(cublasLtHandle_t handle, const GemmShape& shape, int64_t workspace_bytes,
           const std::string& label, bool required = true);
  ~LtMatmul();
  LtMatmul(const LtMatmul&) = delete;
  LtMatmul& operator=(const LtMatmul&) = delete;

  bool ok() const { return ok_; }
  // Enqueues the GEMM. `bias` is the bias (kBias, kReluBias) or the bias gradient written
  // (kBiasGradB); `c` may be null without has_c.
  void run(const void* a, const void* b, const void* c, void* d, const void* bias, void* workspace,
           cudaStream_t stream) const;

 private:
  cublasLtHandle_t handle_;
  GemmShape shape_;
  std::string label_;
  int64_t workspace_bytes_ = 0;
  bool ok_ = false;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr, d_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
};

// cudaDataType of a float dtype (f16, bf16, f32); throws ampc::Error for others.
cudaDataType_t cuda_data_type(DType t, const std::string& label);

}  // namespace ampc::rt::cuda
