// matmul's CUDA backend: cuBLAS on gat::cuda::stream(), and kernels of its own for small products.
//
// cuBLAS is column-major. A row-major (R, C) buffer read column-major is its transpose (C, R)
// with leading dimension C, so the row-major product out = op(a) · op(b) is computed without
// copies as the column-major out^T = op(b)^T · op(a)^T: swap the operands, keep the flags.
#include <algorithm>
#include <type_traits>

#include "gat/framework/cuda_check.h"
#include "gat/framework/cuda_runtime.h"
#include "gat/framework/ops/detail/loops.cuh"
#include "gat/framework/ops/detail/row_reduce.cuh"
#include "gat/framework/ops/matmul.h"
#include "gat/framework/ops/reduce.h"

namespace gat::ops::cuda_impl {

namespace {

using detail::load_vec;
using detail::store_vec;
using detail::Vec;

cublasStatus_t gemm_call(cublasHandle_t handle, cublasOperation_t op_b, cublasOperation_t op_a, int m, int n,
                         int k, const float* b, int ldb, const float* a, int lda, float* c, int ldc) {
  const float alpha = 1.0f, beta = 0.0f;
  return cublasSgemm(handle, op_b, op_a, m, n, k, &alpha, b, ldb, a, lda, &beta, c, ldc);
}
cublasStatus_t gemm_call(cublasHandle_t handle, cublasOperation_t op_b, cublasOperation_t op_a, int m, int n,
                         int k, const double* b, int ldb, const double* a, int lda, double* c, int ldc) {
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
__global__ void small_gemm_kernel(Operand<T> a, Operand<T> b, T* __restrict__ out, long long M, long long N,
                                  long long K) {
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
    small_gemm_long_k_kernel(Operand<T> a, Operand<T> b, T* __restrict__ out, long long M, long long N,
                             long long K, long long tiles) {  // tiles of N
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

// Long thin products out (M, N) = a^T (M, K) . b (K, N), a (K, M) and b (K, N) row-major, K at
// least kTallMinK and M * N at most kTallOutputs, M and N multiples of 4: the narrow weight
// gradients x^T dy at scale. On the 100M-edge graph (H200, ncu) cuBLAS's split-K took 1.1 ms for
// 64 x 5M x 8 and for each of the fold's two 32 x 5M x 8; here 0.48 and 0.26 ms. Block b sums rows
// [b rows_per_block, (b + 1) rows_per_block) of k into partial[b] (M, N): a thread owns a 4 x 4
// tile of outputs and every `phases`-th row of the range, reading 4 values of a's row and 4 of b's
// with one access each, 4 rows at a time; the phases meet in shared memory in phase order, and
// the blocks' partials are summed in block order by sum_axis. The split depends on K alone:
// reproducible. Wider outputs stay with cuBLAS: at 32 x 5M x 64 (128 tiles, 2 phases) this kernel
// took 1.67 ms and with 4 column slices of 32 tiles 1.64 ms, against cuBLAS's 1.14 ms (each thread
// waits on some 150 batches of loads one after another).
constexpr int kTallThreads = 256;
constexpr long long kTallMinK = 1LL << 16;
constexpr long long kTallOutputs = 512;     // 32 tiles: 8 phases at least
constexpr long long kTallMinRows = 2048;    // rows a block sums, at least ...
constexpr long long kTallMaxBlocks = 1024;  // ... and at most this many blocks

template <class T>
__global__ void __launch_bounds__(kTallThreads)
    tall_gemm_tn_kernel(const T* __restrict__ a,  // (K, M)
                        const T* __restrict__ b,  // (K, N)
                        T* __restrict__ partial,  // (blocks, M, N)
                        long long K, int M, int N, long long rows_per_block) {
  __shared__ T tile_sums[kTallThreads][16];
  const int tiles_n = N / 4, tiles = (M / 4) * tiles_n, phases = kTallThreads / tiles;
  const int tile = threadIdx.x % tiles, phase = threadIdx.x / tiles;
  const int m0 = tile / tiles_n * 4, n0 = tile % tiles_n * 4;
  T acc[4][4] = {};
  const long long begin = blockIdx.x * rows_per_block, end = min(K, begin + rows_per_block);
  auto add_rows = [&](long long k, auto count) {  // rows k, k + phases, ... (count of them)
    constexpr int U = decltype(count)::value;
    Vec<T, 4> x[U], y[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      x[u] = load_vec<T, 4>(a + (k + u * phases) * M + m0);
      y[u] = load_vec<T, 4>(b + (k + u * phases) * N + n0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += x[u].v[i] * y[u].v[j];
  };
  if (phase < phases) {
    long long k = begin + phase;
    for (; k + 3 * phases < end; k += 4 * phases) add_rows(k, std::integral_constant<int, 4>{});
    for (; k < end; k += phases) add_rows(k, std::integral_constant<int, 1>{});
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) tile_sums[threadIdx.x][i * 4 + j] = acc[i][j];
  }
  __syncthreads();
  for (int o = threadIdx.x; o < M * N; o += kTallThreads) {
    const int m = o / N, n = o - m * N;
    const int owner = m / 4 * tiles_n + n / 4, within = m % 4 * 4 + n % 4;
    T sum = 0;
    for (int p = 0; p < phases; ++p) sum += tile_sums[p * tiles + owner][within];
    partial[blockIdx.x * static_cast<long long>(M) * N + o] = sum;
  }
}

// Tall narrow products out (M, N) = a (M, K) . op(b) (K, N), M at least kTallMinK, K at most
// kTallNarrowK and N at most kTallNarrowN, both multiples of 4: the narrow projections at scale.
// On the 100M-edge graph (H200, ncu at run clocks) cuBLAS ran the fold's two 5M x 32 x 8 products
// in 0.48 ms each and the output layer's 5M x 64 x 8 in 0.73 ms, as 5 launches of 64-row tiles;
// here 0.27 and 0.51 ms. op(b) sits in shared memory (a block loads it once and strides over
// rows) and a thread owns 4 columns of one row: the row's N / 4 threads read it together, each
// adds its K products in k order (a fixed order: reproducible) and writes 16 bytes. Every 4
// multiply-adds read 16 bytes of shared memory, so wide outputs stay with cuBLAS: 5M x 32 x 64
// took 1.68 ms here against its 0.90.
constexpr int kTallNarrowK = 64, kTallNarrowN = 16;
template <class T>
__global__ void __launch_bounds__(kTallThreads)
    tall_gemm_nn_kernel(const T* __restrict__ a,                 // (M, K)
                        Operand<T> b,                            // op(b) (K, N)
                        T* __restrict__ out,                     // (M, N)
                        int M, int K, int N) {                   // M * N / 4 < 2^31
  __shared__ Vec<T, 4> b_tile[kTallNarrowK * kTallNarrowN / 4];  // op(b) row-major, 4 columns a vector
  const int lanes = N / 4;                                       // threads per row of out
  for (int v = threadIdx.x; v < K * lanes; v += blockDim.x) {
    const int k = v / lanes, n = (v - k * lanes) * 4;
#pragma unroll
    for (int j = 0; j < 4; ++j) b_tile[v].v[j] = b.at(k, n + j);
  }
  __syncthreads();
  const unsigned items = static_cast<unsigned>(M) * static_cast<unsigned>(lanes);
  for (unsigned t = blockIdx.x * blockDim.x + threadIdx.x; t < items; t += gridDim.x * blockDim.x) {
    const unsigned m = t / lanes, q = t - m * lanes;  // row and column vector
    const T* row = a + static_cast<long long>(m) * K;
    T acc[4] = {};
    auto add = [&](int k0, auto count) {  // a's row at [k0, k0 + 4 count), the loads issued first
      constexpr int U = decltype(count)::value;
      Vec<T, 4> x[U];
#pragma unroll
      for (int u = 0; u < U; ++u) x[u] = load_vec<T, 4>(row + k0 + 4 * u);
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          const Vec<T, 4> w = b_tile[(k0 + 4 * u + kk) * lanes + q];
#pragma unroll
          for (int j = 0; j < 4; ++j) acc[j] += x[u].v[kk] * w.v[j];
        }
    };
    int k0 = 0;
    for (; k0 + 16 <= K; k0 += 16) add(k0, std::integral_constant<int, 4>{});
    for (; k0 < K; k0 += 4) add(k0, std::integral_constant<int, 1>{});
    store_vec<T, 4>(out + static_cast<long long>(m) * N + 4 * q, Vec<T, 4>{{acc[0], acc[1], acc[2], acc[3]}});
  }
}

// Tall products with a short sum into wide rows, out (M, N) = a (M, K) . op(b) (K, N), M at least
// kTallMinK, K a multiple of 4 up to kTallShortK and N above kTallNarrowN up to kTallWideN, a
// multiple of 4: the data gradient dy W^T of a narrow projection at scale. cuBLAS ran the 100M-edge
// output layer's 5M x 8 x 64 as 5 launches in 0.55 ms (H200, ncu), where moving its bytes takes
// about 0.34. A thread keeps 4 columns of op(b) (K x 4 values) in registers and owns those columns
// of every row it visits: a row's N / 4 threads read a's row together (one address for all of
// them) and each writes 16 bytes, so every byte of a and out moves once; the loads of a few rows
// are issued before their sums. Each output adds its K products in k order: reproducible.
// Measured at 5M x 8 x 64 (ncu, H200): 0.48 ms at 98 registers (2 blocks a multiprocessor), 0.46
// at the 80 that 3 blocks allow (kept), 0.49 and 0.50 with 2 rows or 1 row a batch; about 3.1 TB/s
// of DRAM traffic either way, where 0.34 ms would be the copy bandwidth's.
constexpr int kTallShortK = 16, kTallWideN = 128;
template <class T, int K>
__global__ void __launch_bounds__(kTallThreads, 3)
    tall_gemm_short_k_kernel(const T* __restrict__ a,  // (M, K)
                             Operand<T> b,             // op(b) (K, N)
                             T* __restrict__ out,      // (M, N)
                             long long M, int N) {
  const int lanes = N / 4, rows_per_pass = kTallThreads / lanes;  // threads of a row, rows a block takes
  const int q = threadIdx.x % lanes, r = threadIdx.x / lanes;     // column vector, row in the pass
  if (r >= rows_per_pass) return;
  T w[K][4];  // columns [4 q, 4 q + 4) of op(b)
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) w[k][j] = b.at(k, 4 * q + j);
  // Rows whose loads are in flight together: a's rows of R passes, about 32 registers of them.
  constexpr int kWords = K * static_cast<int>(sizeof(T)) / 4, R = kWords >= 32 ? 1 : kWords >= 16 ? 2 : 4;
  const long long stride = static_cast<long long>(gridDim.x) * rows_per_pass;
  for (long long m0 = static_cast<long long>(blockIdx.x) * rows_per_pass + r; m0 < M; m0 += R * stride) {
    Vec<T, 4> x[R][K / 4];
#pragma unroll
    for (int i = 0; i < R; ++i)
      if (m0 + i * stride < M)
#pragma unroll
        for (int u = 0; u < K / 4; ++u) x[i][u] = load_vec<T, 4>(a + (m0 + i * stride) * K + 4 * u);
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const long long m = m0 + i * stride;
      if (m >= M) break;
      T acc[4] = {};
#pragma unroll
      for (int k = 0; k < K; ++k)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[j] += x[i][k / 4].v[k % 4] * w[k][j];
      store_vec<T, 4>(out + m * N + 4 * q, Vec<T, 4>{{acc[0], acc[1], acc[2], acc[3]}});
    }
  }
}

// A grid-stride grid of the tall kernels: `wanted` blocks, at most 4 waves of resident threads.
long long tall_blocks(long long wanted) {
  return std::min(wanted, std::max(1LL, 4 * cuda::resident_threads() / kTallThreads));
}

int checked_int(int64_t value, const Tensor& a, const Tensor& b) {
  GAT_CHECK(value <= INT32_MAX, "matmul: dimension ", value, " of a ", a.describe(), " x b ", b.describe(),
            " exceeds cuBLAS's 32-bit sizes");
  return static_cast<int>(value);
}
// bf16 operands (matmul.cpp makes both bf16 in bf16 precision): cuBLAS's bf16 GEMM with the
// products summed in f32 (CUBLAS_COMPUTE_32F), the output rounded once to bf16, or kept f32 (an f32
// weight's gradient). The column-major view is gemm's below. cuBLAS gives the same bits run to run.
void gemm_bf16(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& out) {
  const int64_t M = out.size(0), N = out.size(1), K = transpose_a ? a.size(0) : a.size(1);
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_CHECK(cublasGemmEx(
      cuda::cublas_handle(), transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N,
      checked_int(N, a, b), checked_int(M, a, b), checked_int(K, a, b), &alpha, b.data<bf16>(), CUDA_R_16BF,
      checked_int(b.size(1), a, b), a.data<bf16>(), CUDA_R_16BF, checked_int(a.size(1), a, b), &beta,
      out.raw_data(), out.dtype() == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F, checked_int(N, a, b),
      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
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
  if (a.dtype() == DType::bf16) return gemm_bf16(a, transpose_a, b, transpose_b, out);
  dispatch_float(out.dtype(), "matmul", [&](auto zero) {
    using T = decltype(zero);
    if (M * N * K <= kSmallMacs) {
      const Operand<T> op_a = operand<T>(a, transpose_a), op_b = operand<T>(b, transpose_b);
      if (K <= kShortK) {
        small_gemm_kernel<T>
            <<<cuda::blocks_for(M * N), 256, 0, cuda::stream()>>>(op_a, op_b, out.data<T>(), M, N, K);
        CUDA_CHECK_LAUNCH("small_gemm_kernel");
      } else {
        const long long tiles = (N + kLongKTile - 1) / kLongKTile;
        const unsigned blocks = static_cast<unsigned>(std::min<long long>(M * tiles, cuda::kMaxGridBlocks));
        small_gemm_long_k_kernel<T>
            <<<blocks, kLongKThreads, 0, cuda::stream()>>>(op_a, op_b, out.data<T>(), M, N, K, tiles);
        CUDA_CHECK_LAUNCH("small_gemm_long_k_kernel");
      }
      return;
    }
    if (transpose_a && !transpose_b && K >= kTallMinK && M * N <= kTallOutputs && M % 4 == 0 && N % 4 == 0 &&
        detail::all_aligned(4 * sizeof(T), {a.data<T>(), b.data<T>()})) {
      const long long rows_per_block = std::max(kTallMinRows, (K + kTallMaxBlocks - 1) / kTallMaxBlocks);
      const long long blocks = (K + rows_per_block - 1) / rows_per_block;
      Tensor partial = Tensor::empty({blocks, M * N}, out.dtype(), Device::cuda, "matmul partials");
      tall_gemm_tn_kernel<T><<<static_cast<unsigned>(blocks), kTallThreads, 0, cuda::stream()>>>(
          a.data<T>(), b.data<T>(), partial.data<T>(), K, static_cast<int>(M), static_cast<int>(N),
          rows_per_block);
      CUDA_CHECK_LAUNCH("tall_gemm_tn_kernel");
      sum_axis(partial, 1, blocks, M * N, out);
      return;
    }
    if (!transpose_a && M >= kTallMinK && K <= kTallNarrowK && N <= kTallNarrowN && K % 4 == 0 &&
        N % 4 == 0 && M * (N / 4) < (1LL << 31) &&
        detail::all_aligned(4 * sizeof(T), {a.data<T>(), out.data<T>()})) {
      const long long blocks = tall_blocks((M * (N / 4) + kTallThreads - 1) / kTallThreads);
      tall_gemm_nn_kernel<T><<<static_cast<unsigned>(blocks), kTallThreads, 0, cuda::stream()>>>(
          a.data<T>(), operand<T>(b, transpose_b), out.data<T>(), static_cast<int>(M), static_cast<int>(K),
          static_cast<int>(N));
      CUDA_CHECK_LAUNCH("tall_gemm_nn_kernel");
      return;
    }
    if (!transpose_a && M >= kTallMinK && K <= kTallShortK && K % 4 == 0 && N > kTallNarrowN &&
        N <= kTallWideN && N % 4 == 0 && detail::all_aligned(4 * sizeof(T), {a.data<T>(), out.data<T>()})) {
      const long long rows_per_pass = kTallThreads / (N / 4);
      const long long blocks = tall_blocks((M + rows_per_pass - 1) / rows_per_pass);
      auto launch = [&](auto k) {
        tall_gemm_short_k_kernel<T, decltype(k)::value>
            <<<static_cast<unsigned>(blocks), kTallThreads, 0, cuda::stream()>>>(
                a.data<T>(), operand<T>(b, transpose_b), out.data<T>(), M, static_cast<int>(N));
        CUDA_CHECK_LAUNCH("tall_gemm_short_k_kernel");
      };
      switch (K) {
        case 4:
          launch(std::integral_constant<int, 4>{});
          break;
        case 8:
          launch(std::integral_constant<int, 8>{});
          break;
        case 12:
          launch(std::integral_constant<int, 12>{});
          break;
        default:
          launch(std::integral_constant<int, 16>{});
          break;  // K == 16
      }
      return;
    }
    // Column-major view: out^T (N, M) = op(b)^T (N, K) · op(a)^T (K, M); the leading dimension
    // of each buffer is its row-major row length.
    CUBLAS_CHECK(gemm_call(cuda::cublas_handle(), transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                           transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, checked_int(N, a, b),
                           checked_int(M, a, b), checked_int(K, a, b), b.data<T>(),
                           checked_int(b.size(1), a, b), a.data<T>(), checked_int(a.size(1), a, b),
                           out.data<T>(), checked_int(N, a, b)));
  });
}

}  // namespace gat::ops::cuda_impl
