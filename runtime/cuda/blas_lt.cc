#include "runtime/cuda/blas_lt.h"

#include <numeric>

#include "base/error.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/dtype_codes.h"

namespace ampc::rt::cuda {
namespace {

// Largest power of two (at most 256) dividing every byte count given.
uint32_t alignment(std::initializer_list<int64_t> byte_counts) {
  int64_t a = 256;
  for (int64_t b : byte_counts) {
    if (b != 0) a = std::gcd(a, b);
  }
  return static_cast<uint32_t>(a & -a);
}

template <typename T>
void set(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value,
         const std::string& label) {
  check(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof value),
        label + ": cublasLtMatmulDescSetAttribute");
}

// A stored matrix: rows x cols column-major with leading dimension ld, `batch` of them.
cublasLtMatrixLayout_t layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld,
                              int64_t batch, int64_t stride, const std::string& label) {
  cublasLtMatrixLayout_t l = nullptr;
  check(cublasLtMatrixLayoutCreate(&l, type, static_cast<uint64_t>(rows),
                                   static_cast<uint64_t>(cols), ld),
        label + ": cublasLtMatrixLayoutCreate");
  if (batch > 1) {
    const auto count = static_cast<int32_t>(batch);
    check(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                           sizeof count),
          label + ": batch count");
    check(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                           sizeof stride),
          label + ": batch stride");
  }
  return l;
}

}  // namespace

cudaDataType_t cuda_data_type(DType t, const std::string& label) {
  static constexpr DTypeCode<cudaDataType_t> kCodes[] = {{DType::kFloat32, CUDA_R_32F},
                                                         {DType::kFloat16, CUDA_R_16F},
                                                         {DType::kBFloat16, CUDA_R_16BF}};
  return library_dtype_code(kCodes, t, label, "the CUDA backend's GEMM", "f16, bf16, f32");
}

