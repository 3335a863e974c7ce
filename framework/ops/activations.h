// Elementwise activations with autograd (f32/f64, CPU and CUDA). x: any shape -> the same shape.
// relu6, gelu, silu and softplus are pointwise functions of unary.h.
//
//   relu(x)                        = max(x, 0)
//   leaky_relu(x, negative_slope)  = x > 0 ? x : negative_slope * x
//   elu(x, alpha)                  = x > 0 ? x : alpha * (exp(x) - 1)
//
// Backward (g = d out), with the derivative at x = 0 taken from the left branch:
//   relu, leaky_relu:  d x = x > 0 ? g : negative_slope * g    (relu: negative_slope = 0)
//   elu:               d x = x > 0 ? g : alpha * exp(x) * g
// bf16 inputs: computed in f32, the result stored in bf16: on CUDA by the kernels themselves (bf16
// storage, f32 arithmetic), on the CPU through f32 copies (docs/precision.md).
#pragma once

#include "gat/framework/ops/kernel.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

Tensor relu(const Tensor& x);
Tensor leaky_relu(const Tensor& x, double negative_slope);
Tensor elu(const Tensor& x, double alpha = 1.0);

// ---- the kernels: every tensor of x's shape and dtype, outputs allocated by the caller ----
GAT_DECLARE_KERNEL_FN(leaky_relu_forward, (const Tensor& x, double negative_slope, Tensor& out))
GAT_DECLARE_KERNEL_FN(leaky_relu_backward,
                      (const Tensor& x, const Tensor& grad_out, double negative_slope, Tensor& grad_x))
GAT_DECLARE_KERNEL_FN(elu_forward, (const Tensor& x, double alpha, Tensor& out))
GAT_DECLARE_KERNEL_FN(elu_backward, (const Tensor& x, const Tensor& grad_out, double alpha, Tensor& grad_x))

}  // namespace gat::ops
