// batch_norm: torch.nn.functional.batch_norm for x (N, C), channels along axis 1 (f32/f64, CPU
// and CUDA).
//
// training:  mean_c = sum_n x[n,c] / N;  var_c = sum_n (x[n,c] - mean_c)^2 / N   (biased)
//            and, where running_mean/running_var are defined, in place (no autograd):
//              running_mean = (1 - momentum) * running_mean + momentum * mean_c
//              running_var  = (1 - momentum) * running_var  + momentum * var_c * N / (N - 1)
//            (the unbiased variance, as torch); N must be at least 2
// eval:      mean_c = running_mean, var_c = running_var (both required)
//   rstd_c = 1 / sqrt(var_c + eps);  xhat = (x - mean_c) * rstd_c;  out = xhat * weight + bias
// An undefined weight acts as ones, an undefined bias as zeros (affine=False). Column sums
// accumulate in double in a fixed order.
// Backward (g = d out; w = weight or 1):
//   d weight = sum_n g * xhat;   d bias = sum_n g
//   training:  d x = w * rstd * (g - d bias / N - xhat * d weight / N)   (the batch statistics
//              depend on x)
//   eval:      d x = w * rstd * g
// Errors: x not (N, C) f32/f64; weight, bias, running_mean, running_var not (C,) of x's dtype and
// device; momentum outside [0, 1]; eps < 0; N < 2 in training; eval without running statistics.
#pragma once

#include <cstdint>

#include "gat/framework/ops/kernel.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum = 0.1,
                  double eps = 1e-5);

// ---- the kernels behind the op; outputs allocated by the caller ----
//  statistics:      x (N, C) -> mean (C,), var (C,) (biased)
//  update_running:  running_mean, running_var (C,) in place from mean, var of a batch of N rows
//  forward:         writes rstd (C,) from var, then out (N, C)
//  backward:        writes grad_x (N, C) and, where not null, grad_weight, grad_bias (C,)
// kernels:: runs cpu_impl:: or cuda_impl:: by x's device (update_running: mean's).
GAT_DECLARE_KERNEL_FN(batch_norm_statistics, (const Tensor& x, Tensor& mean, Tensor& var))
GAT_DECLARE_KERNEL_FN(batch_norm_update_running, (const Tensor& mean, const Tensor& var, int64_t N,
                                                  double momentum, Tensor& running_mean, Tensor& running_var))
GAT_DECLARE_KERNEL_FN(batch_norm_forward,
                      (const Tensor& x, const Tensor& mean, const Tensor& var, const Tensor& weight,
                       const Tensor& bias, double eps, Tensor& out, Tensor& rstd))
GAT_DECLARE_KERNEL_FN(batch_norm_backward, (const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                            const Tensor& weight, const Tensor& grad_out, bool training,
                                            Tensor& grad_x, Tensor* grad_weight, Tensor* grad_bias))

}  // namespace gat::ops