LtMatmul::LtMatmul(cublasLtHandle_t handle, const GemmShape& s, int64_t workspace_bytes,
                   const std::string& label, bool required)
    : handle_(handle), shape_(s), label_(label), workspace_bytes_(workspace_bytes) {
  if (s.batch > INT32_MAX) throw Error(label + ": too many GEMM batches");
  const cudaDataType_t type = cuda_data_type(s.dtype, label);
  const auto esize = static_cast<int64_t>(dtype_size(s.dtype));
  check(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F),
        label + ": cublasLtMatmulDescCreate");
  // Column-major view: D^T (n x m) = op(B)^T (n x k) * op(A)^T (k x m). cuBLAS's A is our B:
  // stored row-major k x n it is column-major n x k (no transpose); stored n x k (trans_b) it
  // is column-major k x n, transposed. Likewise cuBLAS's B is our A.
  const cublasOperation_t op_a = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  set(desc_, CUBLASLT_MATMUL_DESC_TRANSA, op_a, label);
  set(desc_, CUBLASLT_MATMUL_DESC_TRANSB, op_b, label);
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  switch (s.epilogue) {
    case GemmEpilogue::kNone:
      break;
    case GemmEpilogue::kRelu:
      epilogue = CUBLASLT_EPILOGUE_RELU;
      break;
    case GemmEpilogue::kBias:
      epilogue = CUBLASLT_EPILOGUE_BIAS;
      break;
    case GemmEpilogue::kReluBias:
      epilogue = CUBLASLT_EPILOGUE_RELU_BIAS;
      break;
    // The column sums of our B (k x n) are the row sums over k of cuBLAS's A: BGRADA.
    case GemmEpilogue::kBiasGradB:
      epilogue = CUBLASLT_EPILOGUE_BGRADA;
      break;
  }
  set(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue, label);
  if (s.epilogue != GemmEpilogue::kNone && s.epilogue != GemmEpilogue::kRelu) {
    const int32_t bias_type = cuda_data_type(s.bias_dtype, label);
    if (s.epilogue != GemmEpilogue::kBiasGradB)
      set(desc_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type, label);
    set(desc_, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, int64_t{0}, label);
  }
  const int64_t a_rows = s.trans_b ? s.k : s.n, a_cols = s.trans_b ? s.n : s.k;
  const int64_t b_rows = s.trans_a ? s.m : s.k, b_cols = s.trans_a ? s.k : s.m;
  a_ = layout(type, a_rows, a_cols, a_rows, s.batch, s.stride_b, label);
  b_ = layout(type, b_rows, b_cols, b_rows, s.batch, s.stride_a, label);
  d_ = layout(type, s.n, s.m, s.n, s.batch, s.stride_d, label);
  c_ = layout(type, s.n, s.m, s.n, s.batch, s.has_c ? s.stride_c : s.stride_d, label);

  cublasLtMatmulPreference_t pref = nullptr;
  check(cublasLtMatmulPreferenceCreate(&pref), label + ": cublasLtMatmulPreferenceCreate");
  const auto ws = static_cast<uint64_t>(workspace_bytes);
  const uint32_t align_a = alignment({s.stride_b * esize, a_rows * esize});
  const uint32_t align_b = alignment({s.stride_a * esize, b_rows * esize});
  const uint32_t align_d = alignment({s.stride_d * esize, s.n * esize});
  const uint32_t align_c = alignment({s.stride_c * esize, s.n * esize});
  // The preference is destroyed on every path; a refused attribute is an error (a heuristic
  // asked without the alignment limits could pick an algorithm the buffers do not allow).
  struct PrefGuard {
    cublasLtMatmulPreference_t p;
    ~PrefGuard() { cublasLtMatmulPreferenceDestroy(p); }
  } guard{pref};
  auto pref_set = [&](cublasLtMatmulPreferenceAttributes_t attr, const auto& value,
                      const char* what) {
    check(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof value),
          label + ": cublasLtMatmulPreferenceSetAttribute(" + what + ")");
  };
  pref_set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, ws, "MAX_WORKSPACE_BYTES");
  pref_set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a, "MIN_ALIGNMENT_A_BYTES");
  pref_set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b, "MIN_ALIGNMENT_B_BYTES");
  pref_set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_c, "MIN_ALIGNMENT_C_BYTES");
  pref_set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_d, "MIN_ALIGNMENT_D_BYTES");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(handle, desc_, a_, b_, c_, d_, pref, 1, &result, &found);
  ok_ = status == CUBLAS_STATUS_SUCCESS && found > 0;
  if (ok_) {
    algo_ = result.algo;
  } else if (required) {
    throw Error(
        label + ": cuBLASLt has no algorithm for this GEMM (" + std::string(dtype_name(s.dtype)) +
        ", m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k) +
        " batch=" + std::to_string(s.batch) + ", status " + cublasLtGetStatusName(status) + ")");
  }
}

LtMatmul::~LtMatmul() {
  if (a_) cublasLtMatrixLayoutDestroy(a_);
  if (b_) cublasLtMatrixLayoutDestroy(b_);
  if (c_) cublasLtMatrixLayoutDestroy(c_);
  if (d_) cublasLtMatrixLayoutDestroy(d_);
  if (desc_) cublasLtMatmulDescDestroy(desc_);
}

void LtMatmul::run(const void* a, const void* b, const void* c, void* d, const void* bias,
                   void* workspace, cudaStream_t stream) const {
  if (shape_.epilogue != GemmEpilogue::kNone && shape_.epilogue != GemmEpilogue::kRelu)
    set(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias, label_);
  const float alpha = shape_.alpha, beta = shape_.has_c ? shape_.beta : 0.0f;
  // Our B is cuBLAS's A and the other way round (see the constructor).
  check(cublasLtMatmul(handle_, desc_, &alpha, b, a_, a, b_, &beta, shape_.has_c ? c : d, c_, d, d_,
                       &algo_, workspace, static_cast<size_t>(workspace_bytes_), stream),
        label_ + ": cublasLtMatmul");
}

}  // namespace ampc::rt::cuda
