#include "gat/framework/ops/matmul.h"

#include <omp.h>

// Eigen puts a product's blocking buffers on the stack up to this many bytes (128 KiB by
// default), which overflowed a 64 KiB stack (ulimit -s 64) and OpenMP threads' stacks of that
// size: larger buffers come from the heap, one allocation per product.
#define EIGEN_STACK_ALLOCATION_LIMIT 4096
#include <Eigen/Core>
#include <algorithm>
#include <type_traits>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/detail/bf16_in_f32.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/dispatch.h"

namespace gat::ops {

namespace {
constexpr int64_t kTile = 128;  // output tile edge of the CPU product
// The height of the row tiles of a product whose output is a single kTile tile (a weight's
// gradient x^T dy: Cora's (64, 7) from 2,708 rows, once a whole step's serial work): such a product
// is cut into rows of this many, so that the threads share it. Eigen sums an element's terms in K
// blocks that depend on K alone, and takes rows in panels of 8 (f32) or 4 (f64) rows from a tile's
// first: a multiple of both keeps every element's sums, and the result's bits, as they were.
constexpr int64_t kThinTileRows = 16;
// Products of fewer multiply-adds run on the calling thread: a parallel region costs more than
// they do. Below 2 x 50,000 Eigen does not start threads of its own either (its kMinTaskSize).
constexpr double kParallelWork = 1e5;

// Sparse inputs. Node features are often mostly zeros (Cora's bag-of-words rows: 1.3% non-zero,
// fewer after input dropout): when A is that sparse, walking its non-zeros beats a dense GEMM by
// the inverse density. The choice looks at up to 64 evenly spaced rows of A, so it depends on the
// input alone, and every output element is summed in ascending k (or i) order on one thread:
// deterministic for any thread count.
constexpr double kSparseDensity = 0.05;

template <class T>
bool mostly_zeros(const T* a, int64_t rows, int64_t cols) {
  if (rows == 0 || cols == 0) return false;
  const int64_t step = std::max<int64_t>(1, rows / 64);
  int64_t nonzero = 0, seen = 0;
  for (int64_t i = 0; i < rows; i += step, seen += cols)
    for (int64_t k = 0; k < cols; ++k) nonzero += a[i * cols + k] != T(0);
  return static_cast<double>(nonzero) < kSparseDensity * static_cast<double>(seen);
}

// C (M, N) = A (M, K) · B (K, N), skipping A's zeros; parallel over rows of C.
template <class T>
void sparse_a_times_b(const T* a, const T* b, T* c, int64_t M, int64_t K, int64_t N) {
#pragma omp parallel for schedule(static) if (M * N > detail::kParallelThreshold)
  for (int64_t i = 0; i < M; ++i) {
    T* ci = c + i * N;
    std::fill(ci, ci + N, T(0));
    for (int64_t k = 0; k < K; ++k) {
      const T v = a[i * K + k];
      if (v == T(0)) continue;
      const T* bk = b + k * N;
      for (int64_t j = 0; j < N; ++j) ci[j] += v * bk[j];
    }
  }
}

// C (K, N) = A^T · G with A (M, K), G (M, N), skipping A's zeros; each thread owns a range of k
// (rows of C) and walks i in ascending order.
template <class T>
void sparse_at_times_g(const T* a, const T* g, T* c, int64_t M, int64_t K, int64_t N) {
  std::fill(c, c + K * N, T(0));
#pragma omp parallel if (K * N > 65536)
  {
    const int threads = omp_get_num_threads(), id = omp_get_thread_num();
    const int64_t k0 = K * id / threads, k1 = K * (id + 1) / threads;
    for (int64_t i = 0; i < M; ++i) {
      const T* ai = a + i * K;
      const T* gi = g + i * N;
      for (int64_t k = k0; k < k1; ++k) {
        const T v = ai[k];
        if (v == T(0)) continue;
        T* ck = c + k * N;
        for (int64_t j = 0; j < N; ++j) ck[j] += v * gi[j];
      }
    }
  }
}
// Whether C (M, N) = A (M, K) · opB (K, N), cut into gemm's tiles of tile_rows rows (N at most kTile, one
// column of tiles), is summed by Eigen with each element's K products added one after another from zero, in
// k order, so that short_k_product gives its bits. Eigen 3.4's kernels, compiled for baseline x86-64 (SSE,
// no fused multiply-add; -ffp-contract=off), do so when K < 8 (their unrolled loops, which take 8 steps and
// split a sum between two registers, need K >= 8), the N output columns come in whole groups of 4 (a
// leftover column's path adds 4 k at a time), no tile is a single row (Eigen then multiplies by a vector,
// 4 k at a time), and K + rows + N >= 20 (below that a tile is a coefficient-wise product). Cora's d x of
// the output layer, (2708, 7) x (7, 64), is one.
bool sums_in_k_order(int64_t M, int64_t K, int64_t N, int64_t tile_rows) {
  return K < 8 && N % 4 == 0 && N >= 20 && N <= kTile && M % tile_rows != 1;
}

// C (M, N) = A (M, K) · opB (K, N), opB = B (K, N) or B^T for B (N, K), with K < 8: each element's products
// added in k order from zero (sums_in_k_order), a row's columns side by side in vector registers, rows over
// the threads.
template <class T>
void short_k_product(const T* a, const T* b, bool transpose_b, T* c, int64_t M, int64_t K, int64_t N) {
  T opb[8 * kTile];  // opB (K, N)
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j) opb[k * N + j] = transpose_b ? b[j * K + k] : b[k * N + j];
  const T* bk = opb;
  detail::parallel_for(
      M,
      [=](int64_t i) {
        // 16 columns at a time (then 4: N % 4 == 0), their sums in registers across the k steps
        const T* ai = a + i * K;
        T* ci = c + i * N;
        int64_t j = 0;
        auto columns = [&](auto width) {
          T acc[width] = {};
          for (int64_t k = 0; k < K; ++k)
            for (int64_t l = 0; l < width; ++l) acc[l] += ai[k] * bk[k * N + j + l];
          for (int64_t l = 0; l < width; ++l) ci[j + l] = acc[l];
        };
        for (; j + 16 <= N; j += 16) columns(std::integral_constant<int64_t, 16>{});
        for (; j < N; j += 4) columns(std::integral_constant<int64_t, 4>{});
      },
      N * K);
}
}  // namespace

