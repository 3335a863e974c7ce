// softmax and log_softmax along one axis, with autograd (f32/f64, CPU and CUDA).
//
//   log_softmax(x, axis) = x - logsumexp(x) along `axis`
//   softmax(x, axis)     = exp(x - logsumexp(x)) along `axis`
//   x: any shape with at least one dimension -> the same shape; axis < 0 counts from the end
//   (default: the last). logsumexp subtracts the maximum first (stable for any finite input):
//   lse = max + log(sum exp(x - max)).
//
// Backward (G = d out, y = out), sums along `axis`:
//   log_softmax:  dx = G - exp(y) * sum(G)
//   softmax:      dx = y * (G - sum(G * y))
// Errors: non-float dtypes, 0-dimensional x, an axis outside [-dim, dim).
// bf16 inputs: computed in f32, the result stored in bf16 (docs/precision.md).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "gat/framework/ops/kernel.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

Tensor log_softmax(const Tensor& x, int64_t axis = -1);
Tensor softmax(const Tensor& x, int64_t axis = -1);

// ---- the kernels: x, out, grad_out, grad_x viewed (outer, len, inner), the axis of length len
// (stride inner); `log` picks log_softmax over softmax. Outputs allocated by the caller. ----
//  forward:  out from x
//  backward: grad_x from the forward's out and grad_out
// Every sum along the axis runs in one fixed order (CPU: ascending; CUDA: a warp per slice when
// inner = 1, lanes strided then a butterfly; a thread per slice in ascending order otherwise), so
// each device gives the same bits on every call.
GAT_DECLARE_KERNEL_FN(softmax_forward,
                      (const Tensor& x, int64_t outer, int64_t len, int64_t inner, bool log, Tensor& out))
GAT_DECLARE_KERNEL_FN(softmax_backward, (const Tensor& out, const Tensor& grad_out, int64_t outer,
                                         int64_t len, int64_t inner, bool log, Tensor& grad_x))

namespace cpu_impl {
// log(sum_c exp(row[c])) of one row of C values, shifted by the row max (-inf for C = 0 or a
// row of -inf). Shared by the softmax kernels and masked_cross_entropy.
template <class T>
T row_logsumexp(const T* row, int64_t C) {
  T max = -std::numeric_limits<T>::infinity();
  for (int64_t c = 0; c < C; ++c) max = row[c] > max ? row[c] : max;
  if (max == -std::numeric_limits<T>::infinity()) return max;
  T sum = 0;
  for (int64_t c = 0; c < C; ++c) sum += std::exp(row[c] - max);
  return max + std::log(sum);
}
}  // namespace cpu_impl

}  // namespace gat::ops
