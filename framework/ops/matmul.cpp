#include "framework/ops/matmul.h"

#include <Eigen/Core>
#include <algorithm>

#include "framework/autograd.h"
#include "framework/ops/dispatch.h"

namespace gat::ops {

namespace {
constexpr int64_t kTile = 128;  // output tile edge of the CPU product
// Products of fewer multiply-adds run on the calling thread: a parallel region costs more than
// they do. Below 2 x 50,000 Eigen does not start threads of its own either (its kMinTaskSize).
constexpr double kParallelWork = 1e5;
}  // namespace

void gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& out) {
  if (out.is_cuda()) return GAT_CUDA_CALL(cuda_impl::gemm(a, transpose_a, b, transpose_b, out));
  dispatch_float(out.dtype(), "matmul", [&](auto zero) {
    using T = decltype(zero);
    using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    Eigen::Map<const Matrix> A(a.data<T>(), a.size(0), a.size(1));  // (M, K) or (K, M)
    Eigen::Map<const Matrix> B(b.data<T>(), b.size(0), b.size(1));  // (K, N) or (N, K)
    Eigen::Map<Matrix> C(out.data<T>(), out.size(0), out.size(1));  // (M, N)
    const int64_t M = C.rows(), N = C.cols(), K = transpose_a ? A.rows() : A.cols();
    const int64_t row_tiles = (M + kTile - 1) / kTile, col_tiles = (N + kTile - 1) / kTile;
    const double work = static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
    // Fixed kTile x kTile output tiles spread over the OpenMP threads, each one a single-threaded
    // Eigen product (Eigen starts no threads inside a parallel region of several threads, nor when
    // one thread is allowed, nor below kParallelWork). Every tile is computed the same way by
    // whichever thread runs it, so the result does not depend on the thread count; Eigen's own
    // threading would change its K blocking, and with it the rounding, with the thread count.
    auto tiled = [&](const auto& opA, const auto& opB) {  // opA (M, K), opB (K, N)
#pragma omp parallel for schedule(static) if (work >= kParallelWork)
      for (int64_t t = 0; t < row_tiles * col_tiles; ++t) {
        const int64_t r0 = t / col_tiles * kTile, c0 = t % col_tiles * kTile;
        const int64_t rows = std::min(kTile, M - r0), cols = std::min(kTile, N - c0);
        C.block(r0, c0, rows, cols).noalias() = opA.middleRows(r0, rows) * opB.middleCols(c0, cols);
      }
    };
    if (!transpose_a && !transpose_b) tiled(A, B);
    else if (transpose_a && !transpose_b) tiled(A.transpose(), B);
    else if (!transpose_a && transpose_b) tiled(A, B.transpose());
    else tiled(A.transpose(), B.transpose());
  });
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_float("matmul", "a", a);
  check_same("matmul", "a", a, "b", b);
  GAT_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0),
            "matmul: cannot multiply a ", a.describe(), " by b ", b.describe(),
            " (expected (M, K) x (K, N))");
  Tensor out = Tensor::empty({a.size(0), b.size(1)}, a.dtype(), a.device(), "matmul");  // (M, N)
  gemm(a, false, b, false, out);
  return autograd::record(
      "matmul", out, {a, b}, [a = a.detach(), b = b.detach(), need_a = a.requires_grad(),
                              need_b = b.requires_grad()](const Tensor& grad_out) {
        Tensor grad_a, grad_b;
        if (need_a) {  // G (M, N) · B^T (N, K)
          grad_a = Tensor::empty(a.shape(), a.dtype(), a.device(), "matmul grad_a");
          gemm(grad_out, false, b, true, grad_a);
        }
        if (need_b) {  // A^T (K, M) · G (M, N)
          grad_b = Tensor::empty(b.shape(), b.dtype(), b.device(), "matmul grad_b");
          gemm(a, true, grad_out, false, grad_b);
        }
        return std::vector<Tensor>{grad_a, grad_b};
      });
}

}  // namespace gat::ops