namespace cpu_impl {

void gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& out) {
  dispatch_float(out.dtype(), "matmul", [&](auto zero) {
    using T = decltype(zero);
    using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    Eigen::Map<const Matrix> A(a.data<T>(), a.size(0), a.size(1));  // (M, K) or (K, M)
    Eigen::Map<const Matrix> B(b.data<T>(), b.size(0), b.size(1));  // (K, N) or (N, K)
    Eigen::Map<Matrix> C(out.data<T>(), out.size(0), out.size(1));  // (M, N)
    const int64_t M = C.rows(), N = C.cols(), K = transpose_a ? A.rows() : A.cols();
    if (!transpose_b && mostly_zeros(a.data<T>(), a.size(0), a.size(1))) {
      if (transpose_a)
        sparse_at_times_g(a.data<T>(), b.data<T>(), out.data<T>(), K, M, N);
      else
        sparse_a_times_b(a.data<T>(), b.data<T>(), out.data<T>(), M, K, N);
      return;
    }
    const double work = static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
    const bool one_tile = M <= kTile && N <= kTile;
    const int64_t tile_rows = one_tile && work >= kParallelWork ? kThinTileRows : kTile;
    if (!transpose_a && sums_in_k_order(M, K, N, tile_rows)) {
      short_k_product(a.data<T>(), b.data<T>(), transpose_b, out.data<T>(), M, K, N);
      return;
    }
    const int64_t row_tiles = (M + tile_rows - 1) / tile_rows, col_tiles = (N + kTile - 1) / kTile;
    // Fixed output tiles (kTile x kTile, or kThinTileRows x kTile) spread over the OpenMP threads, each one a
    // single-threaded Eigen product (Eigen starts no threads inside a parallel region of several threads, nor
    // when one thread is allowed, nor below kParallelWork). Every tile is computed the same way by whichever
    // thread runs it, so the result does not depend on the thread count; Eigen's own threading would change
    // its K blocking, and with it the rounding, with the thread count.
    auto tiled = [&](const auto& opA, const auto& opB) {  // opA (M, K), opB (K, N)
#pragma omp parallel for schedule(static) if (work >= kParallelWork)
      for (int64_t t = 0; t < row_tiles * col_tiles; ++t) {
        const int64_t r0 = t / col_tiles * tile_rows, c0 = t % col_tiles * kTile;
        const int64_t rows = std::min(tile_rows, M - r0), cols = std::min(kTile, N - c0);
        C.block(r0, c0, rows, cols).noalias() = opA.middleRows(r0, rows) * opB.middleCols(c0, cols);
      }
    };
    if (!transpose_a && !transpose_b)
      tiled(A, B);
    else if (transpose_a && !transpose_b)
      tiled(A.transpose(), B);
    else if (!transpose_a && transpose_b)
      tiled(A, B.transpose());
    else
      tiled(A.transpose(), B.transpose());
  });
}

}  // namespace cpu_impl

