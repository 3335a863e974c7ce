// head_mean(x, bias): the mean over heads plus an optional bias, a GATConv's output when its
// heads are averaged, in one kernel each way (f32/f64, CPU and CUDA), with autograd.
//
//   out[n, f] = mean_h x[n, h, f] + bias[f]          x (N, H, F), bias (F,) or undefined -> (N, F)
//
// The numbers of ops::add_bias(ops::mean(x, 1), bias) (ops::mean(x, 1) without a bias): the sum
// over h in double in ops::sum's order, rounded to T, times T(1 / H) rounded on its own, plus the
// bias. CPU: ascending h, bit for bit. CUDA: ascending h within each of 8 strided partial sums,
// then those in order: ops::sum's order whenever it takes the whole axis in one block, so bit for
// bit for F > 1 and H <= 256 (every GAT output layer); otherwise (F = 1: a tree; more heads:
// chunks) equal up to the rounding of the sum.
// Backward (g = d out (N, F)): d x[n, h, f] = g[n, f] * T(1 / H);  d bias = ops::sum(g, 0).
// bf16 inputs: computed in f32, the result stored in bf16 (docs/precision.md).
#pragma once

#include "gat/framework/ops/kernel.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

Tensor head_mean(const Tensor& x, const Tensor& bias = Tensor());

// The kernels (docs/design.md, the op pattern), outputs allocated by the caller: forward writes
// out (N, F) from x (N, H, F) and bias (F,) (null: none); backward writes grad_x (N, H, F) from
// grad_out (N, F) (d bias is ops::sum's). kernels:: runs cpu_impl:: or cuda_impl:: by x's device.
GAT_DECLARE_KERNEL_FN(head_mean_forward, (const Tensor& x, const Tensor* bias, Tensor& out))
GAT_DECLARE_KERNEL_FN(head_mean_backward, (const Tensor& grad_out, Tensor& grad_x))

}  // namespace gat::ops
