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
// Long sums: a block of kLongKThreads per output row and tile of kLongKTile columns, thread t
// taking k = t, t + kLongKThreads, ..., then a shared-memory tree: a fixed order either way, so
// results are reproducible.
constexpr long long kSmallMacs = 1LL << 22;
constexpr long long kShortK = 256;
constexpr int kLongKThreads = 256;
constexpr int kLongKTile = 8;

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

// The same for long sums: a block per (output row m, tile of kLongKTile columns). Thread t adds
// k = t, t + kLongKThreads, ... for each column of the tile, reading a's element once for all of
// them; the threads' partial sums meet by block_tree_sums' trees (the order of a block per
// output). Cora's 64 x 2,708 x 7 weight gradient takes 64 blocks, each reading its row of op(a)
// once for the 7 columns.
template <class T>
__global__ void __launch_bounds__(kLongKThreads)
    small_gemm_long_k_kernel(Operand<T> a, Operand<T> b, T* __restrict__ out, long long M,
                             long long N, long long K, long long tiles) {  // tiles of N
  __shared__ T partial[kLongKTile][kLongKThreads];
  for (long long item = blockIdx.x; item < M * tiles; item += gridDim.x) {
    const long long m = item / tiles, n0 = (item - m * tiles) * kLongKTile;
    const int width = static_cast<int>(min(static_cast<long long>(kLongKTile), N - n0));
    T acc[kLongKTile] = {};
    for (long long k = threadIdx.x; k < K; k += kLongKThreads) {
      const T x = a.at(m, k);
#pragma unroll
      for (int j = 0; j < kLongKTile; ++j)
        if (j < width) acc[j] += x * b.at(k, n0 + j);
    }
    T sums[kLongKTile];
    block_tree_sums(acc, &partial[0][0], sums);
    if (threadIdx.x == 0)
      for (int j = 0; j < width; ++j) out[m * N + n0 + j] = sums[j];
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
        const long long tiles = (N + kLongKTile - 1) / kLongKTile;
        const unsigned blocks = static_cast<unsigned>(std::min<long long>(M * tiles, cuda::kMaxGridBlocks));
        small_gemm_long_k_kernel<T><<<blocks, kLongKThreads, 0, cuda::stream()>>>(op_a, op_b, out.data<T>(), M, N, K,
                                                                                 tiles);
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