namespace kernels {

void gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& out) {
  if (out.is_cuda()) return GAT_CUDA_CALL(cuda_impl::gemm(a, transpose_a, b, transpose_b, out));
  cpu_impl::gemm(a, transpose_a, b, transpose_b, out);
}

}  // namespace kernels

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (detail::bf16_in_f32_on_cpu(a, b))
    return detail::rounded_to_bf16(matmul(detail::widened(a), detail::widened(b)));
  // bf16 on CUDA: both operands are read as bf16, an f32 one (a master weight) as a bf16 copy
  // made here, and the products are summed in f32 (matmul.cu). The output is bf16; each gradient
  // has its input's dtype, so an f32 weight's is f32, not rounded to bf16.
  const bool bf16 = detail::is_bf16(a) || detail::is_bf16(b);
  if (bf16) {
    auto check_bf16_or_f32 = [](const char* name, const Tensor& x) {
      check_defined("matmul", name, x);
      GAT_CHECK(x.dtype() == DType::bf16 || x.dtype() == DType::f32, "matmul: '", name,
                "' must be bf16 or f32", " beside a bf16 operand, got ", x.describe());
    };
    check_bf16_or_f32("a", a);
    check_bf16_or_f32("b", b);
    GAT_CHECK(a.device() == b.device(), "matmul: 'a' ", a.describe(), " and 'b' ", b.describe(),
              " are on different devices");
  } else {
    check_float("matmul", "a", a);
    check_same("matmul", "a", a, "b", b);
  }
  GAT_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "matmul: cannot multiply a ",
            a.describe(), " by b ", b.describe(), " (expected (M, K) x (K, N))");
  auto read_as_bf16 = [bf16](const Tensor& x) { return bf16 && !detail::is_bf16(x) ? x.to(DType::bf16) : x; };
  const Tensor a_read = read_as_bf16(a), b_read = read_as_bf16(b);
  Tensor out = Tensor::empty({a.size(0), b.size(1)}, a_read.dtype(), a.device(), "matmul");  // (M, N)
  kernels::gemm(a_read, false, b_read, false, out);
  return autograd::record(
      "matmul", out, {a, b},
      [a = a_read.detach(), b = b_read.detach(), a_dtype = a.dtype(), b_dtype = b.dtype(),
       need_a = a.requires_grad(), need_b = b.requires_grad()](const Tensor& grad_out) {
        auto a_t_g = [&b, b_dtype](const std::vector<Tensor>& in) {  // A^T (K, M) · G (M, N)
          Tensor grad = Tensor::empty(b.shape(), b_dtype, b.device(), "matmul grad_b");
          kernels::gemm(in[0], true, in[1], false, grad);
          return std::vector<Tensor>{grad};
        };
        // With grad_a, grad_b (b is then usually a weight) is side work, queued first so that it
        // runs beside grad_a and what the pass does with it.
        Tensor grad_a, grad_b;
        if (need_b)
          grad_b = (need_a ? autograd::side_gradients({a, grad_out}, a_t_g) : a_t_g({a, grad_out}))[0];
        if (need_a) {  // G (M, N) · B^T (N, K)
          grad_a = Tensor::empty(a.shape(), a_dtype, a.device(), "matmul grad_a");
          kernels::gemm(grad_out, false, b, true, grad_a);
        }
        return std::vector<Tensor>{grad_a, grad_b};
      });
}

}  // namespace gat::ops
