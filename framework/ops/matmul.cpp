#include "framework/ops/matmul.h"

#include <Eigen/Core>

#include "framework/autograd.h"
#include "framework/ops/dispatch.h"

namespace gat::ops {

void gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& out) {
  if (out.is_cuda()) return GAT_CUDA_CALL(cuda_impl::gemm(a, transpose_a, b, transpose_b, out));
  dispatch_float(out.dtype(), "matmul", [&](auto zero) {
    using T = decltype(zero);
    using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    Eigen::Map<const Matrix> A(a.data<T>(), a.size(0), a.size(1));  // (M, K) or (K, M)
    Eigen::Map<const Matrix> B(b.data<T>(), b.size(0), b.size(1));  // (K, N) or (N, K)
    Eigen::Map<Matrix> C(out.data<T>(), out.size(0), out.size(1));  // (M, N)
    // Eigen's GEMM splits the output across OpenMP threads (never the K sum): deterministic.
    if (!transpose_a && !transpose_b) C.noalias() = A * B;
    else if (transpose_a && !transpose_b) C.noalias() = A.transpose() * B;
    else if (!transpose_a && transpose_b) C.noalias() = A * B.transpose();
    else C.noalias() = A.transpose() * B.transpose();
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
