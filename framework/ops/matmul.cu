// matmul's CUDA backend: cuBLAS on gat::cuda::stream(), and kernels of its own for small products.
//
// cuBLAS is column-major. A row-major (R, C) buffer read column-major is its transpose (C, R)
// with leading dimension C, so the row-major product out = op(a) · op(b) is computed without
// copies as the column-major out^T = op(b)^T · op(a)^T: swap the operands, keep the flags.
#include <algorithm>

#include "gat/framework/cuda_check.h"
#include "gat/framework/ops/matmul.h"
#include "gat/framework/ops/row_reduce.cuh"

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

// Small products (at most kSmallMacs multiply-adds) run in kernels of their own. For the output
// layer of Cora's GAT (2,708 x 64 x 7 forward; 2,708 x 7 x 64 and 64 x 2,708 x 7 backward) cuBLAS
// chose split-K kernels followed by a reduce launch: six kernels, about 35 us of ncu time a
// training step. Short sums (K <= kShortK): a thread per output adds its K products in k order.
// Long sums: a block of kLongKThreads per output, thread t taking k = t, t + kLongKThreads, ...,
// then a shared-memory tree: a fixed order either way, so results are reproducible.
constexpr long long kSmallMacs = 1LL << 22;
constexpr long long kShortK = 256;
constexpr int kLongKThreads = 256;

// Element (r, c) of a row-major matrix or of its transpose: p[r * row_stride + c * col_stride].
template <class T>
struct Operand {
  const T* p;
  long long row_stride, col_stride;
  __device__ T at(long long r, long long c) const { return p[r * row_stride + c * col_stride]; }
};
template <class T>
Operand<T> operand(const Tensor& x, bool transpose) {  // op(x) of a row-major x
  const long long cols = x.size(1);
  return transpose ? Operand<T>{x.data<T>(), 1, cols} : Operand<T>{x.data<T>(), cols, 1};
}

// out (M, N) = op(a) (M, K) . op(b) (K, N), a thread per output.
template <class T>
__global__ void small_gemm_kernel(Operand<T> a, Operand<T> b, T* __restrict__ out, long long M,
                                  long long N, long long K) {
  for (long long t = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; t < M * N;
       t += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long m = t / N, n = t - m * N;
    T acc = 0;
    for (long long k = 0; k < K; ++k) acc += a.at(m, k) * b.at(k, n);
    out[t] = acc;
  }
}

// The same with a block per output, for long sums.
template <class T>
__global__ void __launch_bounds__(kLongKThreads)
    small_gemm_long_k_kernel(Operand<T> a, Operand<T> b, T* __restrict__ out, long long M,
                             long long N, long long K) {
  __shared__ T partial[kLongKThreads];
  for (long long t = blockIdx.x; t < M * N; t += gridDim.x) {
    const long long m = t / N, n = t - m * N;
    T acc = 0;
    for (long long k = threadIdx.x; k < K; k += kLongKThreads) acc += a.at(m, k) * b.at(k, n);
    acc = block_tree_sum(acc, partial);
    if (threadIdx.x == 0) out[t] = acc;
  }
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
    if (M * N * K <= kSmallMacs) {
      const Operand<T> op_a = operand<T>(a, transpose_a), op_b = operand<T>(b, transpose_b);
      if (K <= kShortK) {
        small_gemm_kernel<T><<<cuda::blocks_for(M * N), 256, 0, cuda::stream()>>>(op_a, op_b, out.data<T>(), M, N, K);
        CUDA_CHECK_LAUNCH("small_gemm_kernel");
      } else {
        const unsigned blocks = static_cast<unsigned>(std::min<long long>(M * N, cuda::kMaxGridBlocks));
        small_gemm_long_k_kernel<T><<<blocks, kLongKThreads, 0, cuda::stream()>>>(op_a, op_b, out.data<T>(), M, N, K);
        CUDA_CHECK_LAUNCH("small_gemm_long_k_kernel");
      }
      return;
    }
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
