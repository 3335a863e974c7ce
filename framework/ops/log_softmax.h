// log_softmax(x): log of the softmax over the last axis of x (N, C), computed stably as
// x - logsumexp(x) per row, f32 or f64, CPU and CUDA.
//
// Backward, with y = log_softmax(x) and G = d y:  dx = G - exp(y) * sum_c G[:, c].
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "gat/framework/tensor.h"

namespace gat::ops {

// x: (N, C) f32|f64  ->  (N, C). Records autograd.
Tensor log_softmax(const Tensor& x);

namespace cpu_impl {
// log(sum_c exp(row[c])) of one row of C values, shifted by the row max (-inf for C = 0 or a
// row of -inf). Shared by log_softmax and masked_cross_entropy.
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

namespace cuda_impl {  // log_softmax.cu; overwrite their outputs
void log_softmax_forward(const Tensor& x, Tensor& out);  // x (N, C) -> out (N, C)
// out (N, C) = log_softmax(x), grad_out (N, C)  ->  grad_x (N, C)
void log_softmax_backward(const Tensor& out, const Tensor& grad_out, Tensor& grad_x);
}  // namespace cuda_impl

}  // namespace gat::ops
