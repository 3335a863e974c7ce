// head_dot(x, a): per-head dot product of node features with a per-head vector.
//   out[n,h] = sum_f x[n,h,f] * a[h,f]
// GAT uses it for the attention terms el = Wh . a_src and er = Wh . a_dst.
//   x: (N, H, F) f32|f64, a: (H, F) same dtype/device  ->  out (N, H)
// Backward: d x[n,h,f] = g[n,h] * a[h,f];  d a[h,f] = sum_n g[n,h] * x[n,h,f], reduced in a fixed
// order (row blocks of rows_per_block(N) summed one after another) on both devices, so the result
// is bitwise reproducible and independent of the thread count (docs/kernels.md).
// bf16 x: computed in f32, the result stored in bf16 (docs/precision.md). On the CPU the f32 op
// runs on widened copies; on CUDA, beside an f32 a (a master weight), the kernels read bf16 x and
// write bf16 out and d x, with d a f32 (a bf16 a there goes through f32 too). The paired kernels
// below take f32 and f64 from their callers.
#pragma once

#include <algorithm>
#include <cstdint>

#include "gat/framework/ops/kernel.h"
#include "gat/framework/rng.h"
#include "gat/framework/rng_cpu.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

Tensor head_dot(const Tensor& x, const Tensor& a);

// The two head_dots of one x in one pass each way: out1 = head_dot(x, a1), out2 = head_dot(x, a2)
// (N, H); grad_a1, grad_a2 (H, F) the d a of head_dot_backward for g1 and g2, summed in its
// order (the same bits), x read once. The forward is that of GAT's projection x, read for el and
// er and as the values: with `values` (N, H, F) (null for none) it also writes values =
// dropout(x, key) (keep_scale as dropout_forward's; `kept` holds the CPU's decisions), and with
// `rows` (N, R) (CUDA only: kernels:: throws on the CPU; H F + H <= R; null for none) each
// node's values (x itself without `values`) then its out1: rows[n, 0 : H F] = values[n],
// rows[n, H F : H F + H] = out1[n].
// The values and rows have dropout_forward's and head_dot's bits.
GAT_DECLARE_KERNEL_FN(head_dot_pair_dropout_forward,
                      (const Tensor& x, const Tensor& a1, const Tensor& a2, const DropoutKey& key,
                       double keep_scale, KeepMask& kept, Tensor& out1, Tensor& out2, Tensor* values,
                       Tensor* rows))
GAT_DECLARE_KERNEL_FN(head_dot_pair_grad_a,
                      (const Tensor& x, const Tensor& g1, const Tensor& g2, Tensor& grad_a1, Tensor& grad_a2))

// The gradient of an x (N, H, F) read by dropout and by two head_dots (GAT's projection, read
// as the values and for el and er): base (N, H, F) the gradient of dropout's output,
//   grad_x[n,h,f] = keep * keep_scale * base[n,h,f] + g1[n,h] a1[h,f] + g2[n,h] a2[h,f]
// with keep the decision of flat element (n, h, f) (1 and keep_scale 1 without dropout; `kept`
// holds the forward's decisions on the CPU, CUDA draws them again). grad_x may be base itself.
// One pass where dropout's backward, two head_dot backwards and two gradient sums take five.
GAT_DECLARE_KERNEL_FN(head_dot_pair_grad_x, (const Tensor& base, const DropoutKey& key, double keep_scale,
                                             const KeepMask& kept, const Tensor& a1, const Tensor& g1,
                                             const Tensor& a2, const Tensor& g2, Tensor& grad_x))

namespace head_dot_detail {
// Rows of x per partial sum of d a: at least 32, and at most 4,096 partials.
inline int64_t rows_per_block(int64_t N) { return std::max<int64_t>(32, (N + 4095) / 4096); }
}  // namespace head_dot_detail

// The kernels (docs/design.md, the op pattern): forward writes out (N, H); backward, given
// grad_out (N, H), writes grad_x (N, H, F) and/or grad_a (H, F) (either may be null); both
// overwrite. kernels:: runs cpu_impl:: or cuda_impl:: by the tensors' device.
GAT_DECLARE_KERNEL_FN(head_dot_forward, (const Tensor& x, const Tensor& a, Tensor& out))
GAT_DECLARE_KERNEL_FN(head_dot_backward, (const Tensor& x, const Tensor& a, const Tensor& grad_out,
                                          Tensor* grad_x, Tensor* grad_a))

}  // namespace gat::ops
