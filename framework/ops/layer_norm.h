// layer_norm: torch.nn.functional.layer_norm over the last axis (f32/f64, CPU and CUDA).
//
//   x: (..., D) viewed as R = numel / D rows of D     weight, bias: (D,) or undefined
//   mean_r = sum_d x[r,d] / D;   var_r = sum_d (x[r,d] - mean_r)^2 / D   (biased, as torch)
//   rstd_r = 1 / sqrt(var_r + eps);   xhat = (x - mean_r) * rstd_r
//   out = xhat * weight + bias                                             -> the shape of x
// An undefined weight acts as ones, an undefined bias as zeros (torch's elementwise_affine=False,
// or bias=False). Row sums accumulate in double in a fixed order.
// Backward (g = d out, gw = g * weight):
//   d x = rstd * (gw - mean_d(gw) - xhat * mean_d(gw * xhat))
//   d weight = sum_r g * xhat;   d bias = sum_r g     (column sums over the rows, fixed order)
// Errors: x not f32/f64 or with no axis or D = 0; weight/bias not (D,) of x's dtype and device;
// eps < 0.
#pragma once

#include "gat/framework/ops/kernel.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);

// ---- the kernels behind the op; x viewed (R, D); outputs allocated by the caller ----
//  forward:  writes out (R, D), mean (R,), rstd (R,)
//  backward: writes grad_x (R, D) and, where not null, grad_weight (D,), grad_bias (D,)
//            (overwrites, never accumulates)
// kernels:: runs cpu_impl:: or cuda_impl:: by x's device.
GAT_DECLARE_KERNEL_FN(layer_norm_forward, (const Tensor& x, const Tensor& weight, const Tensor& bias,
                                           double eps, Tensor& out, Tensor& mean, Tensor& rstd))
GAT_DECLARE_KERNEL_FN(layer_norm_backward,
                      (const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                       const Tensor& grad_out, Tensor& grad_x, Tensor* grad_weight, Tensor* grad_bias))

}  // namespace gat::ops
