// matmul(a, b): the matrix product a (M, K) · b (K, N) -> (M, N), f32 or f64, CPU and CUDA.
//
// Backward: dA = G · B^T (M, K), dB = A^T · G (K, N), for G = d out (M, N). A tensor used as both
// inputs (matmul(x, x)) receives the sum of both gradients.
// CPU: Eigen on row-major maps, fixed output tiles spread over OpenMP threads (bitwise the same
// for any thread count). CUDA: cuBLAS {S,D}gemm on gat::cuda::stream() in the handle's default
// math mode (full FP32, no TF32); products of at most 2^22 multiply-adds (a small output layer) in
// kernels of the op's own with a fixed summation order (matmul.cu).
// bf16 inputs: computed in f32, the result stored in bf16 (docs/precision.md). On the CPU through
// f32 copies. On CUDA a bf16 operand beside an f32 one (a master weight) makes the f32 one a bf16
// copy; cuBLAS's bf16 GEMM then sums the products in f32 (cublasGemmEx, CUBLAS_COMPUTE_32F), in
// the backward too. An f32 input's gradient is f32.
// Errors: beside a bf16 operand, the other one f64.
#pragma once

#include "gat/framework/ops/kernel.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

// a: (M, K), b: (K, N), same dtype (f32|f64) and device  ->  (M, N). Records autograd.
Tensor matmul(const Tensor& a, const Tensor& b);

// The kernel (docs/design.md, the op pattern), shared by matmul's forward and backward passes:
// out = op(a) · op(b) with op(x) = x^T when the flag is set, overwriting out; no autograd, no
// shape checks (callers check). kernels:: runs cpu_impl:: or cuda_impl:: by out's device.
//   a: (M, K) or (K, M) if transpose_a;  b: (K, N) or (N, K) if transpose_b;  out: (M, N)
// One dtype throughout, or on CUDA: a and b bf16, out bf16 or f32.
GAT_DECLARE_KERNEL_FN(gemm,
                      (const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& out))

}  // namespace gat::ops
