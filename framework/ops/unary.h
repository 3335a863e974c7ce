// Pointwise functions without parameters, with autograd (f32/f64, CPU and CUDA).
// x: any shape -> the same shape.
//
//   exp(x)
//   log(x)       natural logarithm (-inf at 0, NaN below)
//   sigmoid(x) = 1 / (1 + exp(-x))   (0 and 1 in the limits, never NaN)
//   tanh(x)
//
// Backward (g = d out, y = out):  exp: g * y   log: g / x   sigmoid: g * y * (1 - y)   tanh: g * (1 - y * y)
#pragma once

#include "gat/framework/ops/kernel.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);

enum class UnaryOp { exp, log, sigmoid, tanh };

// ---- the kernels: every tensor of x's shape and dtype, outputs allocated by the caller ----
//  forward:  out = op(x)
//  backward: grad_x from grad_out and the forward's x (read by log only) or out (read by the
//            others; the one not read may be undefined)
GAT_DECLARE_KERNEL_FN(unary_forward, (UnaryOp op, const Tensor& x, Tensor& out))
GAT_DECLARE_KERNEL_FN(unary_backward, (UnaryOp op, const Tensor& x, const Tensor& out, const Tensor& grad_out,
                                       Tensor& grad_x))

}  // namespace gat::ops
