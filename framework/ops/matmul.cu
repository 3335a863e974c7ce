// matmul's CUDA backend: cuBLAS on gat::cuda::stream().
//
// cuBLAS is column-major. A row-major (R, C) buffer read column-major is its transpose (C, R)
// with leading dimension C, so the row-major product out = op(a) · op(b) is computed without
// copies as the column-major out^T = op(b)^T · op(a)^T: swap the operands, keep the flags.
#include "gat/framework/cuda_check.h"
#include "gat/framework/ops/matmul.h"

namespace gat::ops::cuda_impl {

namespace {
cublasStatus_t gemm_call(cublasHandle_t handle, cublasOperation_t op_b, cublasOperation_t op_a,
                         int m, int n, int k, const float* b, int ldb, const float* a, int lda,
                         float* c, int ldc) {
  const float alpha = 1.0f, beta = 0.0f;
  return cublasSgemm(handle, op_b, op_a, m, n, k, &alpha, b, ldb, a, lda, &beta, c, ldc);
}
cublasStatus_t gemm_call(cublasHandle_t handle, cublasOperation_t op_b, cublasOperation_t op_a,
                         int m, int n, int k, const double* b, int ldb, const double* a, int lda,
                         double* c, int ldc) {
  const double alpha = 1.0, beta = 0.0;
  return cublasDgemm(handle, op_b, op_a, m, n, k, &alpha, b, ldb, a, lda, &beta, c, ldc);
}

int checked_int(int64_t value, const Tensor& a, const Tensor& b) {
  GAT_CHECK(value <= INT32_MAX, "matmul: dimension ", value, " of a ", a.describe(), " x b ",
            b.describe(), " exceeds cuBLAS's 32-bit sizes");
  return static_cast<int>(value);
}
}  // namespace

void gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& out) {
  const int64_t M = out.size(0), N = out.size(1);
  const int64_t K = transpose_a ? a.size(0) : a.size(1);
  if (M == 0 || N == 0) return;
  if (K == 0) {  // an empty sum: cuBLAS may return early without writing out
    out.zero_();
    return;
  }
  dispatch_float(out.dtype(), "matmul", [&](auto zero) {
    using T = decltype(zero);
    // Column-major view: out^T (N, M) = op(b)^T (N, K) · op(a)^T (K, M); the leading dimension
    // of each buffer is its row-major row length.
    CUBLAS_CHECK(gemm_call(cuda::cublas_handle(), transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                           transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, checked_int(N, a, b),
                           checked_int(M, a, b), checked_int(K, a, b), b.data<T>(),
                           checked_int(b.size(1), a, b), a.data<T>(),
                           checked_int(a.size(1), a, b), out.data<T>(), checked_int(N, a, b)));
  });
}

}  // namespace gat::ops::cuda_impl
