// Warp-level row reductions shared by the CUDA kernels of log_softmax, masked_cross_entropy.
// One warp owns one row; lanes stride over its C columns and combine with a butterfly of
// shuffles, so every lane ends with the same result and the summation order is fixed
// (bitwise reproducible, no atomics).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace gat::ops::cuda_impl {

constexpr int kWarp = 32;

template <class T>
__device__ __forceinline__ T warp_max(T v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

template <class T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// logsumexp of row (C,), computed by the whole warp (every lane must call it); -inf for a row of
// -inf or C = 0. Matches cpu_impl::row_logsumexp up to summation order.
template <class T>
__device__ T warp_row_logsumexp(const T* __restrict__ row, int64_t C, int lane) {
  T max = -INFINITY;
  for (int64_t c = lane; c < C; c += kWarp) max = fmax(max, row[c]);
  max = warp_max(max);
  if (max == -INFINITY) return max;
  T sum = 0;
  for (int64_t c = lane; c < C; c += kWarp) sum += exp(row[c] - max);
  return max + log(warp_sum(sum));
}

}  // namespace gat::ops::cuda_impl
