// to_dtype(x, dtype): x's values as `dtype`, with autograd (f32, f64, bf16; CPU and CUDA).
//   x: any shape -> the same shape. To bf16: rounded to nearest, ties to even (framework/bfloat16.h;
//   from f64 through f32, as PyTorch); from bf16: exact; f64 to f32: IEEE rounding.
// x itself when it already has that dtype (no copy, no node).
// Backward: d x = to_dtype(g, x's dtype): a bf16 input gets its gradient rounded to bf16, an f32
// master weight cast to bf16 gets its gradient back in f32.
// Errors: x or dtype not f32, f64 or bf16.
#pragma once

#include "gat/framework/ops/kernel.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

Tensor to_dtype(const Tensor& x, DType dtype);

// The kernel (the forward and the backward pass, and Tensor::to(DType)): out (x's shape, on x's
// device, any dtype, allocated by the caller) = x (any dtype) converted element by element
// (detail/convert.h; to i32: truncated toward zero).
GAT_DECLARE_KERNEL_FN(to_dtype, (const Tensor& x, Tensor& out))

}  // namespace gat::ops
